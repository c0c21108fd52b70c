"""The decision log: one JSON line per decision, appended atomically.

Lines carry ids, names and times, never a secret and never an argument value
other than VM names (see :meth:`Decision.log_record`). Reading tolerates
damaged lines: a line that is not JSON is reported, not fatal.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Iterator
from typing import Any

from ..fsutil import append_line

__all__ = ["iter_records", "tail", "write_record"]


def write_record(path: str, record: dict[str, Any]) -> None:
    """Append one decision; StateError if the log cannot be written."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    append_line(path, json.dumps(record, ensure_ascii=False, separators=(",", ":")))


def iter_records(path: str) -> Iterator[dict[str, Any]]:
    """Every readable record in the log, oldest first; damaged lines are skipped."""
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115  # closed below
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def tail(path: str, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` records."""
    return list(collections.deque(iter_records(path), maxlen=max(0, limit)))
