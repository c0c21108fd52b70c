"""A forwarded call's decision line, found again after the call: the result line's source.

A door that forwards a call records what became of it (:mod:`.call_result`) once
the host says so. For a call whose decision line says it was let through
(:func:`.sessions.kind_of` is ``change``), it writes the call's result line,
naming what that decision line names: the VMs, the VPGs, the checkpoints (id,
tag, when it landed), the approval and its approver, the principal and the
host. ``session show`` joins the two by ``(session_id, tool_use_id)``.

A host that sends no ``tool_use_id`` gets one made of the session, the tool and
the arguments' digest (:func:`call_key`), by the door that logs the decision and
by the post event alike. Two identical calls in one session then share it, and
the later result stands for both.

The decision line is looked for from the end of the log backwards, at most
:data:`SCAN_BYTES`: the call ran moments ago, so its line is near the end. No line
found means nothing is recorded: the result of a call the log does not hold would
be a change nobody decided.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .call_result import result_record
from .decision import ToolCall, arguments_digest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..config.settings import Settings

__all__ = [
    "ALREADY_RECORDED",
    "NOT_A_CHANGE",
    "NOT_YOURS",
    "NO_DECISION",
    "RECORDED",
    "SCAN_BYTES",
    "call_key",
    "find_call",
    "find_decision",
    "record_after",
    "result_line",
]

RECORDED, NOT_A_CHANGE, NO_DECISION = "recorded", "not a change", "no decision"
NOT_YOURS, ALREADY_RECORDED = "not the caller's", "already recorded"
# How far back from the end of the log the decision line is looked for.
SCAN_BYTES = 8 * 1024 * 1024
_CHUNK = 256 * 1024
# The decision line's fields the result line repeats, beyond what result_record writes.
_CARRIED = (
    "vpgs", "vpg_ids", "checkpoint_ids", "tags", "landed_at", "sites", "answer", "approval_id",
    "approver",
)  # fmt: skip


def call_key(session_id: str | None, tool_name: str, tool_input: Any) -> str:
    """The ``tool_use_id`` of a call whose host gives none: the session, the tool and the
    arguments' digest, hashed (no argument value is readable from it)."""
    import hashlib

    body = "\0".join((session_id or "", tool_name, arguments_digest(tool_input)))
    return "args-" + hashlib.sha256(body.encode()).hexdigest()[:32]


def find_decision(log_path: str, session_id: str | None, tool_use_id: str) -> dict[str, Any] | None:
    """The last decision line (not a result line) of this call in the log's last
    :data:`SCAN_BYTES`; None if there is none."""
    return find_call(log_path, session_id, tool_use_id)[0]


def find_call(
    log_path: str, session_id: str | None, tool_use_id: str
) -> tuple[dict[str, Any] | None, bool]:
    """(the call's last decision line or None, whether a result line follows it), from
    the log's last :data:`SCAN_BYTES`."""
    import json

    from .call_result import RESULT_EVENT

    needle = json.dumps(tool_use_id, ensure_ascii=False).encode()
    has_result = False
    for line in _lines_backwards(log_path):
        if needle not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if (
            not isinstance(record, dict)
            or record.get("tool_use_id") != tool_use_id
            or record.get("session_id") != session_id
            or record.get("decision") == "approval"
        ):
            continue
        if record.get("event_type") == RESULT_EVENT:
            has_result = True
            continue
        return record, has_result
    return None, False


def _lines_backwards(path: str) -> Iterator[bytes]:
    """The log's lines, last first, within the last SCAN_BYTES (no log: none)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        end = os.fstat(fd).st_size
        stop = max(0, end - SCAN_BYTES)
        tail = b""
        while end > stop:
            start = max(stop, end - _CHUNK)
            block = os.pread(fd, end - start, start) + tail
            end = start
            lines = block.split(b"\n")
            tail = lines.pop(0) if end > stop else b""  # may be cut: read with the next block
            yield from (line for line in reversed(lines) if line)
    finally:
        os.close(fd)


def result_line(
    decision: dict[str, Any], call: ToolCall, result: str, *, client: str, host: str
) -> dict[str, Any]:
    """The result line of ``call``, naming what its ``decision`` line names."""
    vms = [str(vm) for vm in decision.get("vms") or ()]
    line = result_record(call, vms, result, client=client, host=host)
    line.update({key: decision[key] for key in _CARRIED if decision.get(key) is not None})
    return line


def record_after(
    settings: Settings,
    call: ToolCall,
    result: str,
    *,
    client: str,
    host: str,
    owner: str | None = None,
) -> str:
    """Write ``call``'s result line if its decision line shows a change: :data:`RECORDED`;
    else :data:`NOT_A_CHANGE` or :data:`NO_DECISION` (the log holds no line for it), and
    nothing is written. StateError when the line cannot be written.

    ``owner`` (the guard service's caller): the decision line must be one the service
    decided for that principal (:data:`NOT_YOURS` otherwise), and hold no result yet
    (:data:`ALREADY_RECORDED`): a caller records only its own calls, once.
    """
    from .decisions_log import register_anchor, write_record
    from .log_anchor import policy_for
    from .sessions import kind_of

    use_id = call.tool_use_id or call_key(call.session_id, call.tool_name, call.tool_input)
    decision, has_result = find_call(settings.log_path, call.session_id, use_id)
    if decision is None or decision.get("tool") != call.tool_name:
        return NO_DECISION
    if owner is not None and (
        decision.get("client") != owner or decision.get("origin") != "service"
    ):
        return NOT_YOURS
    if decision.get("row") == "read_only" or kind_of(decision) != "change":
        return NOT_A_CHANGE
    if owner is not None and has_result:
        return ALREADY_RECORDED
    if call.tool_use_id is None:
        call = ToolCall(call.tool_name, call.tool_input, session_id=call.session_id,
                        tool_use_id=use_id, origin=call.origin)  # fmt: skip
    register_anchor(policy_for(settings))
    write_record(settings.log_path, result_line(decision, call, result, client=client, host=host))
    return RECORDED
