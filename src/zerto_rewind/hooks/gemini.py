"""Gemini CLI's ``BeforeTool`` and ``AfterTool`` hook protocol (``hooks`` in ``settings.json``).

Stdin: ``tool_name`` (``run_shell_command``, ``write_file``, ``replace``, or
``mcp_<server>_<tool>``), ``tool_input``, ``mcp_context`` for MCP tools
(``server_name``, ``tool_name``: the server and the tool as the server names it),
``session_id``, ``cwd``. An MCP tool becomes ``mcp__<server>__<tool>`` from
``mcp_context``; without it, from the name and the servers the install named,
longest first. Sources: docs/hosts.md.

Outcome → stdout (top-level JSON, exit 0 with each):

=========  ==============================================================
none       nothing (never ``allow``: it would skip Gemini's own confirmation)
context    ``systemMessage`` (shown to the user; Gemini 0.61 gives a
           ``BeforeTool`` hook's ``additionalContext`` to nobody, so the
           model does not see it) and ``hookSpecificOutput.additionalContext``
           for a version that does
deny       ``decision: deny`` + ``reason`` (sent to the agent as the error)
prompt     ``decision: ask`` (Gemini asks the user, even under ``--yolo``) —
           or ``deny`` with ``--prompt-as deny``, which unattended runs need:
           in ``-p`` nobody answers, and the run waits
defer      ``deny``: Gemini has no defer
=========  ==============================================================

``AfterTool`` (the call ran): the hook answers nothing and records the result with
the service; ``failed`` when its ``tool_response`` carries an ``error``
(:func:`.calls.after_result`; the field is UNCONFIRMED, docs/hosts.md). A failure
to record is exit 1 (a warning; the session goes on).

Bad stdin: a JSON deny on stdout *and* exit 2 with the reason on stderr (Gemini
honours the JSON whatever the exit code; exit 2 blocks with stderr as reason).
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

PROTOCOL = Host("gemini", "BeforeTool", ("ask", "deny"))
EVENT, DEFAULT_PROMPT = PROTOCOL.event, PROTOCOL.default_prompt
# The events after a call, and the result each says (None: read the tool's answer).
POST_EVENTS: dict[str, str | None] = {"AfterTool": None}
# A post hook that fails: any code but 0 and 2 is a warning; the session goes on.
POST_FAILURE_EXIT = 1
SHELL_TOOLS = ("run_shell_command",)
FILE_TOOLS = ("write_file", "replace")


def parse(data: bytes, servers: tuple[str, ...] = ()) -> Call:
    """Stdin → the call (``result`` set for a post event); HookInputError for anything
    that is not a BeforeTool or AfterTool payload."""
    raw, name, tool_input, ids = read_payload(data, "Gemini", (EVENT, *POST_EVENTS))
    mcp_name = _mcp_name(name, raw.get("mcp_context"), servers)
    call = host_call(name, tool_input, ids, shell=SHELL_TOOLS, files=FILE_TOOLS,
                     path_keys=("file_path", "path"), mcp_name=mcp_name)  # fmt: skip
    return after_result(call, raw, raw.get("hook_event_name"), POST_EVENTS, ("tool_response",))


def _mcp_name(name: str, context: Any, servers: tuple[str, ...]) -> str:
    if isinstance(context, dict):
        server, tool = context.get("server_name"), context.get("tool_name")
        if isinstance(server, str) and server and isinstance(tool, str) and tool:
            return f"mcp__{server}__{tool}"
    # Gemini sanitises and may shorten the name; unsplittable, it stays as Gemini
    # named it, which no catalog lists: unlisted, a prompt.
    return split_server(name, "mcp_", servers, "_") or name


def render(outcome: str, reason: str, context: str, *, prompt_as: str = DEFAULT_PROMPT) -> str:
    """The stdout text for the guard's outcome; the hook exits 0 with every one of them."""
    if outcome == "none":
        return ""
    if outcome == "context":
        return _dump(
            {
                "hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": context},
                "systemMessage": context,
            }
        )
    if outcome == "prompt" and prompt_as == "ask":
        return _dump({"decision": "ask", "reason": reason})
    return _dump(
        {"decision": "deny", "reason": deny_reason(outcome, reason, "an unattended Gemini run")}
    )


def blocking(reason: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) that block the call: a JSON deny and exit 2 with stderr."""
    reason = reason.strip() or "zerto-rewind: the hook failed; the call is blocked."
    return _dump({"decision": "deny", "reason": reason}), reason, 2


def _dump(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, ensure_ascii=False)
