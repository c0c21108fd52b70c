"""``POST /v1/decide``: the guard service's answer for a thin hook.

The hook posts the host's PreToolUse payload as it got it; the service
classifies it with its own catalog, runs the guard with its own credentials and
state, logs the decision, and answers ``{"outcome", "row", "reason", "context",
"retry_after", "prompt_as"}``. The hook only renders it: it holds no ZVM
credential and keeps no guard state.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.responses import JSONResponse

from ..core.approvals import (
    NO_APPROVER,
    ApprovalLimitError,
    approved_context,
    prompt_by_approval,
    waiting_reason,
)
from ..core.decision import Decision, Outcome, Row, ToolCall
from ..core.decisions_log import write_record
from ..errors import StateError
from . import tracing
from .proxy import CLIENT_SCOPE_KEY, PEER_USER_KEY

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from .service import Gateway

__all__ = ["decide_endpoint"]


async def decide_endpoint(gateway: Gateway, request: Request) -> Response:
    body = await request.body()
    if len(body) > gateway.settings.gateway.max_body_bytes:
        return JSONResponse({"error": "request body too large"}, status_code=413)
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return JSONResponse({"error": "the body is not JSON"}, status_code=400)
    problem = _problem(payload)
    if problem:
        return JSONResponse({"error": problem}, status_code=400)
    return await tracing.serving(
        payload["tool_name"],
        lambda: _answer(gateway, request, payload),
        meta=_trace_meta(payload, request),
        transport="unix" if PEER_USER_KEY in request.scope else "tcp",
    )


async def _answer(gateway: Gateway, request: Request, payload: dict[str, Any]) -> Response:
    started = time.monotonic()
    call = ToolCall(
        payload["tool_name"],
        payload.get("tool_input", {}),
        session_id=_opt_str(payload, "session_id"),
        tool_use_id=_opt_str(payload, "tool_use_id"),
        origin="service",
    )
    decision = await gateway.decide(call)
    principal = _principal(request)
    answer: str | None = None
    if decision.outcome == Outcome.PROMPT and gateway.settings.guard.prompt_via == "approvals":
        answer, decision = await _by_approval(gateway, call, decision, principal)
    gateway.metrics.decided(decision, time.monotonic() - started, answer)
    tracing.decided(decision, answer)
    if decision.row != Row.READ_ONLY:  # as the standalone hook: no line for read-only calls
        record = decision.log_record(call)
        record["client"] = principal
        if answer is not None:
            record["answer"] = answer
        tracing.stamp(record)
        # The answer matters more than its log line; /metrics still counts it.
        with contextlib.suppress(StateError, OSError):
            write_record(gateway.settings.log_path, record)
    return JSONResponse(
        {
            "outcome": decision.outcome,
            "row": decision.row,
            "reason": decision.reason,
            "context": decision.context,
            "retry_after": decision.retry_after,
            "prompt_as": gateway.settings.guard.prompt_as,
        }
    )


def _trace_meta(payload: dict[str, Any], request: Request) -> dict[str, Any]:
    """The caller's W3C trace context: the body's ``_meta`` (as an MCP request carries
    it), else the HTTP ``traceparent``/``tracestate`` headers."""
    meta = payload.get("_meta")
    if isinstance(meta, dict) and "traceparent" in meta:
        return meta
    return {k: v for k in ("traceparent", "tracestate") if (v := request.headers.get(k))}


def _principal(request: Request) -> str:
    """Who asked: ``unix:USER`` on the socket (the kernel says), else the token's name."""
    return str(request.scope.get(CLIENT_SCOPE_KEY, "unknown"))


async def _by_approval(
    gateway: Gateway, call: ToolCall, decision: Decision, principal: str
) -> tuple[str, Decision]:
    """``guard.prompt_via: approvals``: an approval lets the call run; else deny with its id.

    The hook does not wait (its host's timeout is short): the person approves, the
    agent retries, and the retry of the same call runs once.
    """
    service = gateway.approvals
    try:
        if not service.has_approvers:
            reason = f"{decision.reason} {NO_APPROVER}".strip()
            return "no_approver", decision.but(outcome=Outcome.DENY, reason=reason)
        used, waiting = await anyio.to_thread.run_sync(
            lambda: prompt_by_approval(
                service.store,
                gateway.settings.log_path,
                tool=call.tool_name,
                tool_input=call.tool_input,
                vms=decision.vms,
                row=decision.row,
                why=decision.reason,
                principal=principal,
                expires_s=service.config.expires_s,
                session=call.session_id,
                host_paths=decision.host_paths,
                max_open=service.config.max_open_per_principal,
            )
        )
    except ApprovalLimitError as exc:  # refused at once; the call's log line says why
        reason = f"{decision.reason} {exc.reason()}".strip()
        return "capped", decision.but(outcome=Outcome.DENY, reason=reason)
    except Exception as exc:  # the channel is down: refuse, never run it unasked
        reason = (
            f"{decision.reason} It needs a person's approval, and the approval channel "
            f"failed ({type(exc).__name__}). The call was not run."
        ).strip()
        return "approvals_down", decision.but(outcome=Outcome.DENY, reason=reason)
    if used is not None:
        return "approved", decision.but(outcome=Outcome.CONTEXT, context=approved_context(used))
    assert waiting is not None
    if service.notifier is not None:
        await service.notifier("requested", waiting)
    reason = f"{decision.reason} {waiting_reason(waiting, service.link(waiting.id))}"
    return "waiting", decision.but(outcome=Outcome.DENY, reason=reason)


def _problem(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return "the body must be a JSON object (a PreToolUse payload)"
    name = payload.get("tool_name")
    if not isinstance(name, str) or not name.strip():
        return "tool_name is missing"
    if not isinstance(payload.get("tool_input", {}), dict):
        return "tool_input must be a JSON object"
    return None


def _opt_str(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None
