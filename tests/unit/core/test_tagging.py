"""The tag lifecycle (tagging.Tagger) on one VPG: request, join, reuse, consume, overdue.

A fake clock and the simulator's backend stand in for time and the ZVM (guard_fakes):
tags land where the simulator's journal puts them, and only when the clock gets there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from guard_fakes import Rig

from zerto_rewind.core.cadence import overdue_after
from zerto_rewind.core.decision import Row, VpgOutcome
from zerto_rewind.core.tagging import TagPlan

BUDGET_S = 20.0


def plan_on(rig: Rig, vpg_name: str, vms: tuple[str, ...], *, started_at: float | None = None):
    """Plan a call on ``vms`` of ``vpg_name``: (tagger, plan, call, deadline)."""
    tagger = rig.tagger()
    vpg = rig.zvm.get_vpg(rig.zvm.vpg_id(vpg_name))
    kind = "aws" if vpg.protected_entity == 3 else "vcenter"
    call = rig.call(*vms, started_at=started_at)
    deadline = rig.clock.mono() + BUDGET_S
    plan = tagger.plan(vpg, VpgOutcome(vpg.vpg_id, vpg.name, vms, site_kind=kind), call, deadline)
    return tagger, plan, call, deadline


def landed_tag_checkpoint(rig: Rig, vpg_name: str, tag: str) -> tuple[str, float]:
    """(checkpoint id, time) of the checkpoint carrying ``tag``, read from the journal."""
    journal = rig.backend.vpg_named(vpg_name).journal
    (found,) = [c for c in journal.list() if c.tag == tag]
    return found.identifier, found.timestamp


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path, timeout_s=BUDGET_S)


# ---------------------------------------------------------------- request, join, wait


def test_a_first_call_requests_a_tag_that_lands_at_the_next_boundary(rig: Rig) -> None:
    """One tag request; expected at the next journal boundary + the landing allowance; the
    wait ends on the checkpoint that carries the tag, and the VPG's lag is learned."""
    now = rig.clock.wall()
    boundary = rig.backend.vpg_named("jp-local").journal.next_boundary(now)
    assert boundary is not None
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    out = plan.outcome
    assert (out.row, out.new_tag, out.requested_at) == (Row.PENDING, True, now)
    assert out.expected_at == pytest.approx(boundary + 3.0, abs=0.002)  # allowance 3 s
    assert (out.cadence_s, out.cadence_source) == (5.0, "observed")
    assert rig.zvm.tag_requests("jp-local") == 1
    assert plan.next_poll_at == pytest.approx(boundary, abs=0.002)  # lag not learned yet
    tagger.wait([plan], deadline)
    cp_id, landed = landed_tag_checkpoint(rig, "jp-local", plan.tag_name)
    assert (out.row, out.checkpoint_id, out.landed_at) == (Row.CONFIRMED, cp_id, landed)
    record = rig.state.peek_vpg(out.vpg_id)
    assert record.tag is not None
    assert (record.tag.state, record.tag.checkpoint_id) == ("landed", cp_id)
    assert record.lag_s == pytest.approx(1.0, abs=0.002)  # the simulator's tag_lag_s
    assert rig.clock.wall() < landed + 1.0, "polled from the boundary, not long after"


def test_a_second_call_joins_the_requested_tag(rig: Rig) -> None:
    """Before the tag lands a second call joins it: same tag, no second request."""
    _t, first, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    rig.clock.advance(1.0)
    tagger, second, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert second.tag_name == first.tag_name
    assert (second.outcome.new_tag, second.outcome.row) == (False, Row.PENDING)
    assert rig.zvm.tag_requests("jp-local") == 1
    tagger.wait([second], deadline)
    assert second.outcome.row == Row.CONFIRMED


def test_a_landed_unused_tag_is_reused_then_consumed(rig: Rig) -> None:
    """A landed tag no change has used covers the next call, once; after it is consumed a
    call that started after the landing needs a new tag."""
    tagger, plan, call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], deadline)
    rig.clock.advance(30.0)
    tagger, reuse, call, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert (reuse.done, reuse.outcome.row, reuse.tag_name) == (True, Row.CONFIRMED, plan.tag_name)
    assert rig.zvm.tag_requests("jp-local") == 1
    assert tagger.consume(reuse, call) is True
    assert rig.state.peek_vpg(plan.outcome.vpg_id).allowed_since_landing == 1
    _t, after, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert (after.outcome.new_tag, after.tag_name != plan.tag_name) == (True, True)
    assert rig.zvm.tag_requests("jp-local") == 2
    assert rig.state.peek_vpg(plan.outcome.vpg_id).allowed_since_landing == 0


@pytest.mark.parametrize(
    ("started", "other_consumed", "covered"),
    [
        ("before_landing", False, True),  # waited for it
        ("before_landing", True, True),  # waited for it; others' use does not matter
        ("after_landing", False, True),  # nothing changed since the landing
        ("after_landing", True, False),  # a change sits between checkpoint and call
    ],
)
def test_consume_counts_a_call_only_while_the_tag_covers_it(
    rig: Rig, started: str, other_consumed: bool, covered: bool
) -> None:
    """The covering rule, at the moment of consuming."""
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    request_time = rig.clock.wall()
    tagger.wait([plan], deadline)
    landed = plan.outcome.landed_at
    assert landed is not None
    rig.clock.advance(1.0)
    if other_consumed:
        assert tagger.consume(plan, rig.call("jp-ubuntu", started_at=request_time))
    mine = rig.call("jp-ubuntu", started_at=request_time if started == "before_landing" else None)
    before = rig.state.peek_vpg(plan.outcome.vpg_id).allowed_since_landing
    assert tagger.consume(plan, mine) is covered
    after = rig.state.peek_vpg(plan.outcome.vpg_id).allowed_since_landing
    assert after == before + (1 if covered else 0)


def test_consume_of_a_replaced_tag_needs_a_call_from_before_its_landing(rig: Rig) -> None:
    """Once the VPG's record holds a newer tag, the old plan covers only calls that waited
    for it (started before it landed)."""
    tagger, plan, call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], deadline)
    assert tagger.consume(plan, call)
    rig.clock.advance(10.0)
    plan_on(rig, "jp-local", ("jp-ubuntu",))  # a new tag replaces the record's
    late = rig.call("jp-ubuntu")
    assert tagger.consume(plan, late) is False
    assert tagger.consume(plan, call) is True


# ---------------------------------------------------------------- overdue


def test_a_tag_that_never_lands_is_joined_until_overdue_then_failed(rig: Rig) -> None:
    """Never landing: joined while not overdue; failed after; the next call tags again."""
    rig.zvm.tag_behaviour("jp-local", "never")
    _t, first, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    expected = first.outcome.expected_at
    assert expected is not None
    overdue = overdue_after(expected, 5.0, factor=3.0, minimum_s=60.0)
    assert first.overdue_at == pytest.approx(overdue)
    rig.clock.advance(overdue - rig.clock.wall())  # exactly at the overdue time: still joined
    _t, joined, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert (joined.tag_name, joined.outcome.row) == (first.tag_name, Row.PENDING)
    rig.clock.advance(0.01)
    _t, failed, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert failed.outcome.row == Row.FAILED
    assert "never reached the journal" in failed.outcome.reason
    assert rig.state.peek_vpg(first.outcome.vpg_id).tag.state == "failed"  # type: ignore[union-attr]
    assert rig.zvm.tag_requests("jp-local") == 1
    _t, fresh, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert (fresh.outcome.new_tag, rig.zvm.tag_requests("jp-local")) == (True, 2)


def test_a_wait_past_the_overdue_time_fails_the_tag(tmp_path: Path) -> None:
    """A budget longer than the overdue window: the wait itself declares the tag failed."""
    rig = Rig(tmp_path, timeout_s=200, overdue_min_s=10.0, overdue_factor=1.0)
    rig.zvm.tag_behaviour("jp-local", "never")
    tagger, plan, _call, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], rig.clock.mono() + 150.0)
    assert plan.outcome.row == Row.FAILED
    assert "never reached the journal" in plan.outcome.reason
    assert rig.clock.wall() == pytest.approx(plan.overdue_at, abs=0.3)


# ---------------------------------------------------------------- cadence boundaries


@pytest.mark.parametrize("offset", [0.0, 0.001, 2.5, 4.999])
def test_expected_landing_from_a_request_on_or_near_a_boundary(rig: Rig, offset: float) -> None:
    """A request exactly on a journal boundary expects the *next* boundary, never the request
    time itself; just after a boundary, likewise; the tag lands and is confirmed either way."""
    journal = rig.backend.vpg_named("jp-local").journal
    boundary = journal.next_boundary(rig.clock.wall())
    assert boundary is not None
    rig.clock.advance(boundary + offset - rig.clock.wall())
    plan_time = rig.clock.wall()
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    expected = plan.outcome.expected_at
    assert expected is not None
    assert expected - 3.0 == pytest.approx(boundary + 5.0, abs=0.002)
    assert expected - 3.0 > plan_time
    tagger.wait([plan], deadline)
    assert plan.outcome.row == Row.CONFIRMED


def test_beyond_budget_is_known_at_once(rig: Rig) -> None:
    """An AWS VPG (630 s): the tag lands after the budget, and the tagger says so unwaited."""
    tagger, plan, _call, deadline = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    assert plan.outcome.cadence_s == pytest.approx(630.0)
    assert tagger.beyond_budget(plan, deadline) is True
    _t, vc, _c, vc_deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert tagger.beyond_budget(vc, vc_deadline) is False
    assert rig.clock.sleeps == []


def test_a_failed_tag_task_fails_the_plan_with_the_zvm_reason(rig: Rig) -> None:
    """The ZVM accepts the request, then fails the task: failed with its CompleteReason, at
    the first poll past the expected landing, not at the overdue time."""
    rig.zvm.tag_behaviour("jp-local", "fail", reason="VRA on esx01 did not answer")
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.check_task(plan, deadline)  # right after the request: the task still runs
    assert (plan.done, plan.task_checked) == (False, False)
    tagger.wait([plan], deadline)
    assert plan.outcome.row == Row.FAILED
    assert plan.outcome.reason == "the ZVM refused the tag: VRA on esx01 did not answer"
    assert rig.clock.wall() <= (plan.outcome.expected_at or 0) + 0.5
    assert rig.state.peek_vpg(plan.outcome.vpg_id).tag.state == "failed"  # type: ignore[union-attr]


def test_a_plan_without_a_task_is_never_checked(rig: Rig) -> None:
    """A joined or reused plan may carry no task id: nothing to ask the ZVM."""
    tagger = rig.tagger()
    plan = TagPlan(VpgOutcome("v", "n", ("vm",)))
    tagger.check_task(plan, rig.clock.mono() + 5)
    assert "get_task" not in rig.zvm.calls


def test_a_join_beyond_the_budget_asks_the_task_and_fails_with_the_zvm_reason(rig: Rig) -> None:
    """A plan that joins a requested tag it will not wait for (it lands past the budget) asks
    the tag task once: a failed task fails the plan and the record with the ZVM's reason."""
    rig.zvm.tag_behaviour("CMH-AWS-1", "fail", reason="VRA on esx07 did not answer")
    _t, first, _c, _d = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    rig.clock.advance(5.0)
    asked = rig.zvm.calls.count("get_task")
    _t, joined, _c, _d = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    assert rig.zvm.calls.count("get_task") == asked + 1
    assert (joined.tag_name, joined.outcome.new_tag) == (first.tag_name, False)
    assert (joined.done, joined.outcome.row) == (True, Row.FAILED)
    assert joined.outcome.reason == "the ZVM refused the tag: VRA on esx07 did not answer"
    record = rig.state.peek_vpg(first.outcome.vpg_id)
    assert record.tag is not None
    assert (record.tag.state, record.tag.reason) == ("failed", joined.outcome.reason)


def test_a_join_within_the_budget_leaves_the_task_to_the_wait(rig: Rig) -> None:
    """A plan that will wait for the joined tag does not ask the task when it joins (the wait
    asks once past the expected landing), and a running or completed task is joined."""
    _t, first, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    asked = rig.zvm.calls.count("get_task")
    _t, joined, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert rig.zvm.calls.count("get_task") == asked
    assert (joined.tag_name, joined.outcome.row, joined.done) == (
        first.tag_name,
        Row.PENDING,
        False,
    )
    _t, cloud, _c, _d = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    rig.clock.advance(5.0)  # the task has completed; the tag is still on its way
    _t, cloud_join, _c, _d = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    assert (cloud_join.tag_name, cloud_join.outcome.row) == (cloud.tag_name, Row.PENDING)
    assert cloud_join.task_checked is True
