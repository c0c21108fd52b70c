"""What start-up leaves to the garbage collector (gateway/run.py: freeze_start_up).

A full collection walks every tracked object on the event loop. What start-up made
lives as long as the process, so it is frozen once the gateway listens: a later full
collection walks only what requests made since (performance.md §16).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from zerto_rewind.gateway.run import freeze_start_up


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # other tests see the collector as they found it


@pytest.mark.usefixtures("unfrozen")
def test_what_start_up_made_is_frozen_and_garbage_is_not() -> None:
    kept = [[n] for n in range(10_000)]  # start-up's long-lived objects
    cycle: list[object] = []
    cycle.append(cycle)  # garbage: collected before the freeze, never frozen
    del cycle
    before = len(gc.get_objects())

    freeze_start_up()

    assert gc.is_tracked(kept[0])
    assert gc.get_freeze_count() >= len(kept)
    assert len(gc.get_objects()) < before - len(kept)  # out of every generation's walk
    made_later = [[n] for n in range(100)]
    assert any(obj is made_later[0] for obj in gc.get_objects())  # new objects are walked
