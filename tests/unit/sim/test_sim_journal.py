"""The journal model on a fake clock: grid, history, ids, tags, pauses, cadence changes."""

from __future__ import annotations

import itertools

import pytest

from support.fakes import FakeClock
from zerto_rewind.sim.journal import AUTOMATIC, TAGGED, Journal, JournalParams

# The journal's clock starts at a fixed wall time: no test leans on time.time().
START = 1_700_000_000.0


def journal(clock: FakeClock, **overrides: float) -> Journal:
    """A 5-second, 60-minute journal without jitter unless overridden."""
    params = {"cadence_s": 5.0, "history_s": 3600.0, "jitter_fraction": 0.0, "seed": 3}
    params |= overrides
    return Journal.start(JournalParams(**params), clock)  # type: ignore[arg-type]


def test_history_exists_from_the_start() -> None:
    """A new journal already holds a full history of checkpoints at the cadence."""
    clock = FakeClock(START)
    listing = journal(clock).list()
    assert len(listing) == 720
    assert listing[0].timestamp >= clock.now - 3600
    assert all(
        b.timestamp - a.timestamp == pytest.approx(5) for a, b in itertools.pairwise(listing)
    )
    assert {cp.type for cp in listing} == {AUTOMATIC}


def test_ids_are_consecutive_and_stable_as_time_passes() -> None:
    """An id names the same checkpoint at every later read; ids increase by one."""
    clock = FakeClock(START)
    j = journal(clock)
    first = j.list()
    clock.now += 12
    later = j.list()
    by_time = {cp.timestamp: cp.identifier for cp in first}
    assert all(by_time[cp.timestamp] == cp.identifier for cp in later if cp.timestamp in by_time)
    ids = [int(cp.identifier) for cp in later]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert len(later) == 720  # trimmed to the history window


def test_window_filters() -> None:
    """start and end restrict the listing; ids match the full listing."""
    clock = FakeClock(START)
    j = journal(clock)
    full = j.list()
    part = j.list(full[10].timestamp, full[12].timestamp)
    assert part == full[10:13]


def test_tag_is_invisible_until_it_lands_then_gets_the_next_id() -> None:
    """A tag appears only at its landing time, between automatic checkpoints, in id order."""
    clock = FakeClock(START)
    j = journal(clock)
    boundary = j.next_boundary(clock.now)
    assert boundary is not None
    assert clock.now < boundary <= clock.now + 5
    j.add_tag("mark", boundary + 1.0)
    clock.now = boundary + 0.999
    assert all(cp.tag is None for cp in j.list())
    clock.now = boundary + 1.0
    listing = j.list()
    assert (listing[-1].tag, listing[-1].type, listing[-1].timestamp) == (
        "mark",
        TAGGED,
        boundary + 1,
    )
    assert int(listing[-1].identifier) == int(listing[-2].identifier) + 1
    clock.now += 10
    after = j.list()
    tagged = next(cp for cp in after if cp.tag == "mark")
    assert tagged == listing[-1]
    assert int(after[-1].identifier) > int(tagged.identifier)


def test_pause_stops_writing_and_drops_unlanded_tags() -> None:
    """While not writing no checkpoints appear; a tag due after the pause never lands."""
    clock = FakeClock(START)
    j = journal(clock)
    j.add_tag("doomed", clock.now + 6)
    latest = j.latest()
    j.set_writing(False)
    clock.now += 60
    assert j.latest() == latest
    assert j.next_boundary(clock.now) is None
    j.set_writing(True)
    clock.now += 11
    listing = j.list()
    assert listing[-1].timestamp > latest.timestamp + 60  # type: ignore[union-attr]
    assert all(cp.tag != "doomed" for cp in listing)
    ids = [int(cp.identifier) for cp in listing]
    assert ids == list(range(ids[0], ids[0] + len(ids)))


def test_started_stopped_keeps_old_history() -> None:
    """A journal that stopped 10 minutes ago lists older checkpoints only."""
    clock = FakeClock(START)
    j = Journal.start(JournalParams(5.0, 3600.0, 0.0), clock, stopped_for_s=600)
    latest = j.latest()
    assert latest is not None
    assert clock.now - 605 <= latest.timestamp < clock.now - 600


def test_never_written_journal_is_empty() -> None:
    """writing=False from the start (initial sync) has no checkpoints."""
    clock = FakeClock(START)
    j = Journal.start(JournalParams(5.0, 3600.0, writing=False), clock)
    assert j.list() == []
    assert j.latest() is None
    assert j.earliest() is None


def test_cadence_change_keeps_ids_monotonic() -> None:
    """A new cadence applies from now on, with ids still in time order."""
    clock = FakeClock(START)
    j = journal(clock)
    j.set_cadence(1.0)
    clock.now += 10
    listing = j.list()
    gaps = [
        round(b.timestamp - a.timestamp, 6)
        for a, b in zip(listing[-9:], listing[-8:], strict=False)
    ]
    assert set(gaps) == {1.0}
    ids = [int(cp.identifier) for cp in listing]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    with pytest.raises(ValueError, match="positive"):
        j.set_cadence(0)


def test_jitter_is_bounded_and_repeatable() -> None:
    """Jitter moves each checkpoint by at most min(3% of cadence, cap) and is deterministic."""
    clock = FakeClock(START)
    j = journal(clock, jitter_fraction=0.03, jitter_cap_s=0.2, cadence_s=60.0)
    listing = j.list()
    gaps = [b.timestamp - a.timestamp for a, b in itertools.pairwise(listing)]
    assert all(59.6 <= gap <= 60.4 for gap in gaps)
    assert len(set(round(g, 6) for g in gaps)) > 1
    assert j.list() == listing


def test_earliest_and_latest() -> None:
    """earliest/latest agree with the full listing."""
    clock = FakeClock(START)
    j = journal(clock, cadence_s=630.0)
    listing = j.list()
    assert j.earliest() == listing[0]
    assert j.latest() == listing[-1]


def test_untouched_journals_are_cheap() -> None:
    """Creating 10,000 journals generates no checkpoints: each holds one segment, nothing else.

    Checked by what a journal holds, not by a wall-clock bound, which a busy machine breaks.
    """
    clock = FakeClock(START)
    journals = [journal(clock, seed=i) for i in range(10_000)]
    assert all(len(j.segments) == 1 and not j.tags for j in journals)
