"""One decision-log line read back: its record and its place in the chain.

The chain (:mod:`.decisions_log`), its anchor check (:mod:`.log_anchor`), the sessions
reader (:mod:`.sessions`) and the log's index (:mod:`.log_index`) must read a line alike,
and none of them may import another for it (they import each other the other way). The
sessions reader and the rewind plan search the log for the lines they need alike
(:func:`lines_holding`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator
from typing import Any, BinaryIO, TypeGuard

__all__ = ["is_seq", "line_seq", "lines_holding", "log_record"]

_CHUNK = 1 << 20  # bytes searched at a time for the lines a reader needs


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


def lines_holding(
    fh: BinaryIO, needles: Callable[[], Collection[bytes]]
) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line as written) of each line holding one of ``needles()``.

    The JSON text of a value a reader looks for is in a line if the value is, so the
    other lines are skipped without being split out or decoded: a chunk of the file is
    searched with ``bytes.find`` (C speed) rather than line by line. ``needles()`` is
    asked again after each line handed out: the reader may look for more from then on."""
    carry, before = b"", 0  # the unfinished last line; lines in earlier chunks
    while True:
        block = fh.read(_CHUNK)
        data = carry + block
        end = len(data) if not block else data.rfind(b"\n") + 1
        chunk, carry = data[:end], data[end:]
        yield from _in_chunk(chunk, before, needles)
        before += chunk.count(b"\n")
        if not block:
            return


def _in_chunk(
    chunk: bytes, before: int, needles: Callable[[], Collection[bytes]]
) -> Iterator[tuple[int, bytes]]:
    position = counted = 0
    number = before  # lines of the file before ``counted``
    # Each needle's first place at or after an earlier ``position`` (-1: none left), so
    # a needle is searched for again only once a line handed out has passed it.
    found: dict[bytes, int] = {}
    while True:
        hits = []
        for needle in needles():
            at = found.get(needle)
            if at is None or 0 <= at < position:
                at = found[needle] = chunk.find(needle, position)
            if at >= 0:
                hits.append(at)
        if not hits:
            return
        hit = min(hits)
        start = chunk.rfind(b"\n", 0, hit) + 1
        stop = chunk.find(b"\n", hit)
        stop = len(chunk) if stop < 0 else stop + 1
        number += chunk.count(b"\n", counted, start)
        counted, position = start, stop
        yield number + 1, chunk[start:stop]
