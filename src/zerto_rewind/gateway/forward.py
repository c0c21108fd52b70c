"""Forwarding an allowed call to its VM MCP server, and recording what became of it.

A mutating call's outcome is the second line of its story in the decision log
(``core.record.record_result``), written once per forwarded call:

* ``succeeded``: the server answered, and not with an MCP error;
* ``failed``: ``isError`` in the answer, a JSON-RPC error from the server, or the
  call was never sent (the server was not connected);
* ``unknown``: it was sent and no answer came back (timeout, the connection
  dropped, the gateway lost the call, cancelled): it may have run.

An ``unknown`` outcome is also kept in the guard's state for execute-once
(``core.execute_once``): the same call again within
``guard.unknown_outcome_window_s`` is asked of a person, not sent blind; a settled
outcome clears it. A read-only call records nothing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types

from ..core.decision import Decision, Row, ToolCall
from ..core.record import record_result
from . import tracing
from .result_notes import annotated, error_result, protection_note
from .upstream import UpstreamError

if TYPE_CHECKING:
    from .service import Gateway
    from .upstream import Upstream

__all__ = ["forward"]


async def forward(
    gateway: Gateway,
    upstream: Upstream,
    tool: str,
    arguments: dict[str, Any] | None,
    decision: Decision,
    call: ToolCall,
) -> types.CallToolResult:
    """Send the call; its result (annotated), or an ``isError`` saying it may not have run.
    The result line names the call's principal and host (``call.principal``, ``call.host``)."""
    result = "unknown"  # until the server answers: a call lost on the way may have run
    sent_at = time.time()
    try:
        with tracing.forwarding(tool, upstream) as meta:
            answer = await upstream.call_tool(
                tool, arguments, gateway.call_timeout_s(upstream), meta=meta
            )
        result = "failed" if answer.is_error else "succeeded"
    except UpstreamError as exc:
        result = exc.result
        gateway.metrics.upstream_error(upstream.name, "call")
        return error_result(f"{exc}; the call may not have run. {protection_note(decision)}")
    finally:
        if decision.row != Row.READ_ONLY:
            with anyio.CancelScope(shield=True):  # a cancelled call is recorded too
                await _settle(gateway, decision, call, result, sent_at)
    gateway.metrics.forwarded(upstream.name, decision.row)
    return annotated(answer, decision, upstream.output_schema(tool))


async def _settle(
    gateway: Gateway,
    decision: Decision,
    call: ToolCall,
    result: str,
    sent_at: float,
) -> None:
    """The result line, then the outcome for execute-once (both only warn when they fail:
    the call has run, or may have)."""
    extra = {"client": call.principal, "host": call.host}
    record_result(
        decision, call, gateway.settings.log_path, result, extra=extra, stamp=tracing.stamp
    )
    await anyio.to_thread.run_sync(gateway.outcomes.settle, call, result, sent_at)
