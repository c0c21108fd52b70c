"""The record step: every door's one way to write a decision's log line and count it.

* A read-only call writes no line (docs/decisions.md); it is still counted.
* Any other decision writes one line (:meth:`~.decision.Decision.log_record`,
  plus the door's fields: ``client``, ``host``, ``answer``, the approval's id and
  approver), chained by ``decisions_log.write_record``.
* **A line that cannot be written** is a warning on the ``zerto_rewind.decisions``
  logger (the gateway's log; a hook's stderr), in every door alike. And a call
  that would run (``none``/``context``) is denied instead: the guard lets no change
  through that its decision log cannot account for. A call already stopped (deny,
  prompt, defer) stays stopped, with the warning.

The record step runs before the door answers, so what the door says is what the
log holds.

:func:`record_result` writes the second line of a forwarded mutating call, its
result (:mod:`.call_result`: succeeded, failed or unknown), once the call returned
or was lost. A result line that cannot be written is the same warning; the call
already ran, so nothing is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StateError
from .decision import Decision, Outcome, Row

if TYPE_CHECKING:
    from .decision import ToolCall

__all__ = ["Metrics", "record", "record_result", "unlogged_reason"]

log = logging.getLogger("zerto_rewind.decisions")


class Metrics(Protocol):
    """Where a door counts its decisions (the gateway's Prometheus metrics)."""

    def decided(self, decision: Decision, seconds: float, answer: str | None) -> None: ...


def record(
    decision: Decision,
    call: ToolCall,
    log_path: str,
    *,
    extra: Mapping[str, Any] | None = None,
    metrics: Metrics | None = None,
    seconds: float | None = None,
    stamp: Callable[[dict[str, Any]], None] | None = None,
    runs: bool | None = None,
) -> Decision:
    """Write ``decision``'s line and count it; the decision the door must act on.

    ``extra``: the door's fields (None values are left out); ``stamp`` adds the
    trace id; ``seconds``: the decision's latency for ``metrics``; ``runs``: whether
    the door will run the call (default: outcome none or context; a prompt the
    client's own person approved runs too).
    """
    if runs is None:
        runs = decision.outcome in (Outcome.NONE, Outcome.CONTEXT)
    if decision.row != Row.READ_ONLY:
        decision = _write(decision, call, log_path, extra or {}, stamp, runs)
    if metrics is not None:
        took = seconds if seconds is not None else decision.elapsed_ms / 1000
        metrics.decided(decision, took, (extra or {}).get("answer", decision.answer))
    return decision


def _write(
    decision: Decision,
    call: ToolCall,
    log_path: str,
    extra: Mapping[str, Any],
    stamp: Callable[[dict[str, Any]], None] | None,
    runs: bool,
) -> Decision:
    from .decisions_log import write_record

    line = decision.log_record(call)
    if decision.answer is not None:  # the approvals step answered a prompt row
        line["decision"], line["reason"] = Outcome.PROMPT, decision.asked
    try:
        write_record(log_path, _completed(line, decision, extra, stamp))
    except (StateError, OSError) as exc:
        log.warning("decision not logged: %s", exc)
        if runs:
            return decision.but(
                outcome=Outcome.DENY, context="", reason=unlogged_reason(call.tool_name, exc)
            )
    return decision


def record_result(
    decision: Decision,
    call: ToolCall,
    log_path: str,
    result: str,
    *,
    extra: Mapping[str, Any] | None = None,
    stamp: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Write the result line of a forwarded call (``result``: succeeded, failed, unknown).

    It names what the decision line names, so a reader joins them without it: the VMs,
    the VPGs and the checkpoints, the approval. A read-only call writes none.
    """
    from .call_result import result_record
    from .decisions_log import write_record

    if decision.row == Row.READ_ONLY:
        return
    line = result_record(call, decision.vms, result)
    line["vpgs"] = decision.vpg_names
    line["checkpoint_ids"] = decision.checkpoint_ids
    try:
        write_record(log_path, _completed(line, decision, extra or {}, stamp))
    except (StateError, OSError) as exc:
        log.warning("call result not logged: %s", exc)


def _completed(
    line: dict[str, Any],
    decision: Decision,
    extra: Mapping[str, Any],
    stamp: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    """``line`` with the approval's fields and the door's ``extra`` (None values left out),
    then stamped: what a decision line and a result line both add."""
    line.update(_approval_fields(decision))
    line.update({key: value for key, value in extra.items() if value is not None})
    if stamp is not None:
        stamp(line)
    return line


def _approval_fields(decision: Decision) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if decision.answer is not None:
        fields["answer"] = decision.answer
    request = decision.approval
    if request is not None:
        fields["approval_id"] = request.id
        if request.decided_by:
            fields["approver"] = request.decided_by
    return fields


def unlogged_reason(tool: str, exc: BaseException) -> str:
    """Why a call that would have run was denied: its decision could not be logged."""
    return (
        f"zerto-rewind denied {tool}: its decision could not be written to the decision log "
        f"({exc}), and the guard runs no change its log cannot account for; the call was not "
        "run. An operator can check the log's disk and permissions with `zerto-rewind doctor`."
    )
