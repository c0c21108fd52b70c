"""GitHub Copilot CLI's ``preToolUse`` hook protocol (``~/.copilot/hooks/*.json``).

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

Bad stdin: a JSON deny and exit 2 (a non-zero exit blocks in Copilot, even
with JSON saying allow).
"""

from __future__ import annotations

from . import Host
from .calls import Call, deny_reason, host_call, read_payload, split_server

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DEFAULT_PROMPT", "EVENT", "PROTOCOL", "blocking", "parse", "render"]

PROTOCOL = Host("copilot", "preToolUse", ("deny",))
EVENT, DEFAULT_PROMPT = PROTOCOL.event, PROTOCOL.default_prompt
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
    """Stdin → the call; HookInputError for anything that is not a preToolUse payload."""
    _, name, tool_input, ids = read_payload(
        data,
        "Copilot",
        (EVENT, "PreToolUse"),  # camelCase, or the PascalCase (Claude-style) form
        name_keys=("toolName", "tool_name"),
        input_keys=("toolArgs", "tool_input"),
        id_keys=_ID_KEYS,
    )
    mcp_name = split_server(name, "", servers, "-") or name
    return host_call(name, tool_input, ids, shell=SHELL_TOOLS, files=FILE_TOOLS,
                     path_keys=PATH_KEYS, mcp_name=mcp_name)  # fmt: skip


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
