"""One ``tools/call`` through the gateway: the core guard decides, then forward or refuse.

* none (read-only): forward.
* context (checkpoint confirmed): forward; the result names the checkpoint
  (an added text block, and ``_meta``). With ``catalog.resolvers`` for the
  server, first the identity check (``gateway.identity``): the server must mean
  the VM Zerto checkpointed, else the call prompts.
* deny (failed, pending, errors): not forwarded; ``isError`` with the guard's reason.
* prompt (VM unknown, no VM, unlisted): a person decides, on a channel the agent
  cannot answer. The call opens an approval request in the service's state
  (``gateway.approvals``), tells the client the approval page's address where it
  can show one (URL-mode elicitation), and waits up to ``approvals.wait_s``
  with progress notifications. Approved in time, it runs; else it is refused
  with the request's id, and the same call retried after approval runs once.
  Only with ``approvals.trust_client_answers`` (stdio, single user) does the
  client's own form answer count, as before.
* defer: not forwarded (a gateway cannot pause its caller).

A mutating call is forwarded only after the guard answered for it; every
error on the way (guard crash, timeout, Redis, ZVM, the approvals store) is a
refusal with a reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from ..core.approval_policy import channel_failed
from ..core.approval_secrets import schema_secret_paths
from ..core.approval_view import visible
from ..core.approvals import (
    APPROVED,
    DENIED,
    EXPIRED,
    ApprovalRequest,
    approved_context,
)
from ..core.decision import Decision, Outcome, ToolCall
from ..core.guard import identity_unverified
from ..core.record import record
from . import tracing
from .identity import check_identity
from .request_state import APPROVAL_FIELD, APPROVAL_KEY, APPROVAL_SCHEMA
from .result_notes import annotated, error_result, protection_note
from .upstream import UpstreamError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.pipeline import Policy
    from .service import Gateway
    from .upstream import Upstream

__all__ = [
    "APPROVAL_FIELD",
    "APPROVAL_SCHEMA",
    "Asker",
    "CallContext",
    "IdentityCheck",
    "handle_call",
    "host_tool_name",
]

log = logging.getLogger("zerto_rewind.gateway")

# The answer the human gives to an elicitation: True approve, False decline,
# None when nobody answered (cancel, timeout, or the client cannot be asked).
Asker = Callable[[str], Awaitable[bool | None]]
# Shows a person the approval page (URL-mode elicitation): message, url, elicitation id.
UrlShower = Callable[[str, str, str], Awaitable[None]]
# Reports progress on the call: seconds waited, the wait's bound, a message.
Progress = Callable[[float, float, str], Awaitable[None]]


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
    # URL-mode elicitation: over the back channel (show_url), or inline (url_inline).
    show_url: UrlShower | None = None
    url_inline: bool = False
    progress: Progress | None = None
    host: str | None = None  # the MCP client's name and version, from initialize


async def handle_call(
    gateway: Gateway,
    upstream: Upstream,
    tool: str,
    arguments: dict[str, Any] | None,
    ctx: CallContext,
) -> types.CallToolResult | types.InputRequiredResult:
    """Guard one call and forward it only if the guard (or an approver) allows it."""
    started_wall, started_mono = time.time(), time.monotonic()
    call = ToolCall(
        host_tool_name(upstream.name, tool),
        arguments or {},
        session_id=ctx.session_id,
        tool_use_id=ctx.tool_use_id,
        origin="gateway",
        started_at=started_wall,
        principal=ctx.client,
        host=ctx.host,
    )
    decision = await gateway.decide(call, _after(gateway, upstream, tool, ctx))
    answer: str | None = None
    forward = decision.outcome in (Outcome.NONE, Outcome.CONTEXT)
    if decision.outcome == Outcome.PROMPT:  # approvals.trust_client_answers: the client asks
        if ctx.ask is None and ctx.ask_inline:
            inline = gateway.states.answer(call, ctx)
            if inline is None:
                # Logged now: a question nobody ever answers still leaves its line.
                _log(gateway, decision, call, ctx, "asked")
                return _question(gateway, decision, call, ctx)
            forward, answer = inline
        else:
            forward, answer = await _prompt(gateway, decision, ctx)
    elif decision.answer == "waiting" and decision.approval is not None:
        waited = await _wait_approval(gateway, decision, call, ctx)
        if isinstance(waited, types.InputRequiredResult):
            return waited
        decision = waited
        forward = decision.outcome == Outcome.CONTEXT
    elapsed = time.monotonic() - started_mono
    decision = decision.but(elapsed_ms=int(elapsed * 1000))
    decision = _record(gateway, decision, call, ctx, answer, elapsed, forward)
    if decision.outcome == Outcome.DENY:
        forward = False  # the record step refused it: its line could not be written
    if not forward:
        return _refusal(decision, answer)
    try:
        with tracing.forwarding(tool, upstream) as meta:
            result = await upstream.call_tool(
                tool, arguments, gateway.call_timeout_s(upstream), meta=meta
            )
    except UpstreamError as exc:
        gateway.metrics.upstream_error(upstream.name, "call")
        return error_result(f"{exc}; the call may not have run. {protection_note(decision)}")
    gateway.metrics.forwarded(upstream.name, decision.row)
    return annotated(result, decision, upstream.output_schema(tool))


def _after(gateway: Gateway, upstream: Upstream, tool: str, ctx: CallContext) -> list[Policy]:
    """This door's steps after the table: the identity check, then approvals (unless the
    client's own answer counts, ``approvals.trust_client_answers``)."""
    steps: list[Policy] = [IdentityCheck(gateway.settings, upstream)]
    if not gateway.settings.approvals.trust_client_answers:
        secrets = schema_secret_paths(upstream.input_schema(tool))
        steps.append(gateway.approvals.step(ctx.client, host=ctx.host, secret_paths=secrets))
    return steps


class IdentityCheck:
    """The ``vm_identity`` step: does the VM server mean the VM Zerto checkpointed?
    (catalog.resolvers); without a check, the checkpoint note says the VM's identity was
    not verified."""

    name = "vm_identity"

    def __init__(self, settings: Settings, upstream: Upstream) -> None:
        self.settings = settings
        self.upstream = upstream

    def apply(self, call: ToolCall, so_far: Decision) -> Awaitable[Decision] | None:
        if so_far.outcome != Outcome.CONTEXT:
            return None
        return self._check(so_far)

    async def _check(self, decision: Decision) -> Decision:
        catalog = self.settings.catalog
        decision = await check_identity(catalog, self.upstream, decision)
        unchecked = self.upstream.name not in catalog.resolvers
        if unchecked and decision.outcome == Outcome.CONTEXT and decision.vms and decision.context:
            note = identity_unverified(decision.vms)
            decision = decision.but(context=f"{decision.context}\n{note}")
        return decision


# --------------------------------------------------------------------------- approvals


async def _wait_approval(
    gateway: Gateway, decision: Decision, call: ToolCall, ctx: CallContext
) -> Decision | types.InputRequiredResult:
    """The approvals step opened (or joined) a request: this door can hold the call, so it
    waits for a person on the approvals socket or page; the agent's session cannot answer.
    An inline client is first shown the approval page (an InputRequiredResult)."""
    service = gateway.approvals
    request = decision.approval
    assert request is not None
    link = service.link(request.id)
    message = _approval_text(decision, request)
    inline_url = link is not None and ctx.url_inline and ctx.ask is None
    if inline_url and not gateway.states.valid(call, ctx, request.id):
        assert link is not None
        return _show_page(gateway, call, ctx, request, message, link)
    waited = await _wait_for(gateway, request, message, link, ctx)
    if waited is None:
        return _ended(decision, "approvals_down", channel_failed(None), request)
    if waited.state == APPROVED:
        used = await service.use(waited)
        if used is not None:
            return decision.but(
                outcome=Outcome.CONTEXT,
                reason=decision.asked,
                context=approved_context(used),
                answer="approved",
                approval=used,
            )
        waited.state = EXPIRED  # used by a concurrent retry of the same call: not twice
    if waited.state == DENIED:
        return _ended(decision, "denied", _denied_text(waited), waited)
    if waited.state == EXPIRED or waited.state != "pending":
        ending = f"Approval request {request.id} expired; the call was not run."
        return _ended(decision, "expired", ending, waited)
    return decision  # still waiting: the approvals step's refusal names the request


def _ended(
    decision: Decision, answer: str, ending: str, request: ApprovalRequest | None
) -> Decision:
    """The wait ended without a use of the approval: the guard's reason, then what ended it."""
    reason = f"{decision.asked} {ending}".strip()
    return decision.but(outcome=Outcome.DENY, reason=reason, answer=answer, approval=request)


async def _wait_for(
    gateway: Gateway,
    request: ApprovalRequest,
    message: str,
    link: str | None,
    ctx: CallContext,
) -> ApprovalRequest | None:
    """Wait for a person, with progress; show them the page over the back channel meanwhile."""
    service = gateway.approvals
    started = time.time()
    wait_s = min(service.config.wait_s, max(0.0, request.expires - started))
    progress = ctx.progress

    async def tick(elapsed: float) -> None:
        if progress is not None:
            text = f"waiting for a person to approve request {request.id}"
            try:
                await progress(elapsed, wait_s, text)
            except Exception as exc:  # a host that cannot take progress still waits
                log.warning("progress notification failed: %s", type(exc).__name__)

    async with anyio.create_task_group() as tg:
        if link is not None and ctx.show_url is not None:
            tg.start_soon(_show_url, ctx.show_url, message, link, request.id)
        try:
            waited = await service.wait(request.id, wait_s, on_tick=tick)
        except Exception as exc:
            log.warning("approval wait failed: %s", type(exc).__name__)
            waited = None
        tg.cancel_scope.cancel()
    state = waited.state if waited is not None else "failed"
    tracing.approval_waited(request.id, state, time.time() - started, wait_s)
    return waited


async def _show_url(show: UrlShower, message: str, link: str, request_id: str) -> None:
    """The client shows a person the page; what it answers approves nothing."""
    try:
        await show(message, link, request_id)
    except Exception as exc:
        log.warning("URL elicitation failed: %s", type(exc).__name__)


def _show_page(
    gateway: Gateway,
    call: ToolCall,
    ctx: CallContext,
    request: ApprovalRequest,
    message: str,
    link: str,
) -> types.InputRequiredResult:
    """Ask a 2026-07-28 client to show the approval page, then retry (and wait)."""
    elicit = types.ElicitRequest(params=types.ElicitRequestURLParams(message=message, url=link))
    state = gateway.states.issue(call, ctx, request.id)
    return types.InputRequiredResult(input_requests={APPROVAL_KEY: elicit}, request_state=state)


def _approval_text(decision: Decision, request: ApprovalRequest) -> str:
    """The URL elicitation's message: a client shows it to a person, so nothing interpreted."""
    return visible(
        f"zerto-rewind needs a person to approve {decision.tool_name} (request {request.id}): "
        f"{decision.for_approver()} The approval page shows the whole call."
    )


def _denied_text(request: ApprovalRequest) -> str:
    why = f": {request.note}" if request.note else ""
    return f"{request.decided_by} denied approval request {request.id}{why}. The call was not run."


# ----------------------------------------------------------------- the client's own answer


async def _prompt(gateway: Gateway, decision: Decision, ctx: CallContext) -> tuple[bool, str]:
    """The client's person decides (``approvals.trust_client_answers`` only)."""
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
    question = f"Run {decision.tool_name} with no Zerto checkpoint in front of it?"
    return f"{question}\n\n{decision.for_approver()}"


def _question(
    gateway: Gateway, decision: Decision, call: ToolCall, ctx: CallContext
) -> types.InputRequiredResult:
    """Ask a 2026-07-28 client: it shows the form and retries the call with the answer."""
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=_question_text(decision), requested_schema=APPROVAL_SCHEMA
        )
    )
    return types.InputRequiredResult(
        input_requests={APPROVAL_KEY: request}, request_state=gateway.states.issue(call, ctx)
    )


def _refusal(decision: Decision, answer: str | None) -> types.CallToolResult:
    reason = decision.reason or f"zerto-rewind did not allow {decision.tool_name}"
    if decision.outcome == Outcome.PROMPT:  # the client's own person did not say yes
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


def _log(
    gateway: Gateway, decision: Decision, call: ToolCall, ctx: CallContext, answer: str | None
) -> Decision:
    """The record step (core.record) with this door's fields; no metrics."""
    extra = {"client": ctx.client, "host": ctx.host, "answer": answer}
    return record(decision, call, gateway.settings.log_path, extra=extra, stamp=tracing.stamp)


def _record(
    gateway: Gateway,
    decision: Decision,
    call: ToolCall,
    ctx: CallContext,
    answer: str | None,
    seconds: float,
    runs: bool,
) -> Decision:
    """The record step with the metrics and the trace: the decision to act on."""
    extra = {"client": ctx.client, "host": ctx.host, "answer": answer}
    decision = record(
        decision,
        call,
        gateway.settings.log_path,
        extra=extra,
        metrics=gateway.metrics,
        seconds=seconds,
        stamp=tracing.stamp,
        runs=runs,
    )
    tracing.decided(decision, answer if answer is not None else decision.answer)
    return decision
