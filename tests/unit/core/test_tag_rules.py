"""The tag rules as a sans-IO layer (tag_rules): feed facts, check the actions.

No ZVM, no state directory and no clock here: each test builds the facts the
Tagger would gather (the VPG's record, the call, the time, what the journal and
the ZVM said) and compares the actions the rules answer with ``==``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from zerto_rewind.config.settings import GuardSettings
from zerto_rewind.core.decision import Row, ToolCall, VpgOutcome
from zerto_rewind.core.state import TagRecord, VpgRecord
from zerto_rewind.core.tag_actions import (
    Adopt,
    AskTask,
    AskVpg,
    Consumption,
    Fail,
    JournalAnswer,
    KeepTagTimes,
    Land,
    LookUp,
    MarkFailed,
    MarkLanded,
    PollAt,
    PollFacts,
    RequestTag,
    TagFacts,
)
from zerto_rewind.core.tag_plan import TagPlan, apply_to_plan, apply_to_record
from zerto_rewind.core.tag_rules import (
    after_poll,
    consume_rule,
    landing_look,
    learned_lag,
    on_task,
    on_vpg,
    overdue_reason,
    plan_tag,
    poll_interval,
    tag_name,
    unconfirmed_reason,
)
from zerto_rewind.zvm.models import Checkpoint, Task, TaskState, Vpg

NOW = 1_800_000_000.0
TOOL = "mcp__vsphere__power_off_vm"
ADVICE = "check that the VPG is replicating, then retry: the next call requests a new tag"


def a_call(started_at: float = NOW) -> ToolCall:
    return ToolCall(TOOL, {"vm": "web-1"}, session_id="sess-1234abcd", started_at=started_at)


def a_record(tag: TagRecord | None = None, **fields: object) -> VpgRecord:
    """A VPG with a 5 s cadence whose last checkpoint was 2 s ago (next boundary: NOW + 3)."""
    record = VpgRecord("vpg-1", "web-vpg", tag=tag, cadence_s=5.0, last_checkpoint_at=NOW - 2)
    return replace(record, **fields)  # type: ignore[arg-type]


def a_tag(state: str = "requested", **fields: object) -> TagRecord:
    tag = TagRecord("zerto-rewind t1", NOW - 10, NOW - 4, NOW + 50, 3.0, task_id="task-1")
    tag.state = state
    if state == "landed":
        tag.checkpoint_id, tag.landed_at = "cp-1", NOW - 5
    return replace(tag, **fields)  # type: ignore[arg-type]


def facts(record: VpgRecord, **more: object) -> TagFacts:
    base = TagFacts(
        record=record,
        call=a_call(),
        vpg_name="web-vpg",
        vms=("web-1",),
        settings=GuardSettings(),
        now=NOW,
        remaining_s=20.0,
    )
    return replace(base, **more)  # type: ignore[arg-type]


def checkpoint(cp_id: str, at: float, tag: str | None) -> Checkpoint:
    return Checkpoint(cp_id, datetime.fromtimestamp(at, UTC), tag, None)


def the_request(record: VpgRecord, *, times: tuple[float, ...] = ()) -> list[object]:
    """What a new tag's request looks like on ``a_record``: lands at NOW + 3 + 3 s."""
    name = tag_name("zerto-rewind", a_call(), ("web-1",), NOW)
    request = RequestTag(name, NOW, NOW + 6.0, NOW + 66.0, 3.0, f"{TOOL} web-1")
    return [KeepTagTimes((*times, NOW)), request]


# ---------------------------------------------------------------- plan_tag


def test_no_tag_requests_one_planned_from_cadence_and_allowance() -> None:
    """Next boundary (NOW + 3) plus the landing allowance (3 s); overdue after 60 s more."""
    record = a_record()
    assert plan_tag(facts(record)) == the_request(record)


def test_a_learned_lag_replaces_the_allowance() -> None:
    actions = plan_tag(facts(a_record(lag_s=0.5)))
    request = actions[-1]
    assert isinstance(request, RequestTag)
    assert (request.expected_at, request.lag_s) == (NOW + 3.5, 0.5)


def test_the_catalogs_vpg_is_named_when_the_call_names_no_vm() -> None:
    request = plan_tag(facts(a_record(), vms=()))[-1]
    assert isinstance(request, RequestTag)
    assert "web-vpg" in request.name
    assert request.requested_by == f"{TOOL} "


def test_past_the_bound_the_plan_fails_and_old_request_times_are_dropped() -> None:
    record = a_record(tag_times=[NOW - 90, NOW - 30, NOW - 10])
    actions = plan_tag(facts(record, settings=GuardSettings(max_tags_per_minute=2)))
    assert actions[0] == KeepTagTimes((NOW - 30, NOW - 10))
    fail = actions[1]
    assert isinstance(fail, Fail)
    assert fail.bounded
    assert "(guard.max_tags_per_minute: 2)" in fail.reason
    assert len(actions) == 2, "no tag is requested"


def test_within_the_bound_the_request_time_is_counted() -> None:
    record = a_record(tag_times=[NOW - 90, NOW - 30])
    actions = plan_tag(facts(record, settings=GuardSettings(max_tags_per_minute=2)))
    assert actions == the_request(record, times=(NOW - 30,))


def test_a_recorded_landed_tag_is_first_looked_up_in_the_journal() -> None:
    """The record alone (the agent can write it) never allows a call."""
    tag = a_tag("landed")
    assert plan_tag(facts(a_record(tag))) == [LookUp(tag.name, tag.requested_at)]


def test_a_landed_tag_the_journal_bears_out_is_reused_at_the_journals_time() -> None:
    tag = a_tag("landed")
    found = checkpoint("cp-1", NOW - 4.5, tag.name)
    journal = JournalAnswer(found, (checkpoint("cp-0", NOW - 7, None), found))
    actions = plan_tag(facts(a_record(tag), journal=journal))
    assert actions == [MarkLanded(tag.name, None, NOW - 4.5), Adopt(tag.name, done=True)]


@pytest.mark.parametrize(
    "listed",
    [
        (),  # not in the journal at all
        (checkpoint("cp-9", NOW - 4.5, "zerto-rewind t1"),),  # another checkpoint id
        (
            checkpoint("cp-1", NOW - 4.5, "zerto-rewind t1"),
            checkpoint("cp-2", NOW - 1, "zerto-rewind t2"),  # a later guard tag
        ),
    ],
)
def test_a_landed_tag_the_journal_does_not_bear_out_is_failed_and_replaced(
    listed: tuple[Checkpoint, ...],
) -> None:
    tag = a_tag("landed")
    found = next((c for c in listed if c.tag == tag.name), None)
    record = a_record(tag)
    actions = plan_tag(facts(record, journal=JournalAnswer(found, listed)))
    assert actions == [MarkFailed(tag.name, unconfirmed_reason(tag)), *the_request(record)]


def test_a_tag_the_first_look_found_landed_is_reused_without_another_look() -> None:
    tag = a_tag("landed")
    assert plan_tag(facts(a_record(tag), landed_now=True)) == [Adopt(tag.name, done=True)]


def test_a_landed_tag_used_since_does_not_cover_a_later_call() -> None:
    """A change sits between the checkpoint and this call: tag again."""
    record = a_record(a_tag("landed"), allowed_since_landing=1)
    assert plan_tag(facts(record, landed_now=True)) == the_request(record)


def test_a_requested_tag_is_joined_within_the_budget() -> None:
    tag = a_tag("requested", expected_at=NOW + 15)
    assert plan_tag(facts(a_record(tag), remaining_s=20.0)) == [Adopt(tag.name)]


def test_a_joined_tag_past_the_budget_has_its_task_asked_now() -> None:
    tag = a_tag("requested", expected_at=NOW + 30)
    actions = plan_tag(facts(a_record(tag), remaining_s=20.0))
    assert actions == [Adopt(tag.name), AskTask("task-1")]


def test_a_joined_tag_without_a_task_is_not_asked() -> None:
    tag = a_tag("requested", expected_at=NOW + 30, task_id=None)
    assert plan_tag(facts(a_record(tag), remaining_s=20.0)) == [Adopt(tag.name)]


def test_an_overdue_tag_is_failed_with_the_reason_and_the_advice() -> None:
    tag = a_tag("requested", overdue_at=NOW - 1)
    reason = overdue_reason(tag)
    assert plan_tag(facts(a_record(tag))) == [
        MarkFailed(tag.name, reason),
        Adopt(tag.name),
        Fail(f"{reason}; {ADVICE}"),
    ]


# ---------------------------------------------------------------- the first look, the wait


@pytest.mark.parametrize(
    ("tag", "now", "look"),
    [
        (None, NOW, False),
        (a_tag("requested", expected_at=NOW + 2), NOW, False),  # boundary NOW + 2: not yet
        (a_tag("requested", expected_at=NOW + 2), NOW + 2, True),
        (a_tag("landed"), NOW, False),
    ],
)
def test_landing_look_asks_only_for_a_requested_tag_that_is_due(
    tag: TagRecord | None, now: float, look: bool
) -> None:
    record = a_record(tag, lag_s=0.0)
    expected = LookUp(tag.name, tag.requested_at) if look and tag else None
    assert landing_look(record, now) == expected


def poll(**more: object) -> PollFacts:
    base = PollFacts(
        tag_name="zerto-rewind t1",
        requested_at=NOW - 10,
        expected_at=NOW + 5,
        overdue_at=NOW + 60,
        task_id="task-1",
        task_checked=False,
        vpg_checked=False,
        poll_s=0.25,
        now=NOW,
        found=None,
    )
    return replace(base, **more)  # type: ignore[arg-type]


def test_a_poll_that_finds_the_tag_lands_it() -> None:
    found = checkpoint("cp-7", NOW - 0.5, "zerto-rewind t1")
    assert after_poll(poll(found=found)) == [Land("cp-7", NOW - 0.5)]


def test_a_poll_before_the_expected_landing_only_looks_again() -> None:
    assert after_poll(poll()) == [PollAt(NOW + 0.25)]


@pytest.mark.parametrize(
    ("task_id", "task_checked", "vpg_checked", "asks"),
    [
        ("task-1", False, False, [AskTask("task-1"), AskVpg()]),
        ("task-1", True, False, [AskVpg()]),
        (None, False, False, [AskVpg()]),
        ("task-1", True, True, []),
    ],
)
def test_a_late_tag_has_its_task_then_its_vpg_asked_once_each(
    task_id: str | None, task_checked: bool, vpg_checked: bool, asks: list[object]
) -> None:
    late = poll(now=NOW + 6, task_id=task_id, task_checked=task_checked, vpg_checked=vpg_checked)
    assert after_poll(late) == [*asks, PollAt(NOW + 6.25)]


def test_an_overdue_poll_fails_the_tag_and_the_plan() -> None:
    facts_ = poll(now=NOW + 61)
    ours = TagRecord("zerto-rewind t1", NOW - 10, NOW + 5, NOW + 60)
    reason = overdue_reason(ours)
    assert after_poll(facts_) == [MarkFailed(ours.name, reason), Fail(f"{reason}; {ADVICE}")]


def a_task(state: TaskState, reason: str | None = None) -> Task:
    return Task("task-1", "AddCheckpoint", state, 100, reason, None, None)


def test_a_failed_task_fails_the_tag_with_the_zvms_reason() -> None:
    reason = "the ZVM refused the tag: VRA down"
    actions = on_task(a_task(TaskState.FAILED, "VRA down"), "task-1", "t1")
    assert actions == [MarkFailed("t1", reason), Fail(reason)]
    assert on_task(a_task(TaskState.IN_PROGRESS), "task-1", "t1") == []
    assert on_task(a_task(TaskState.COMPLETED), "task-1", "t1") == []


def a_vpg(status: int) -> Vpg:
    return Vpg(
        "vpg-1", "web-vpg", status, 0, "", "", 0, 0, None, None, None, None, None, None, False
    )


def test_a_vpg_that_stopped_taking_checkpoints_fails_the_pending_tag() -> None:
    actions = on_vpg(a_vpg(8), "t1")  # failed over, not replicating
    assert len(actions) == 2
    mark, fail = actions
    assert isinstance(mark, MarkFailed)
    assert isinstance(fail, Fail)
    assert mark.reason == fail.reason
    assert "it stopped taking checkpoints while tag 't1' was pending" in fail.reason
    assert on_vpg(a_vpg(1), "t1") == []  # meeting its SLA


@pytest.mark.parametrize(
    ("landed_at", "lag"),
    [(NOW + 0.5, 0.5), (NOW - 1.0, 0.0), (NOW + 9.0, 5.0)],  # as is, not negative, capped
)
def test_learned_lag_is_boundary_to_listing_within_the_cadence(
    landed_at: float, lag: float
) -> None:
    assert learned_lag(NOW + 3.0, 3.0, landed_at, 5.0) == lag


@pytest.mark.parametrize(
    ("cadence", "interval"), [(None, 0.25), (1.0, 0.1), (10.0, 0.5), (600.0, 2.0)]
)
def test_poll_interval_follows_the_cadence_within_bounds(
    cadence: float | None, interval: float
) -> None:
    assert poll_interval(cadence) == interval


# ---------------------------------------------------------------- consuming


@pytest.mark.parametrize(
    ("allowed_since", "started_at", "verdict"),
    [
        (0, NOW, Consumption(allowed=True, counted=True)),  # nothing changed since the landing
        (1, NOW - 6, Consumption(allowed=True, counted=True)),  # it waited for the tag
        (1, NOW, Consumption(allowed=False)),  # a change sits between checkpoint and call
    ],
)
def test_consume_counts_a_call_while_the_records_tag_covers_it(
    allowed_since: int, started_at: float, verdict: Consumption
) -> None:
    record = a_record(a_tag("landed"), allowed_since_landing=allowed_since)
    call = a_call(started_at)
    assert consume_rule(record, "zerto-rewind t1", NOW - 5, call) == verdict


def test_a_replaced_tag_allows_only_a_call_that_waited_for_it_and_counts_none() -> None:
    record = a_record(a_tag("requested", name="zerto-rewind t2"))
    waited = consume_rule(record, "zerto-rewind t1", NOW - 5, a_call(NOW - 5))
    assert waited == Consumption(allowed=True)
    assert consume_rule(record, "zerto-rewind t1", NOW - 5, a_call(NOW)) == Consumption(False)
    assert consume_rule(record, "zerto-rewind t1", None, a_call(NOW - 9)) == Consumption(False)


# ---------------------------------------------------------------- carrying actions out


def test_record_actions_leave_a_tag_another_call_moved_on_from_alone() -> None:
    record = a_record(a_tag("requested", name="zerto-rewind t2"))
    apply_to_record(record, MarkFailed("zerto-rewind t1", "overdue"))
    apply_to_record(record, MarkLanded("zerto-rewind t1", "cp-1", NOW))
    assert record.tag == a_tag("requested", name="zerto-rewind t2")
    apply_to_record(record, MarkLanded("zerto-rewind t2", "cp-2", NOW))
    assert record.tag is not None
    assert (record.tag.state, record.tag.checkpoint_id, record.tag.landed_at) == (
        "landed",
        "cp-2",
        NOW,
    )


def test_a_journal_confirmation_sets_only_the_landing_time() -> None:
    record = a_record(a_tag("landed", checkpoint_id=None))
    apply_to_record(record, MarkLanded("zerto-rewind t1", None, NOW - 4.5))
    assert record.tag is not None
    assert (record.tag.checkpoint_id, record.tag.landed_at) == (None, NOW - 4.5)


def test_plan_actions_fail_the_plan_or_set_its_next_look() -> None:
    plan = TagPlan(VpgOutcome("vpg-1", "web-vpg", ("web-1",)))
    apply_to_plan(plan, PollAt(NOW + 1))
    assert (plan.next_poll_at, plan.done) == (NOW + 1, False)
    apply_to_plan(plan, Fail("past the bound", bounded=True))
    out = plan.outcome
    assert (plan.done, out.row, out.reason, out.bounded) == (
        True,
        Row.FAILED,
        "past the bound",
        True,
    )
