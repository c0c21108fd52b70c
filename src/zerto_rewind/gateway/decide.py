"""``POST /v1/decide`` and ``POST /v1/result``: the guard service's endpoints for a thin hook.

``/v1/decide``: the hook posts the host's PreToolUse payload as it got it; the
service classifies it with its own catalog, runs the guard with its own
credentials and state, logs the decision, and answers ``{"outcome", "row",
"reason", "context", "retry_after", "prompt_as"}``. The hook only renders it: it
holds no ZVM credential and keeps no guard state. A payload without
``tool_use_id`` is logged under :func:`~..core.call_lookup.call_key`, the id its
after event derives too.

``/v1/result``: after the call, the hook posts the same payload plus ``result``
(``succeeded``, ``failed`` or ``unknown``) and ``host``. The result line is
written (:func:`~..core.call_lookup.record_after`) only for a call this service
decided for this same caller (the socket's peer user, or the token), let through,
not read-only, and with no result yet; anything else is refused (404, 403, 409)
and nothing is written: an agent cannot record results for another principal's
calls, nor for calls nobody decided.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from ..core import call_lookup
from ..core.call_result import RESULTS
from ..core.decision import ToolCall
from ..core.record import record
from ..errors import StateError
from ..hook_flags import HOST_NAMES
from . import tracing
from .proxy import CLIENT_SCOPE_KEY, PEER_USER_KEY

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from .service import Gateway

__all__ = ["decide_endpoint", "result_endpoint"]

# The refusals of /v1/result: (HTTP status, what the human reads).
_REFUSED = {
    call_lookup.NO_DECISION: (404, "no decision of this service for this call in its log"),
    call_lookup.NOT_YOURS: (
        403,
        "the call was decided for another principal, or not by this service",
    ),
    call_lookup.NOT_A_CHANGE: (409, "the call was not let through as a change"),
    call_lookup.ALREADY_RECORDED: (409, "the call's result is already recorded"),
}
# One result at a time: the look for an earlier result and the write are one step.
_RESULT_LOCK = threading.Lock()


async def decide_endpoint(gateway: Gateway, request: Request) -> Response:
    payload, refused = await _payload(gateway, request)
    if refused is not None:
        return refused
    return await tracing.serving(
        payload["tool_name"],
        lambda: _answer(gateway, request, payload),
        meta=_trace_meta(payload, request),
        transport="unix" if PEER_USER_KEY in request.scope else "tcp",
    )


async def _payload(gateway: Gateway, request: Request) -> tuple[dict[str, Any], Response | None]:
    """The body as a hook payload, or the 4xx answer that refuses it."""
    body = await request.body()
    if len(body) > gateway.settings.gateway.max_body_bytes:
        return {}, JSONResponse({"error": "request body too large"}, status_code=413)
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return {}, JSONResponse({"error": "the body is not JSON"}, status_code=400)
    problem = _problem(payload)
    if problem:
        return {}, JSONResponse({"error": problem}, status_code=400)
    return payload, None


async def _answer(gateway: Gateway, request: Request, payload: dict[str, Any]) -> Response:
    started = time.monotonic()
    principal = _principal(request)
    call = _call(payload, principal)
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


async def result_endpoint(gateway: Gateway, request: Request) -> Response:
    """``POST /v1/result``: the result line of a call this caller had decided here."""
    payload, refused = await _payload(gateway, request)
    if refused is not None:
        return refused
    result, host = payload.get("result"), payload.get("host")
    if result not in RESULTS:
        return JSONResponse({"error": f"result must be one of {', '.join(RESULTS)}"}, 400)
    if host not in HOST_NAMES:  # the thin hook's --host values
        return JSONResponse({"error": f"host must be one of {', '.join(HOST_NAMES)}"}, 400)
    principal = _principal(request)
    call = _call(payload, principal)
    try:
        done = await asyncio.to_thread(_record, gateway, call, result, principal, host)
    except (StateError, OSError) as exc:
        msg = f"not recorded: the decision log could not be written ({exc})"
        return JSONResponse({"error": msg}, status_code=503)
    if done == call_lookup.RECORDED:
        return JSONResponse({"recorded": True})
    status, why = _REFUSED[done]
    return JSONResponse({"error": f"not recorded: {why}"}, status_code=status)


def _record(gateway: Gateway, call: ToolCall, result: str, principal: str, host: str) -> str:
    with _RESULT_LOCK:
        return call_lookup.record_after(
            gateway.settings, call, result, client=principal, host=host, owner=principal
        )


def _call(payload: dict[str, Any], principal: str) -> ToolCall:
    """The payload's call; without a ``tool_use_id``, the id its after event derives too."""
    name, tool_input = payload["tool_name"], payload.get("tool_input", {})
    session_id = _opt_str(payload, "session_id")
    use_id = _opt_str(payload, "tool_use_id") or call_lookup.call_key(session_id, name, tool_input)
    return ToolCall(name, tool_input, session_id=session_id, tool_use_id=use_id,
                    origin="service", principal=principal)  # fmt: skip


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
