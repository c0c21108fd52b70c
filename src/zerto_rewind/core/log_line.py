"""One decision-log line read back: its record and its place in the chain.

The chain (:mod:`.decisions_log`), its anchor check (:mod:`.log_anchor`), the sessions
reader (:mod:`.sessions`) and the log's index (:mod:`.log_index`) must read a line alike,
and none of them may import another for it (they import each other the other way).
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

__all__ = ["is_seq", "line_seq", "log_record"]


def log_record(line: bytes) -> dict[str, Any] | None:
    """A log line's record; None for a damaged line (not JSON, or not an object)."""
    try:
        record = json.loads(line.decode("utf-8", "replace"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def line_seq(line: bytes) -> int:
    """The line's ``seq``, or 0 if it has none (an unchained or damaged line)."""
    try:
        record = json.loads(line)
    except ValueError:
        return 0
    seq = record.get("seq") if isinstance(record, dict) else None
    return seq if is_seq(seq) else 0


def is_seq(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a chain number: an int (not a bool) from 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
