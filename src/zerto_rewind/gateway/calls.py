"""One ``tools/call`` through the gateway: the core guard decides, then forward or refuse.

* none (read-only): forward.
* context (checkpoint confirmed): forward; the result names the checkpoint
  (an added text block, and ``_meta``).
* deny (failed, pending, errors): not forwarded; ``isError`` with the guard's reason.
* prompt (VM unknown, no VM, unlisted): ask the human by MCP elicitation when
  the client declared it; otherwise the call is refused.
* defer: not forwarded (a gateway cannot pause its caller).

A mutating call is forwarded only after the guard answered for it; every
error on the way (guard crash, timeout, Redis, ZVM) is a refusal with a reason.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from ..core.decision import Decision, Outcome, Row, ToolCall
from ..core.decisions_log import write_record
from ..errors import StateError
from .upstream import UpstreamError

if TYPE_CHECKING:
    from .service import Gateway
    from .upstream import Upstream

__all__ = [
    "APPROVAL_FIELD",
    "APPROVAL_SCHEMA",
    "Asker",
    "CallContext",
    "handle_call",
    "host_tool_name",
]

log = logging.getLogger("zerto_rewind.gateway")

# The answer the human gives to an elicitation: True approve, False decline,
# None when nobody answered (cancel, timeout, or the client cannot be asked).
Asker = Callable[[str], Awaitable[bool | None]]


def host_tool_name(upstream: str, tool: str) -> str:
    """The name a host gives the tool (``mcp__vsphere__power_off``): one catalog for both doors."""
    return f"mcp__{upstream}__{tool}"


@dataclass
class CallContext:
    """Who is calling, and whether (and how) a human can be asked."""

    client: str
    session_id: str | None
    tool_use_id: str | None = None
    # Handshake-era clients are asked over the connection's back channel.
    ask: Asker | None = None
    # 2026-07-28 clients are asked by returning an InputRequiredResult; they
    # retry the call with the answer and the state we gave them.
    ask_inline: bool = False
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None


# The key of our question in an InputRequiredResult, and the form it shows.
APPROVAL_KEY = "zerto-rewind/approve"
APPROVAL_FIELD = "approve"
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        APPROVAL_FIELD: {
            "type": "boolean",
            "title": "Run it without a checkpoint",
            "description": "Approve only if you accept this change with no rewind point.",
        }
    },
    "required": [APPROVAL_FIELD],
}
# Binds an answer to the exact call it was asked about, for the life of this process.
_STATE_KEY = secrets.token_bytes(32)


async def handle_call(
    gateway: Gateway,
    upstream: Upstream,
    tool: str,
    arguments: dict[str, Any] | None,
    ctx: CallContext,
) -> types.CallToolResult | types.InputRequiredResult:
    """Guard one call and forward it only if the guard (or the human) allows it."""
    started_wall, started_mono = time.time(), time.monotonic()
    name = host_tool_name(upstream.name, tool)
    call = ToolCall(
        name,
        arguments or {},
        session_id=ctx.session_id,
        tool_use_id=ctx.tool_use_id,
        origin="gateway",
        started_at=started_wall,
    )
    decision = await gateway.decide(call)
    answer: str | None = None
    forward = decision.outcome in (Outcome.NONE, Outcome.CONTEXT)
    if decision.outcome == Outcome.PROMPT:
        if ctx.ask is None and ctx.ask_inline:
            inline = _inline_answer(call, ctx)
            if inline is None:
                # Logged now: a question nobody ever answers still leaves its line.
                _log(gateway, decision, call, ctx, "asked")
                return _question(decision, call)
            forward, answer = inline
        else:
            forward, answer = await _prompt(gateway, decision, ctx)
    decision.elapsed_ms = int((time.monotonic() - started_mono) * 1000)
    gateway.metrics.decided(decision, time.monotonic() - started_mono, answer)
    if decision.row != Row.READ_ONLY:  # as the hook: read-only calls leave no log line
        _log(gateway, decision, call, ctx, answer)
    if not forward:
        return _refusal(decision, answer)
    try:
        result = await upstream.call_tool(tool, arguments, gateway.call_timeout_s(upstream))
    except UpstreamError as exc:
        gateway.metrics.upstream_error(upstream.name, "call")
        return _error_result(f"{exc}; the call may not have run. {_protection_note(decision)}")
    gateway.metrics.forwarded(upstream.name, decision.row)
    if decision.outcome == Outcome.CONTEXT:
        return _with_checkpoint(result, decision)
    return result


async def _prompt(gateway: Gateway, decision: Decision, ctx: CallContext) -> tuple[bool, str]:
    """A human decides; without one, ``guard.prompt_as`` does (deny unless set to ask)."""
    if ctx.ask is None:
        return False, "no_elicitation"
    message = _question_text(decision)
    try:
        with anyio.move_on_after(gateway.settings.gateway.elicit_timeout_s):
            approved = await ctx.ask(message)
            if approved is None:
                return False, "cancelled"
            return approved, "approved" if approved else "declined"
    except Exception as exc:  # a client that breaks mid-question has not approved
        log.warning("elicitation failed: %s", type(exc).__name__)
        return False, "failed"
    return False, "timeout"


def _question_text(decision: Decision) -> str:
    # The question first: a host may show only the first line of a long message.
    return f"Run {decision.tool_name} with no Zerto checkpoint in front of it?\n\n{decision.reason}"


def _call_state(call: ToolCall) -> str:
    body = json.dumps([call.tool_name, call.tool_input], sort_keys=True, default=str)
    return hmac.new(_STATE_KEY, body.encode(), hashlib.sha256).hexdigest()


def _question(decision: Decision, call: ToolCall) -> types.InputRequiredResult:
    """Ask a 2026-07-28 client: it shows the form and retries the call with the answer."""
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=_question_text(decision), requested_schema=APPROVAL_SCHEMA
        )
    )
    return types.InputRequiredResult(
        input_requests={APPROVAL_KEY: request}, request_state=_call_state(call)
    )


def _inline_answer(call: ToolCall, ctx: CallContext) -> tuple[bool, str] | None:
    """The answer a retried call carries, if it answers this very call; else None (ask)."""
    responses = ctx.input_responses or {}
    answer = responses.get(APPROVAL_KEY)
    state = ctx.request_state or ""
    if answer is None or not hmac.compare_digest(state, _call_state(call)):
        return None
    action = getattr(answer, "action", None)
    content = getattr(answer, "content", None) or {}
    if action == "accept":
        approved = content.get(APPROVAL_FIELD) is True
        return approved, "approved" if approved else "declined"
    return False, "declined" if action == "decline" else "cancelled"


def _refusal(decision: Decision, answer: str | None) -> types.CallToolResult:
    reason = decision.reason or f"zerto-rewind did not allow {decision.tool_name}"
    if decision.outcome == Outcome.PROMPT:
        reason = f"{reason} {_PROMPT_ENDINGS.get(answer or '', '')}".rstrip()
    meta: dict[str, Any] = {"zerto-rewind/row": decision.row, "zerto-rewind/outcome": "refused"}
    if decision.retry_after is not None:
        meta["zerto-rewind/retry_after"] = decision.retry_after
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=reason)], is_error=True, _meta=meta
    )


_PROMPT_ENDINGS = {
    "declined": "The person asked declined; the call was not run.",
    "cancelled": "Nobody approved it; the call was not run.",
    "timeout": "Nobody answered in time; the call was not run.",
    "failed": "The approval request failed; the call was not run.",
    "no_elicitation": ("This MCP client cannot ask a person to approve, so the call was not run."),
}


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _with_checkpoint(result: types.CallToolResult, decision: Decision) -> types.CallToolResult:
    """The upstream's result, plus a text block and ``_meta`` naming the checkpoint."""
    checkpoints = [
        {
            "vm": ",".join(o.vms),
            "vpg": o.vpg_name,
            "vpg_id": o.vpg_id,
            "checkpoint_id": o.checkpoint_id,
            "tag": o.tag,
        }
        for o in decision.vpgs
    ]
    meta = dict(result.meta or {})
    meta["zerto-rewind/checkpoints"] = checkpoints
    content = [*result.content, types.TextContent(type="text", text=decision.context)]
    return result.model_copy(update={"content": content, "meta": meta})


def _protection_note(decision: Decision) -> str:
    if decision.outcome != Outcome.CONTEXT:
        return ""
    return decision.context


def _log(
    gateway: Gateway, decision: Decision, call: ToolCall, ctx: CallContext, answer: str | None
) -> None:
    record = decision.log_record(call)
    record["client"] = ctx.client
    if answer is not None:
        record["answer"] = answer
    try:
        write_record(gateway.settings.log_path, record)
    except (StateError, OSError) as exc:
        log.warning("decision not logged: %s", exc)
