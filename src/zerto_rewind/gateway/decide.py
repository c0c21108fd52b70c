"""``POST /v1/decide``: the guard service's answer for a thin hook.

The hook posts the host's PreToolUse payload as it got it; the service
classifies it with its own catalog, runs the guard with its own credentials and
state, logs the decision, and answers ``{"outcome", "row", "reason", "context",
"retry_after", "prompt_as"}``. The hook only renders it: it holds no ZVM
credential and keeps no guard state.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from ..core.decision import ToolCall
from ..core.record import record
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
    principal = _principal(request)
    call = ToolCall(
        payload["tool_name"],
        payload.get("tool_input", {}),
        session_id=_opt_str(payload, "session_id"),
        tool_use_id=_opt_str(payload, "tool_use_id"),
        origin="service",
        principal=principal,
    )
    # guard.prompt_via: approvals. The hook does not wait (its host's timeout is short):
    # the person approves, the agent retries, and the retry of the same call runs once.
    after = [gateway.approvals.step(principal)] if _by_approval(gateway) else []
    decision = await gateway.decide(call, after)
    decision = record(
        decision,
        call,
        gateway.settings.log_path,
        extra={"client": principal},
        metrics=gateway.metrics,
        seconds=time.monotonic() - started,
        stamp=tracing.stamp,
    )
    tracing.decided(decision, decision.answer)
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


def _by_approval(gateway: Gateway) -> bool:
    return gateway.settings.guard.prompt_via == "approvals"


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
