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

from starlette.responses import JSONResponse

from ..core.decision import Row, ToolCall
from ..core.decisions_log import write_record
from ..errors import StateError
from .proxy import CLIENT_SCOPE_KEY

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
    started = time.monotonic()
    call = ToolCall(
        payload["tool_name"],
        payload.get("tool_input", {}),
        session_id=_opt_str(payload, "session_id"),
        tool_use_id=_opt_str(payload, "tool_use_id"),
        origin="service",
    )
    decision = await gateway.decide(call)
    gateway.metrics.decided(decision, time.monotonic() - started, None)
    if decision.row != Row.READ_ONLY:  # as the standalone hook: no line for read-only calls
        record = decision.log_record(call)
        record["client"] = str(request.scope.get(CLIENT_SCOPE_KEY, "unknown"))
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
