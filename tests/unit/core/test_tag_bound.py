"""guard.max_tags_per_minute: a bound on the tags the guard requests per VPG (the fake clock).

Each call here is consumed, so the next one on the VPG needs a new tag; past the bound
the guard denies with the bound, the VPG and the time of the next possible tag, and
a joined tag is not counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from unit.core.guard_fakes import Rig
from zerto_rewind.core.decision import Decision, Outcome, Row, VpgOutcome, fmt_time


def _changes(rig: Rig, count: int) -> list[Decision]:
    """``count`` mutating calls on jp-ubuntu, one after another, each waiting for its tag."""
    decisions = []
    for _ in range(count):
        decisions.append(rig.decide("jp-ubuntu"))
        rig.clock.advance(0.5)
    return decisions


def test_past_the_bound_the_guard_denies_with_the_bound_the_vpg_and_the_next_time(
    tmp_path: Path,
) -> None:
    """Three tags in a minute, then a deny (no fourth request) that says when one is possible;
    once the oldest tag is a minute old, the next call is tagged again."""
    rig = Rig(tmp_path, timeout_s=20, max_tags_per_minute=3)
    first, second, third, fourth = _changes(rig, 4)
    assert [d.row for d in (first, second, third)] == [Row.CONFIRMED] * 3
    assert (fourth.row, fourth.outcome) == (Row.FAILED, Outcome.DENY)
    assert rig.zvm.tag_requests("jp-local") == 3
    record = rig.state.peek_vpg(rig.zvm.vpg_id("jp-local"))
    next_at = min(record.tag_times) + 60.0
    reason = fourth.reason
    assert "VPG 'jp-local'" in reason
    assert "guard.max_tags_per_minute: 3" in reason
    assert f"the next tag is possible from {fmt_time(next_at)}" in reason
    assert fourth.vpgs[0].bounded
    assert fourth.log_record(rig.call("jp-ubuntu"))["tag_bound"] == ["jp-local"]
    rig.clock.advance(next_at - rig.clock.wall() + 0.1)
    assert rig.decide("jp-ubuntu").row == Row.CONFIRMED
    assert rig.zvm.tag_requests("jp-local") == 4


def test_a_joined_tag_does_not_count_against_the_bound(tmp_path: Path) -> None:
    """With a bound of 1, calls that join the one requested tag all plan on it."""
    rig = Rig(tmp_path, timeout_s=20, max_tags_per_minute=1)
    tagger = rig.tagger()
    vpg = rig.zvm.get_vpg(rig.zvm.vpg_id("jp-local"))
    plans = []
    for _ in range(5):
        outcome = VpgOutcome(vpg.vpg_id, vpg.name, ("jp-ubuntu",), site_kind="vcenter")
        plans.append(tagger.plan(vpg, outcome, rig.call("jp-ubuntu"), rig.clock.mono() + 20))
        rig.clock.advance(0.1)
    assert {p.tag_name for p in plans} == {plans[0].tag_name}
    assert not any(p.outcome.bounded for p in plans)
    assert rig.zvm.tag_requests("jp-local") == 1


def test_null_means_no_bound(tmp_path: Path) -> None:
    """max_tags_per_minute: null lets every call that needs a tag have one."""
    rig = Rig(tmp_path, timeout_s=20, max_tags_per_minute=None)
    assert all(d.row == Row.CONFIRMED for d in _changes(rig, 8))
    assert rig.zvm.tag_requests("jp-local") == 8


def test_the_default_bound_is_six(tmp_path: Path) -> None:
    """Without the key, six tags per VPG per minute."""
    rig = Rig(tmp_path, timeout_s=20)
    rows = [d.row for d in _changes(rig, 7)]
    assert rows == [Row.CONFIRMED] * 6 + [Row.FAILED]


def test_the_bound_is_kept_in_the_vpgs_record_across_guards(tmp_path: Path) -> None:
    """The request times live in the shared record: a second guard (another process or
    replica on the same state) sees the first one's tags."""
    rig = Rig(tmp_path, timeout_s=20, max_tags_per_minute=2)
    _changes(rig, 2)
    other = Rig(tmp_path, timeout_s=20, max_tags_per_minute=2)
    other.clock, other.backend, other.zvm = rig.clock, rig.backend, rig.zvm
    assert other.decide("jp-ubuntu").row == Row.FAILED


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "6"])
def test_the_parser_refuses_a_bound_that_is_not_a_whole_number(
    tmp_path: Path, value: object
) -> None:
    """0, negatives, fractions, booleans and strings are refused, naming the key."""
    from zerto_rewind.errors import ConfigError

    with pytest.raises(ConfigError, match=r"guard\.max_tags_per_minute.*null for no bound"):
        Rig(tmp_path, max_tags_per_minute=value)
