"""log_line.lines_holding: the one chunked search the sessions reader and the rewind plan share."""

from __future__ import annotations

import io

import pytest

from zerto_rewind.core import log_line
from zerto_rewind.core.log_line import lines_holding

_LOG = b'{"a": 1}\n{"b": 2, "a": 3}\n{"c": 4}\n{"b": 5}\n{"c": 6}'


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_each_line_holding_a_needle_once_with_its_number(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(log_line, "_CHUNK", chunk)
    found = list(lines_holding(io.BytesIO(_LOG), lambda: [b'"a"', b'"b"']))
    assert found == [(1, b'{"a": 1}\n'), (2, b'{"b": 2, "a": 3}\n'), (4, b'{"b": 5}\n')]


@pytest.mark.parametrize("chunk", [2, 9, 1 << 20])
def test_a_needle_added_after_a_line_is_looked_for_from_then_on(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The sessions reader follows a VM once it has met it: needles() is asked again."""
    monkeypatch.setattr(log_line, "_CHUNK", chunk)
    needles = [b'"b"']
    numbers = []
    for number, line in lines_holding(io.BytesIO(_LOG), lambda: needles):
        numbers.append(number)
        if b'"b": 2' in line:
            needles.append(b'"c"')
    # "c" on line 3 and 5 (no newline at the end); "a" on line 1 never asked for
    assert numbers == [2, 3, 4, 5]
