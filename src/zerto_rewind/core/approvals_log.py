"""The approvals' lines in the decision log: one per event of a request."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from ..errors import StateError
from .approvals_model import ApprovalRequest

__all__ = ["log_event", "record_event"]

log = logging.getLogger("zerto_rewind.approvals")


def record_event(
    log_path: str,
    request: ApprovalRequest,
    answer: str,
    *,
    approver: str | None = None,
    note: str | None = None,
) -> None:
    """One decision-log line per event of a request; ids and names, never argument values.

    ``answer``: requested | approved | denied | refused (an approver who may not) |
    used | expired. A log that cannot be written is raised as StateError.
    """
    from .decision import fmt_time
    from .decisions_log import write_record

    record: dict[str, Any] = {
        "time": fmt_time(time.time()),
        "origin": "approvals",
        "session_id": request.session,
        "tool": request.tool,
        "row": request.row,
        "decision": "approval",
        "answer": answer,
        "approval_id": request.id,
        "client": request.principal,
        "vms": list(request.vms),
        "approver": approver or request.decided_by,
        "expires": fmt_time(request.expires),
        "reason": note if note is not None else (request.note or ""),
    }
    if request.host:  # the MCP client's clientInfo, as the call's own line names it
        record["host"] = request.host
    try:
        write_record(log_path, record)
    except OSError as exc:
        msg = f"cannot write the decision log {log_path}: {exc.strerror}"
        raise StateError(msg) from exc


def log_event(log_path: str, request: ApprovalRequest, answer: str, **event: str | None) -> None:
    """:func:`record_event` (``event``: its ``approver`` and ``note``) for a door whose answer
    matters more than the line: a log that cannot be written is a warning."""
    try:
        record_event(log_path, request, answer, **event)
    except StateError as exc:
        log.warning("approval not logged: %s", exc)


def _quiet_record(log_path: str, request: ApprovalRequest, answer: str) -> None:
    # The answer matters more than its log line (as for decisions).
    with contextlib.suppress(StateError):
        record_event(log_path, request, answer)
