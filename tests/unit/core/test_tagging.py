"""The tag lifecycle (tagging.Tagger) on one VPG: request, join, reuse, consume, overdue.

A fake clock and the simulator's backend stand in for time and the ZVM (guard_fakes):
tags land where the simulator's journal puts them, and only when the clock gets there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unit.core.guard_fakes import Rig
from zerto_rewind.core.cadence import overdue_after
from zerto_rewind.core.decision import Row, ToolCall, VpgOutcome
from zerto_rewind.core.state import TagRecord, VpgRecord
from zerto_rewind.core.tagging import (
    TagPlan,
    covers,
    exceeds_budget,
    landing_due,
    overdue_reason,
    task_failure,
)
from zerto_rewind.zvm.models import Task

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
    assert first.overdue_at == pytest.approx(overdue, abs=1e-3)
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


# ---------------------------------------------------------------- the rule functions


def record_with(tag: TagRecord | None, *, allowed: int = 0, lag: float | None = None) -> VpgRecord:
    return VpgRecord("v", tag=tag, allowed_since_landing=allowed, lag_s=lag)


def tag_at(state: str = "requested", landed_at: float | None = None) -> TagRecord:
    return TagRecord("t", 100.0, 110.0, 200.0, state=state, landed_at=landed_at)


@pytest.mark.parametrize(
    ("tag", "allowed", "started", "covered"),
    [
        (tag_at("landed", 110.0), 0, 500.0, True),  # unused: covers a later call
        (tag_at("landed", 110.0), 1, 500.0, False),  # used: a change sits in between
        (tag_at("landed", 110.0), 1, 110.0, True),  # started exactly at the landing: waited
        (tag_at("landed", 110.0), 1, 109.0, True),
        (tag_at("landed", None), 0, 0.0, False),  # landed without a time: never
        (tag_at("failed", 110.0), 0, 0.0, False),  # not landed: never
        (tag_at("requested", 110.0), 0, 0.0, False),
    ],
)
def test_covers(tag: TagRecord, allowed: int, started: float, covered: bool) -> None:
    call = ToolCall("t", {}, started_at=started)
    assert covers(record_with(tag, allowed=allowed), tag, call) is covered


@pytest.mark.parametrize(
    ("lag", "now", "due"),
    [
        (None, 110.0, True),  # exactly at the expected landing, lag unknown
        (None, 109.5, False),
        (1.0, 109.0, True),  # from the boundary (expected less the learned lag) on
        (1.0, 108.9, False),
    ],
)
def test_landing_due(lag: float | None, now: float, due: bool) -> None:
    tag = tag_at()
    assert landing_due(record_with(tag, lag=lag), tag, now) is due


def test_task_failure_names_the_task_when_the_zvm_gives_no_reason() -> None:
    def task(state: int, reason: str | None) -> Task:
        return Task("t-1", None, state, 100, reason, None, None)

    assert task_failure(task(6, None), "t-1") is None  # completed
    assert task_failure(task(4, "VRA down"), "t-1") == "the ZVM refused the tag: VRA down"
    assert task_failure(task(4, None), "t-1") == (
        "the ZVM refused the tag: the ZVM task t-1 failed without a reason"
    )


# ---------------------------------------------------------------- the tagger's edges


def test_a_replaced_tag_is_kept_in_the_history(rig: Rig) -> None:
    """A new tag pushes the old one's summary onto the VPG's history, field by field."""
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], deadline)
    tagger.consume(plan, rig.call("jp-ubuntu"))
    rig.clock.advance(10.0)
    plan_on(rig, "jp-local", ("jp-ubuntu",))
    record = rig.state.peek_vpg(plan.outcome.vpg_id)
    assert record.history[-1] == {
        "name": plan.tag_name,
        "state": "landed",
        "requested_at": plan.outcome.requested_at,
        "expected_at": plan.outcome.expected_at,
        "landed_at": plan.outcome.landed_at,
        "checkpoint_id": plan.outcome.checkpoint_id,
        "reason": None,
    }


def test_an_overdue_tag_fails_with_the_reason_and_the_advice(rig: Rig) -> None:
    rig.zvm.tag_behaviour("jp-local", "never")
    _t, first, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    rig.clock.advance(first.overdue_at - rig.clock.wall() + 0.01)
    _t, failed, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    record = rig.state.peek_vpg(first.outcome.vpg_id)
    assert record.tag is not None
    assert failed.outcome.reason == (
        f"{overdue_reason(record.tag)}; check that the VPG is replicating, then retry: the next "
        "call requests a new tag"
    )
    assert record.tag.reason == overdue_reason(record.tag)


def test_a_joined_task_is_asked_within_the_deadline_and_named_without_a_reason(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, object]] = []

    def failed_task(task_id: str, **kwargs: object) -> Task:
        asked.append((task_id, kwargs.get("deadline")))
        return Task(task_id, None, 4, 100, None, None, None)

    _t, first, _c, _d = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    monkeypatch.setattr(rig.zvm, "get_task", failed_task)
    rig.clock.advance(5.0)
    _t, joined, _c, deadline = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    assert asked == [(first.task_id, deadline)]
    assert joined.outcome.reason == (
        f"the ZVM refused the tag: the ZVM task {first.task_id} failed without a reason"
    )


def test_a_small_landing_lag_is_learned_as_is(tmp_path: Path) -> None:
    """The lag is the landing less the boundary, never below zero (here 0.4 s, not rounded up)."""
    rig = Rig(tmp_path, timeout_s=BUDGET_S, sim={"tag_lag_s": 0.4})
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], deadline)
    assert rig.state.peek_vpg(plan.outcome.vpg_id).lag_s == pytest.approx(0.4, abs=0.002)


def test_a_long_landing_lag_is_capped_by_the_vpgs_own_cadence(tmp_path: Path) -> None:
    """An AWS VPG (630 s) whose tags surface 8 s after the boundary learns 8 s."""
    rig = Rig(tmp_path, timeout_s=900.0, sim={"tag_lag_s": 8.0})
    tagger, plan, _call, _deadline = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    tagger.wait([plan], rig.clock.mono() + 900.0)
    assert plan.outcome.row == Row.CONFIRMED
    assert rig.state.peek_vpg(plan.outcome.vpg_id).lag_s == pytest.approx(8.0, abs=0.002)


def test_landing_or_failing_an_old_plan_never_touches_a_newer_tag(rig: Rig) -> None:
    """The record holds another (newer) tag by the time this plan's tag lands or its task
    fails: that tag keeps its state."""
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    vpg_id = plan.outcome.vpg_id
    newer = TagRecord("newer", rig.clock.wall(), rig.clock.wall() + 500, rig.clock.wall() + 900)
    with rig.state.vpg(vpg_id) as record:
        record.tag = newer
    tagger.wait([plan], deadline)
    assert plan.outcome.row == Row.CONFIRMED
    kept = rig.state.peek_vpg(vpg_id).tag
    assert kept is not None
    assert (kept.name, kept.state, kept.landed_at) == ("newer", "requested", None)
    rig.zvm.tag_behaviour("jp-local", "fail", reason="VRA down")
    rig.clock.advance(30.0)
    with rig.state.vpg(vpg_id) as record:
        record.tag = None
    tagger, failing, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert failing.outcome.new_tag is True
    with rig.state.vpg(vpg_id) as record:
        record.tag = newer
    tagger.wait([failing], deadline)
    assert failing.outcome.row == Row.FAILED
    kept = rig.state.peek_vpg(vpg_id).tag
    assert kept is not None
    assert (kept.name, kept.state) == ("newer", "requested")


def test_consume_of_a_replaced_tag_counts_a_call_started_at_its_landing(rig: Rig) -> None:
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], deadline)
    landed = plan.outcome.landed_at
    assert landed is not None
    assert tagger.consume(plan, rig.call("jp-ubuntu", started_at=landed))  # used once
    rig.clock.advance(10.0)
    _t, newer, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))  # a new tag replaces it
    assert newer.tag_name != plan.tag_name
    assert tagger.consume(plan, rig.call("jp-ubuntu", started_at=landed)) is True
    assert tagger.consume(plan, rig.call("jp-ubuntu", started_at=landed + 0.001)) is False


def test_a_tag_overdue_while_the_record_moved_on_fails_this_plan_only(tmp_path: Path) -> None:
    """Past the overdue time the record already holds another tag (another call failed ours
    and requested a new one): this plan fails at once, the newer tag is left alone, and the
    wait does not spin on the ZVM until the deadline."""
    rig = Rig(tmp_path, timeout_s=200, overdue_min_s=10.0, overdue_factor=1.0)
    rig.zvm.tag_behaviour("jp-local", "never")
    tagger, plan, _call, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    newer = TagRecord("newer", rig.clock.wall(), rig.clock.wall() + 500, rig.clock.wall() + 900)

    def replace_tag() -> None:
        with rig.state.vpg(plan.outcome.vpg_id) as record:
            record.tag = newer

    rig.clock.at(plan.overdue_at - 0.01, replace_tag)
    listings = 0
    original = rig.zvm.list_checkpoints

    def listing(*args: Any, **kwargs: Any) -> Any:
        nonlocal listings
        listings += 1
        rig.clock.advance(0.01)  # a spinning wait would still reach its deadline
        return original(*args, **kwargs)

    rig.zvm.list_checkpoints = listing  # type: ignore[method-assign]
    deadline = rig.clock.mono() + 150.0
    tagger.wait([plan], deadline)
    assert plan.outcome.row == Row.FAILED
    ours = TagRecord(
        plan.tag_name,
        plan.outcome.requested_at or 0.0,
        plan.outcome.expected_at or 0.0,
        plan.overdue_at,
    )
    assert plan.outcome.reason == (
        f"{overdue_reason(ours)}; check that the VPG is replicating, then retry: the next call "
        "requests a new tag"
    )
    assert rig.clock.mono() < deadline - 100
    assert listings < 100
    kept = rig.state.peek_vpg(plan.outcome.vpg_id).tag
    assert kept is not None
    assert (kept.name, kept.state) == ("newer", "requested")


def test_exceeds_budget_is_strictly_later_than_the_time_left() -> None:
    assert exceeds_budget(110.0, 100.0, 10.0) is False  # lands exactly as time runs out: wait
    assert exceeds_budget(110.001, 100.0, 10.0) is True


def test_the_journal_is_listed_from_just_before_the_request(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polls list the journal from the request time less 5 s of clock skew, not from now."""
    since: list[float] = []
    original = rig.zvm.list_checkpoints

    def listing(vpg_id: str, **kwargs: Any) -> Any:
        since.append(kwargs["since"].timestamp())
        return original(vpg_id, **kwargs)

    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    monkeypatch.setattr(rig.zvm, "list_checkpoints", listing)
    rig.clock.advance(2.0)
    tagger.wait([plan], deadline)
    assert plan.outcome.row == Row.CONFIRMED
    requested = plan.outcome.requested_at
    assert since
    assert since == [pytest.approx((requested or 0) - 5.0, abs=1e-3)] * len(since)


def test_a_wait_that_cannot_poll_again_before_the_deadline_answers_at_once(rig: Rig) -> None:
    """No poll fits before the deadline: return now, not after sleeping out the budget."""
    rig.zvm.tag_behaviour("jp-local", "never")
    tagger, plan, _call, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    deadline = rig.clock.mono() + 9.9
    tagger.wait([plan], deadline)
    assert plan.outcome.row == Row.PENDING
    assert deadline - plan.poll_s <= rig.clock.mono() < deadline


def test_the_task_is_asked_only_past_the_expected_landing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the VPG's lag learned, polls start at the expected landing itself; the task of a
    tag not found there is asked strictly after it."""
    tagger, first, call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([first], deadline)
    tagger.consume(first, call)
    rig.clock.advance(20.0)
    rig.zvm.tag_behaviour("jp-local", "never")
    asked_at: list[float] = []
    original = rig.zvm.get_task

    def get_task(task_id: str, **kwargs: Any) -> Any:
        asked_at.append(rig.clock.wall())
        return original(task_id, **kwargs)

    monkeypatch.setattr(rig.zvm, "get_task", get_task)
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    expected = plan.outcome.expected_at or 0.0
    assert plan.next_poll_at == pytest.approx(expected, abs=1e-3)  # lag learned: poll there
    tagger.wait([plan], deadline)
    assert asked_at
    assert all(t > expected for t in asked_at)


def test_a_failed_task_without_a_reason_is_named(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    tagger, plan, _call, deadline = plan_on(rig, "jp-local", ("jp-ubuntu",))
    monkeypatch.setattr(
        rig.zvm, "get_task", lambda task_id, **_k: Task(task_id, None, 4, 100, None, None, None)
    )
    tagger.check_task(plan, deadline)
    assert plan.outcome.reason == (
        f"the ZVM refused the tag: the ZVM task {plan.task_id} failed without a reason"
    )


def test_a_wait_that_finds_its_tag_overdue_fails_it_in_the_record(tmp_path: Path) -> None:
    rig = Rig(tmp_path, timeout_s=200, overdue_min_s=10.0, overdue_factor=1.0)
    rig.zvm.tag_behaviour("jp-local", "never")
    tagger, plan, _call, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    tagger.wait([plan], rig.clock.mono() + 150.0)
    record = rig.state.peek_vpg(plan.outcome.vpg_id)
    assert record.tag is not None
    assert (record.tag.state, record.tag.reason) == ("failed", overdue_reason(record.tag))


def test_a_landed_record_the_journal_does_not_bear_out_is_failed_not_reused(rig: Rig) -> None:
    """A record that says "landed" for a tag the journal does not carry (stale, or written by
    someone else into the state directory): failed with the reason, and a new tag."""
    vpg_id = rig.zvm.vpg_id("jp-local")
    now = rig.clock.wall()
    with rig.state.vpg(vpg_id) as record:
        record.tag = TagRecord("forged", now - 60, now - 55, now + 60, state="landed")
        record.tag.mark_landed("cp-forged", now - 55)
    _t, plan, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert (plan.outcome.new_tag, plan.tag_name != "forged") == (True, True)
    (old,) = rig.state.peek_vpg(vpg_id).history[-1:]
    assert (old["name"], old["state"]) == ("forged", "failed")
    assert old["reason"] == (
        "tag 'forged' is recorded as landed, but the ZVM journal does not confirm it as the "
        "VPG's latest guard checkpoint; not reused"
    )


# ---------------------------------------------------------------- more rule functions


def cadence_record(
    source: str | None, cadence: float | None, learned_at: float | None
) -> VpgRecord:
    return VpgRecord("v", cadence_s=cadence, cadence_source=source, cadence_learned_at=learned_at)


@pytest.mark.parametrize(
    ("source", "cadence", "learned_ago", "overrides", "known"),
    [
        ("observed", 5.0, 10.0, {}, (5.0, "observed")),
        ("observed", 5.0, 600.0, {}, (5.0, "observed")),  # exactly ten minutes: still good
        ("observed", 5.0, 600.5, {}, None),  # stale
        ("observed", 5.0, None, {}, None),  # never learned
        ("observed", None, 10.0, {}, None),
        (None, 5.0, 10.0, {}, None),
        ("site:aws", 630.0, 10.0, {}, None),  # only a guess: measure again
        ("config", 7.0, 10.0, {"jp": 9.0}, (9.0, "config")),  # the override as it is now
        ("config", 7.0, 10.0, {}, None),  # the override went away
        ("observed", 5.0, 10.0, {"jp": 9.0}, None),  # an override appeared
    ],
)
def test_known_cadence(
    source: str | None,
    cadence: float | None,
    learned_ago: float | None,
    overrides: dict[str, float],
    known: tuple[float, str] | None,
) -> None:
    from types import SimpleNamespace

    from zerto_rewind.core.tagging import known_cadence

    now = 10_000.0
    learned_at = None if learned_ago is None else now - learned_ago
    settings = SimpleNamespace(cadence_s=overrides)
    record = cadence_record(source, cadence, learned_at)
    assert known_cadence(record, "jp", settings, now) == known  # type: ignore[arg-type]


def test_landing_lag_prefers_the_learned_one() -> None:
    from types import SimpleNamespace

    from zerto_rewind.core.tagging import landing_lag

    settings = SimpleNamespace(landing_allowance_s=3.0)
    assert landing_lag(VpgRecord("v", lag_s=0.5), settings) == 0.5  # type: ignore[arg-type]
    assert landing_lag(VpgRecord("v", lag_s=0.0), settings) == 0.0  # type: ignore[arg-type]
    assert landing_lag(VpgRecord("v"), settings) == 3.0  # type: ignore[arg-type]


def test_look_for_landing_asks_only_for_a_requested_tag_that_is_due() -> None:
    from zerto_rewind.core.tagging import look_for_landing

    asked: list[tuple[str, object]] = []

    class Journal:
        def list_checkpoints(self, vpg_id: str, **kwargs: object) -> list[object]:
            asked.append((vpg_id, kwargs.get("deadline")))
            return []

    client = Journal()
    record = VpgRecord("v", tag=tag_at("requested"))
    assert look_for_landing(client, record, 109.0, deadline=7.0) == (None, [])  # type: ignore[arg-type]
    assert asked == []  # not due yet
    assert look_for_landing(client, record, 110.0, deadline=7.0) == (None, [])  # type: ignore[arg-type]
    assert asked == [("v", 7.0)]
    landed = VpgRecord("v", tag=tag_at("landed", 110.0))
    look_for_landing(client, landed, 500.0, deadline=7.0)  # type: ignore[arg-type]
    look_for_landing(client, VpgRecord("v"), 500.0, deadline=7.0)  # type: ignore[arg-type]
    assert len(asked) == 1


@pytest.mark.parametrize(
    ("room", "shortened"),
    [(10, "abcdefghij"), (4, "a..."), (3, "abc"), (2, "ab"), (0, "")],
)
def test_shorten(room: int, shortened: str) -> None:
    from zerto_rewind.core.tag_rules import _shorten

    assert _shorten("abcdefghij", room) == shortened


def test_times_for_the_zvm_are_utc() -> None:
    from datetime import UTC

    from zerto_rewind.core.tagging import _utc

    assert _utc(0.0).tzinfo is UTC


def test_a_very_long_prefix_keeps_the_end_of_the_tag() -> None:
    from zerto_rewind.core.tagging import TAG_MAX, tag_name

    call = ToolCall("mcp__v__off", {}, session_id="0f3c9a1e-77")
    prefix = "p" * 95
    name = tag_name(prefix, call, ("vm",), 1_715_953_509.0)
    assert len(name) == TAG_MAX
    assert name == (prefix + " vm s=0f3c9a1e 2024-05-17T13:45:09Z")[-TAG_MAX:]  # no room: no tool


def test_vms_keep_eight_characters_before_the_tool_gives_way() -> None:
    """The VM list keeps at least 8 characters; the tool name gets what is left."""
    from zerto_rewind.core.tagging import TAG_MAX, tag_name

    tool = "mcp__srv__" + "t" * 70
    call = ToolCall(tool, {}, session_id="0f3c9a1e-77")
    name = tag_name("zerto-rewind", call, ("web-server-0001", "web-server-0002"), 1_715_953_509.0)
    assert len(name) <= TAG_MAX
    parts = name.split(" ")
    assert parts[2] == "web-s..."  # 8 characters of VMs
    assert parts[1].startswith("srv.ttt")
    assert parts[1].endswith("...")
    assert len(name) == TAG_MAX  # the tool took exactly the room left


def test_the_tag_names_the_vms_or_the_catalog_vpg_and_who_asked(rig: Rig) -> None:
    _t, plan, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu", "jp-2"))
    record = rig.state.peek_vpg(plan.outcome.vpg_id)
    assert record.tag is not None
    assert " jp-ubuntu,jp-2 s=s1 " in plan.tag_name
    assert record.tag.requested_by == "mcp__vsphere__power_off_vm jp-ubuntu,jp-2"
    assert record.vpg_name == "jp-local"
    _t, named, _c, _d = plan_on(rig, "multi-a", ())
    assert " multi-a s=s1 " in named.tag_name


def test_poll_interval_follows_the_cadence_within_bounds(tmp_path: Path) -> None:
    rig = Rig(tmp_path, timeout_s=BUDGET_S, cadence_s={"EUS-AZ-1": 1.0})
    assert plan_on(rig, "jp-local", ("jp-ubuntu",))[1].poll_s == pytest.approx(0.25, abs=1e-9)
    assert plan_on(rig, "CMH-AWS-1", ("win2019-1",))[1].poll_s == pytest.approx(2.0, abs=1e-9)
    assert plan_on(rig, "EUS-AZ-1", ("web-az-1",))[1].poll_s == pytest.approx(0.1, abs=1e-9)


def test_the_cadence_is_measured_over_twelve_site_cadences(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    since: list[float] = []
    original = rig.zvm.list_checkpoints

    def listing(vpg_id: str, **kwargs: Any) -> Any:
        since.append(kwargs["since"].timestamp())
        return original(vpg_id, **kwargs)

    monkeypatch.setattr(rig.zvm, "list_checkpoints", listing)
    now = rig.clock.wall()
    plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert since == [pytest.approx(now - 12 * 5.0, abs=1e-3)]  # vCenter's 5 s


def test_a_vpg_without_a_readable_journal_plans_with_its_site_default(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rig.zvm, "list_checkpoints", lambda *_a, **_k: [])
    _t, plan, _c, _d = plan_on(rig, "CMH-AWS-1", ("win2019-1",))
    assert (plan.outcome.cadence_s, plan.outcome.cadence_source) == (630.0, "site:aws")


def test_a_config_override_is_planned_with_and_not_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = Rig(tmp_path, timeout_s=BUDGET_S, cadence_s={"jp-local": 7.0})
    _t, first, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert (first.outcome.cadence_s, first.outcome.cadence_source) == (7.0, "config")
    rig.clock.advance(1.0)
    listings = rig.zvm.calls.count("list_checkpoints jp-local")
    _t, joined, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    assert joined.outcome.cadence_source == "config"
    assert rig.zvm.calls.count("list_checkpoints jp-local") == listings


def test_a_retry_finds_its_landed_tag_with_one_listing(rig: Rig) -> None:
    """The retry's refresh finds the tag in the journal, marks it landed with the journal's
    checkpoint, and reuses it at once, without a second (confirming) listing."""
    _t, first, _c, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    rig.clock.advance(10.0)  # landed meanwhile; nobody waited
    listings = rig.zvm.calls.count("list_checkpoints jp-local")
    _t, retry, _c, _d = plan_on(
        rig, "jp-local", ("jp-ubuntu",), started_at=first.outcome.requested_at
    )
    cp_id, landed = landed_tag_checkpoint(rig, "jp-local", first.tag_name)
    assert (retry.done, retry.outcome.row, retry.outcome.checkpoint_id) == (
        True,
        Row.CONFIRMED,
        cp_id,
    )
    assert retry.outcome.landed_at == pytest.approx(landed, abs=1e-3)
    assert rig.zvm.calls.count("list_checkpoints jp-local") == listings + 1


def test_a_site_kind_without_a_default_measures_over_twelve_aws_like_cadences(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    since: list[float] = []
    original = rig.zvm.list_checkpoints

    def listing(vpg_id: str, **kwargs: Any) -> Any:
        since.append(kwargs["since"].timestamp())
        return original(vpg_id, **kwargs)

    monkeypatch.setattr(rig.zvm, "list_checkpoints", listing)
    vpg = rig.zvm.get_vpg(rig.zvm.vpg_id("jp-local"))
    outcome = VpgOutcome(vpg.vpg_id, vpg.name, ("jp-ubuntu",), site_kind="weird")
    now = rig.clock.wall()
    rig.tagger().plan(vpg, outcome, rig.call("jp-ubuntu"), rig.clock.mono() + BUDGET_S)
    assert since == [pytest.approx(now - 12 * 630.0, abs=1e-3)]


def test_a_late_tag_has_its_vpg_read_once_during_the_wait(rig: Rig) -> None:
    """Past the expected landing the wait reads the VPG once (did it stop taking
    checkpoints?), not at every poll."""
    rig.zvm.tag_behaviour("jp-local", "never")
    tagger, plan, _call, _d = plan_on(rig, "jp-local", ("jp-ubuntu",))
    before = rig.zvm.calls.count("get_vpg jp-local")
    tagger.wait([plan], rig.clock.mono() + 15.0)
    assert plan.outcome.row == Row.PENDING
    assert rig.zvm.calls.count("get_vpg jp-local") == before + 1
