"""GitHub Copilot CLI's ``preToolUse`` and ``postToolUse`` hook protocol (``~/.copilot/hooks/``).

Stdin (camelCase): ``toolName`` (``bash``, ``create``, ``edit``, or
``<server>-<tool>`` for an MCP tool), ``toolArgs`` (an object, or a string that
holds one), ``sessionId``, ``cwd``; the PascalCase form (``tool_name``,
``tool_input``) is read too. An MCP name is split on the servers the install
named (``--servers``), longest first: a name that fits none is sent as Copilot
named it, which no catalog lists (unlisted: a prompt, so a deny). Sources:
docs/hosts.md.

Outcome → stdout (one flat JSON object, exit 0 with each):

=========  ==============================================================
none       nothing (never ``allow``)
context    ``additionalContext`` alone (Copilot's hook output type has it,
           and its runtime adds "Additional context from preToolUse hook")
deny       ``permissionDecision: deny`` + ``permissionDecisionReason``
prompt     ``deny``: ``ask`` is a denial for Copilot's cloud agent, and was
           seen auto-approved under ``--yolo``
defer      ``deny``: Copilot has no defer
=========  ==============================================================

``postToolUse`` (the call ran) and ``postToolUseFailure`` (it failed): the hook
answers nothing and records the result with the service (a payload that names no
event but has a ``toolResult`` is a ``postToolUse``); ``postToolUse`` is
``failed`` when its ``toolResult`` says so (``resultType: failure``;
:func:`.calls.after_result`). Their payloads are UNCONFIRMED (docs/hosts.md). A
failure to record is exit 0 with the reason on stderr: what Copilot does with a
post hook's non-zero exit is not documented, and its pre hook treats one as a
block.

Bad stdin: a JSON deny and exit 2 (a non-zero exit blocks in Copilot, even
with JSON saying allow).
"""

from __future__ import annotations

from . import Host
from .calls import Call, after_result, deny_reason, host_call, read_payload, split_server

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_PROMPT", "EVENT", "POST_EVENTS", "POST_FAILURE_EXIT", "PROTOCOL", "blocking",
    "parse", "render",
]  # fmt: skip

PROTOCOL = Host("copilot", "preToolUse", ("deny",))
EVENT, DEFAULT_PROMPT = PROTOCOL.event, PROTOCOL.default_prompt
# The events after a call (camelCase, and the PascalCase form), and the result each says
# (None: read the tool's answer).
POST_EVENTS: dict[str, str | None] = {
    "postToolUse": None, "postToolUseFailure": "failed",
    "PostToolUse": None, "PostToolUseFailure": "failed",
}  # fmt: skip
POST_FAILURE_EXIT = 0
SHELL_TOOLS = ("bash",)
FILE_TOOLS = ("create", "edit")
# Where Copilot's file tools name their file (``path``, as 1.0.102's tool list says; the
# others accepted so that a renamed argument is still checked).
PATH_KEYS = ("path", "file_path", "filePath")
_ID_KEYS: dict[str, tuple[str, ...]] = {
    "session_id": ("sessionId", "session_id"),
    "tool_use_id": ("toolCallId", "tool_use_id"),
    "cwd": ("cwd", "workingDirectory"),
}


def parse(data: bytes, servers: tuple[str, ...] = ()) -> Call:
    """Stdin → the call (``result`` set for a post event); HookInputError for anything
    that is not a preToolUse or post event payload."""
    raw, name, tool_input, ids = read_payload(
        data,
        "Copilot",
        (EVENT, "PreToolUse", *POST_EVENTS),  # camelCase, or the PascalCase (Claude-style) form
        name_keys=("toolName", "tool_name"),
        input_keys=("toolArgs", "tool_input"),
        id_keys=_ID_KEYS,
    )
    mcp_name = split_server(name, "", servers, "-") or name
    call = host_call(name, tool_input, ids, shell=SHELL_TOOLS, files=FILE_TOOLS,
                     path_keys=PATH_KEYS, mcp_name=mcp_name)  # fmt: skip
    # A camelCase payload may name no event: one with a toolResult comes after the call.
    event = raw.get("hook_event_name", raw.get("hookEventName"))
    if event is None:
        event = "postToolUse" if "toolResult" in raw else EVENT
    return after_result(call, raw, event, POST_EVENTS, ("toolResult", "tool_response"))


def render(outcome: str, reason: str, context: str, *, prompt_as: str = DEFAULT_PROMPT) -> str:
    """The stdout text for the guard's outcome; the hook exits 0 with every one of them."""
    if outcome == "none":
        return ""
    if outcome == "context":
        return _dump({"additionalContext": context})
    reason = deny_reason(outcome, reason, "a Copilot hook")
    return _dump({"permissionDecision": "deny", "permissionDecisionReason": reason})


def blocking(reason: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) that block the call: a JSON deny and exit 2."""
    reason = reason.strip() or "zerto-rewind: the hook failed; the call is blocked."
    return _dump({"permissionDecision": "deny", "permissionDecisionReason": reason}), reason, 2


def _dump(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, ensure_ascii=False)
