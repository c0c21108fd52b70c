"""Codex CLI's ``PreToolUse`` and ``PostToolUse`` hook protocol (``~/.codex/hooks.json``).

Stdin: ``tool_name`` (``Bash``, ``apply_patch``, or ``mcp__<server>__<tool>``: the
catalog's own names), ``tool_input`` (MCP: the arguments; ``Bash`` and
``apply_patch``: ``{"command": …}``), ``session_id``, ``turn_id``, ``tool_use_id``,
``cwd``. Sources: docs/hosts.md.

Outcome → stdout (exit 0 with each):

=========  ==============================================================
none       nothing (Codex reports a bare ``allow`` as unsupported)
context    ``hookSpecificOutput.additionalContext`` (a developer message)
deny       ``permissionDecision: deny`` + a non-empty reason (an empty one
           does not block)
prompt     ``deny``: Codex does not support ``ask`` (the hook is marked
           failed and the call runs), so a person decides outside the agent
defer      ``deny``: Codex has no defer
=========  ==============================================================

``PostToolUse`` (the call ran): the hook answers nothing and records the result
with the service; ``failed`` when its ``tool_response`` says so
(:func:`.calls.after_result`; the field is UNCONFIRMED, docs/hosts.md). A
failure to record is exit 1 (a failed hook, nothing blocked).

Bad stdin is exit 2 with the reason on stderr: exit 2 with an *empty* stderr
does not block in Codex.
"""

from __future__ import annotations

from . import Host
from .calls import (
    FILES,
    Call,
    after_result,
    apply_patch_paths,
    deny_reason,
    host_call,
    read_payload,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_PROMPT", "EVENT", "POST_EVENTS", "POST_FAILURE_EXIT", "PROTOCOL", "blocking",
    "parse", "render",
]  # fmt: skip

PROTOCOL = Host("codex", "PreToolUse", ("deny",))
EVENT, DEFAULT_PROMPT = PROTOCOL.event, PROTOCOL.default_prompt
# The events after a call, and the result each says (None: read the tool's answer).
POST_EVENTS: dict[str, str | None] = {"PostToolUse": None}
# A post hook that fails: any code but 0 and 2 is a failed hook; the session goes on.
POST_FAILURE_EXIT = 1
# The tools this hook checks itself, as Codex names them (apply_patch's aliases too).
SHELL_TOOLS = ("Bash",)
FILE_TOOLS = ("Write", "Edit")  # and apply_patch, whose patch names its files


def parse(data: bytes, servers: tuple[str, ...] = ()) -> Call:
    """Stdin → the call (``result`` set for a post event); HookInputError for anything
    that is not a PreToolUse or PostToolUse payload."""
    raw, name, tool_input, ids = read_payload(data, "Codex", (EVENT, *POST_EVENTS))
    if name == "apply_patch":
        call = Call(FILES, "Write", name, tool_input, ids, paths=apply_patch_paths(tool_input))
    else:
        call = host_call(name, tool_input, ids, shell=SHELL_TOOLS, files=FILE_TOOLS,
                         path_keys=("file_path", "path"), mcp_name=name)  # fmt: skip
    return after_result(call, raw, raw.get("hook_event_name"), POST_EVENTS, ("tool_response",))


def render(outcome: str, reason: str, context: str, *, prompt_as: str = DEFAULT_PROMPT) -> str:
    """The stdout text for the guard's outcome; the hook exits 0 with every one of them."""
    if outcome == "none":
        return ""
    if outcome == "context":
        return _dump({"hookEventName": EVENT, "additionalContext": context})
    return _dump(
        {
            "hookEventName": EVENT,
            "permissionDecision": "deny",
            # Codex adds ". Tool: <name>" after the reason: no period of our own before it.
            "permissionDecisionReason": deny_reason(outcome, reason, "a Codex hook").rstrip("."),
        }
    )


def blocking(reason: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) that block the call whatever else happened: exit 2 + stderr."""
    return "", reason.strip() or "zerto-rewind: the hook failed; the call is blocked.", 2


def _dump(specific: dict[str, Any]) -> str:
    import json

    return json.dumps({"hookSpecificOutput": specific}, ensure_ascii=False)
