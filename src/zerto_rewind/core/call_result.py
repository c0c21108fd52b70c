"""The decision-log event that says what became of a forwarded call: its result.

A decision line says what the guard decided; whether the call it let through then
succeeded is a second line, written after the forwarded call returns (or fails),
by the door that forwarded it (the gateway, or a host hook's ``PostToolUse``).
This module is the one place that line is shaped; readers (:mod:`.sessions`) join
it to its decision line by ``tool_use_id`` within the same ``session_id``.

Shape (plus the audit draft's fields :func:`.decisions_log.audit_record` adds)::

    {"event_type": "tool_call.result", "time": "…Z", "session_id": "…",
     "tool_use_id": "…", "tool": "…", "vms": ["…"], "origin": "…",
     "result": "succeeded" | "failed" | "unknown", "outcome": "allowed", …}

``result`` is ``unknown`` when the call was sent and no answer came back (the
upstream timed out, or the connection dropped): it may have run. ``outcome`` keeps
the draft's meaning, the decision's outcome: a call with a result was allowed.
Like every log line it holds no argument value other than VM names, and no text
of the call's answer (an answer may carry anything the VM server returns).
"""

from __future__ import annotations

import time
from typing import Any, Final

from .decision import ToolCall, fmt_time

__all__ = ["RESULTS", "RESULT_EVENT", "result_record"]

RESULT_EVENT: Final = "tool_call.result"
RESULTS: Final = ("succeeded", "failed", "unknown")


def result_record(
    call: ToolCall,
    vms: tuple[str, ...] | list[str],
    result: str,
    *,
    client: str | None = None,
    host: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The result line of one forwarded call, for :func:`.decisions_log.write_record`.

    ``vms`` are the VM names the call's decision line named; ``client`` the principal
    and ``host`` the MCP client, as the door's decision line names them. ValueError
    for a ``result`` that is not one of :data:`RESULTS` (a writer's bug, not input).
    """
    if result not in RESULTS:
        msg = f"result must be one of {', '.join(RESULTS)}, not {result!r}"
        raise ValueError(msg)
    record: dict[str, Any] = {
        "event_type": RESULT_EVENT,
        "outcome": "allowed",
        "time": fmt_time(time.time() if now is None else now),
        "origin": call.origin,
        "session_id": call.session_id,
        "tool_use_id": call.tool_use_id,
        "tool": call.tool_name,
        "vms": list(vms),
        "result": result,
    }
    if client:
        record["client"] = client
    if host:
        record["host"] = host
    return record
