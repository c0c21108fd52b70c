"""Claude Code's hook protocol: stdin JSON in, stdout JSON out, exit code 0.

``PreToolUse`` asks for a decision (below). ``PostToolUse`` (the tool ran) and
``PostToolUseFailure`` (it failed) come after the call: the hook answers nothing
and records the call's result (:mod:`.post`). An MCP answer with ``isError`` is
taken as failed under either event: which of the two Claude Code sends for it is
not documented.

Kept import-free (the C JSON scanner, no :mod:`json` on the way in) because the
hook runs this for every matching tool call, read-only ones included.

Outcome → output (see docs/hosts.md):

=========  ==============================================================
none       exit 0, nothing on stdout (never ``allow``: that would skip the
           user's own permission rules)
context    exit 0, ``hookSpecificOutput.additionalContext``
deny       exit 0, ``permissionDecision: deny`` + reason (shown to the model)
prompt     ``ask`` — or ``deny`` when ``guard.prompt_as`` is ``deny``
defer      ``defer`` (honoured by ``claude -p`` only)
=========  ==============================================================
"""

from __future__ import annotations

from ..errors import HookInputError
from . import MAX_INPUT_BYTES, Host, load_object, tool_name_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .calls import Call

__all__ = [
    "EVENT",
    "MAX_INPUT_BYTES",
    "POST_EVENTS",
    "PROTOCOL",
    "HookInput",
    "HookInputError",
    "blocking",
    "parse",
    "parse_input",
    "render",
]

# The thin hook's budget is long: a tag may take a while, and install sets Claude Code's
# timeout above it. The payload already names the call as the catalog does: the thin hook
# sends it as read.
PROTOCOL = Host("claude-code", "PreToolUse", ("ask", "deny"), budget_s=150.0,
                        sends_stdin=True)  # fmt: skip
EVENT = PROTOCOL.event
# The events after a call, and the result each says (None: read the tool's answer).
POST_EVENTS: dict[str, str | None] = {"PostToolUse": None, "PostToolUseFailure": "failed"}
# A post hook that fails exits 1: Claude Code shows its stderr to the user and goes on.
POST_FAILURE_EXIT = 1


class HookInput:
    """The fields of a payload the guard uses; ``event``: PreToolUse or a post event."""

    __slots__ = (
        "cwd", "event", "permission_mode", "result", "session_id", "tool_input", "tool_name",
        "tool_use_id",
    )  # fmt: skip

    def __init__(self, raw: dict[str, Any]) -> None:
        self.event: str = raw.get("hook_event_name", EVENT)
        # After the call: succeeded or failed; None before it.
        self.result: str | None = _result(self.event, raw) if self.event != EVENT else None
        self.tool_name: str = raw["tool_name"]
        self.tool_input: Any = raw.get("tool_input", {})
        self.session_id: str | None = _opt_str(raw, "session_id")
        self.tool_use_id: str | None = _opt_str(raw, "tool_use_id")
        self.permission_mode: str | None = _opt_str(raw, "permission_mode")
        self.cwd: str | None = _opt_str(raw, "cwd")  # the session's directory


def parse_input(data: bytes) -> HookInput:
    """Validate stdin; HookInputError says what is wrong."""
    raw = load_object(data)
    event = raw.get("hook_event_name", EVENT)
    if event != EVENT and event not in POST_EVENTS:
        handled = ", ".join((EVENT, *POST_EVENTS))
        msg = f"zerto-rewind hook handles {handled} only, got hook_event_name={event!r}"
        raise HookInputError(msg)
    tool_name_of(raw, "tool_name")
    if not isinstance(raw.get("tool_input", {}), dict):
        msg = "hook input's tool_input must be a JSON object"
        raise HookInputError(msg)
    return HookInput(raw)


def parse(data: bytes, servers: tuple[str, ...] = ()) -> Call:
    """Stdin → the call the thin hook asks about (every tool: the service's catalog
    classifies it); HookInputError as :func:`parse_input`. ``servers`` is not needed:
    Claude Code names MCP tools as the catalog does."""
    from .calls import MCP, Call

    found = parse_input(data)
    ids = {"session_id": found.session_id, "tool_use_id": found.tool_use_id, "cwd": found.cwd}
    call = Call(MCP, found.tool_name, found.tool_name, found.tool_input, ids)
    call.result = found.result
    return call


def blocking(reason: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) that block the call: exit 2 with the reason on stderr."""
    return "", reason.strip() or "zerto-rewind: the hook failed; the call is blocked.", 2


def render(outcome: str, reason: str, context: str, *, prompt_as: str = "ask") -> str:
    """The stdout text for an outcome of the guard; the hook exits 0 with every one of them."""
    if outcome == "none":
        return ""
    if outcome == "context":
        return _dump({"hookEventName": EVENT, "additionalContext": context})
    decision = {"deny": "deny", "prompt": "ask", "defer": "defer"}.get(outcome, "deny")
    if decision == "ask" and prompt_as == "deny":
        decision = "deny"
    if outcome not in ("deny", "prompt", "defer"):
        reason = f"zerto-rewind: unknown guard outcome {outcome!r}; denying to stay safe. {reason}"
    body = {
        "hookEventName": EVENT,
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    }
    return _dump(body)


def _dump(specific: dict[str, str]) -> str:
    import json  # only when there is something to say

    return json.dumps({"hookSpecificOutput": specific}, ensure_ascii=False)


def _result(event: str, raw: dict[str, Any]) -> str:
    """What a post event says of the call: ``failed`` for a failure event or an MCP answer
    with ``isError``, else ``succeeded``."""
    fixed = POST_EVENTS.get(event)
    if fixed is not None:
        return fixed
    response = raw.get("tool_response")
    if isinstance(response, dict) and response.get("isError") is True:
        return "failed"
    return "succeeded"


def _opt_str(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None
