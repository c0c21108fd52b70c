"""The decision table (guard.Guard) over the simulator's estate, with a fake clock.

Every test drives the real Guard and Tagger; the simulator's backend (guard_fakes)
decides where checkpoints are and when tags land, and time moves only on sleep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unit.core.guard_fakes import TOOL, Rig
from zerto_rewind.core.decision import Outcome, Row, ToolCall

BUDGET_S = 20.0


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path, timeout_s=BUDGET_S)


# ---------------------------------------------------------------- the table

ROWS: list[tuple[str, str, Any, str, str, dict[str, int]]] = [
    # (case, tool, tool_input, row, outcome, tag requests per VPG)
    ("read-only", "mcp__vsphere__list_vms", {}, Row.READ_ONLY, Outcome.NONE, {}),
    ("unlisted", "mcp__other__thing", {"name": "jp-ubuntu"}, Row.UNLISTED, Outcome.PROMPT, {}),
    ("no VM", TOOL, {"force": True}, Row.NO_VM, Outcome.PROMPT, {}),
    ("unknown VM", TOOL, {"name": "ghost"}, Row.VM_UNKNOWN, Outcome.PROMPT, {}),
    ("vCenter", TOOL, {"name": "jp-ubuntu"}, Row.CONFIRMED, Outcome.CONTEXT, {"jp-local": 1}),
    ("AWS", TOOL, {"name": "win2019-1"}, Row.PENDING, Outcome.DENY, {"CMH-AWS-1": 1}),
    ("Azure", TOOL, {"name": "web-az-1"}, Row.PENDING, Outcome.DENY, {"EUS-AZ-1": 1}),
    ("paused", TOOL, {"name": "sql-paused-1"}, Row.FAILED, Outcome.DENY, {}),
    ("initial sync", TOOL, {"name": "new-vm-1"}, Row.FAILED, Outcome.DENY, {}),
    (
        "VM in two VPGs",
        TOOL,
        {"name": "multi-1"},
        Row.CONFIRMED,
        Outcome.CONTEXT,
        {"multi-a": 1, "multi-b": 1},
    ),
    (
        "vCenter + AWS",
        TOOL,
        {"names": ["jp-ubuntu", "win2019-1"]},
        Row.PENDING,
        Outcome.DENY,
        {"jp-local": 1, "CMH-AWS-1": 1},
    ),
    (
        "healthy + paused: no tag at all",
        TOOL,
        {"names": ["jp-ubuntu", "sql-paused-1"]},
        Row.FAILED,
        Outcome.DENY,
        {},
    ),
    (
        "protected + unknown: prompt, no tag",
        TOOL,
        {"names": ["jp-ubuntu", "ghost"]},
        Row.VM_UNKNOWN,
        Outcome.PROMPT,
        {},
    ),
]


@pytest.mark.parametrize(
    ("tool", "tool_input", "row", "outcome", "tags"),
    [r[1:] for r in ROWS],
    ids=[r[0] for r in ROWS],
)
def test_decision_table(
    rig: Rig, tool: str, tool_input: Any, row: str, outcome: str, tags: dict[str, int]
) -> None:
    """Each situation gets its row and outcome, and tags exactly the VPGs it should."""
    call = ToolCall(tool, tool_input, session_id="s1", started_at=rig.clock.wall())
    decision = rig.guard().decide(call)
    assert (decision.row, decision.outcome) == (row, outcome), decision.reason
    requested = {k: v for k, v in rig.backend.stats.tag_requests.items() if v}
    assert requested == tags
    if outcome in (Outcome.DENY, Outcome.PROMPT):
        assert decision.reason, "every denial and prompt says why"
    if row == Row.CONFIRMED:
        assert decision.context
        for vpg in decision.vpgs:
            assert vpg.checkpoint_id is not None
            assert vpg.checkpoint_id in decision.context
            assert vpg.tag in rig.zvm.tags(vpg.vpg_name)


def test_a_protected_and_an_unknown_vm_are_never_allowed_with_one_unguarded(rig: Rig) -> None:
    """One call on a protected VM and an unknown one: prompt, naming the unknown VM."""
    decision = rig.decide("jp-ubuntu", "ghost-vm")
    assert (decision.row, decision.outcome) == (Row.VM_UNKNOWN, Outcome.PROMPT)
    assert "ghost-vm" in decision.reason
    assert rig.zvm.tag_requests("jp-local") == 0


def test_pending_is_answered_at_once_with_the_time_to_retry(rig: Rig) -> None:
    """AWS: no waiting; the reason names the tag, the VPG and the retry time."""
    decision = rig.decide("win2019-1")
    (vpg,) = decision.vpgs
    assert rig.clock.sleeps == []
    assert decision.retry_after == pytest.approx((vpg.expected_at or 0) + 1.0)
    assert vpg.tag is not None
    for part in (vpg.tag, "CMH-AWS-1", "aws-protected", "Retry the same call after"):
        assert part in decision.reason


# ---------------------------------------------------------------- retries and reuse


def test_two_rounds_of_pending_then_retry_each_end_on_their_own_tag(rig: Rig) -> None:
    """Cloud VPG: pending → retry allowed on tag 1; a later change: pending → retry allowed on
    tag 2 (the count of changes since a landing restarts with each new tag)."""
    tags = []
    for _round in range(2):
        first = rig.decide("win2019-1")
        assert first.row == Row.PENDING
        rig.clock.advance((first.retry_after or 0) - rig.clock.wall())
        retry = rig.decide("win2019-1")
        assert (retry.row, retry.outcome) == (Row.CONFIRMED, Outcome.CONTEXT), retry.reason
        assert retry.vpgs[0].tag == first.vpgs[0].tag
        tags.append(retry.vpgs[0].tag)
        rig.clock.advance(60.0)
    assert tags[0] != tags[1]
    assert rig.zvm.tag_requests("CMH-AWS-1") == 2


def test_a_tag_used_by_another_call_between_landing_and_consume_is_not_reused(
    rig: Rig,
) -> None:
    """Another process counts a change on the landed tag between this call's plan and its
    consume: this call must not ride on it, and tags again."""
    first = rig.decide("jp-ubuntu")
    assert first.row == Row.CONFIRMED
    rig.clock.advance(30.0)
    vpg_id = rig.zvm.vpg_id("jp-local")
    rig.state.locks.clear()
    # A landed, unused tag (a confirm-only MCP call, or a call not yet consumed).
    with rig.state.vpg(vpg_id) as record:
        record.allowed_since_landing = 0
    rig.state.locks.clear()

    def someone_else_consumes() -> None:
        with rig.state.vpg(vpg_id) as record:
            record.allowed_since_landing += 1

    rig.state.before_lock(vpg_id, 2, someone_else_consumes)  # lock 1 plans, lock 2 consumes
    second = rig.decide("jp-ubuntu")
    assert (second.row, second.outcome) == (Row.CONFIRMED, Outcome.CONTEXT)
    assert second.vpgs[0].tag != first.vpgs[0].tag
    assert rig.zvm.tag_requests("jp-local") == 2


def test_confirm_without_consuming_leaves_the_tag_for_the_next_change(rig: Rig) -> None:
    """consume=False (the MCP confirm tool): the next mutating call reuses the same tag."""
    confirmed = rig.decide("jp-ubuntu", consume=False)
    rig.clock.advance(5.0)
    change = rig.decide("jp-ubuntu")
    assert change.row == Row.CONFIRMED
    assert change.vpgs[0].tag == confirmed.vpgs[0].tag
    assert rig.zvm.tag_requests("jp-local") == 1
    rig.clock.advance(5.0)
    assert rig.decide("jp-ubuntu").vpgs[0].tag != confirmed.vpgs[0].tag


def test_a_pending_call_does_not_use_up_a_confirmed_tag(rig: Rig) -> None:
    """vCenter + AWS: pending overall, so the landed vCenter tag is not counted as used."""
    decision = rig.decide("jp-ubuntu", "win2019-1")
    assert decision.row == Row.PENDING
    record = rig.state.peek_vpg(rig.zvm.vpg_id("jp-local"))
    assert record.tag is not None
    assert record.allowed_since_landing == 0


# ---------------------------------------------------------------- failures


def test_a_failed_tag_task_on_a_healthy_vpg_fails_fast_with_the_task_reason(rig: Rig) -> None:
    """The simulator fails the tag task (VPG healthy): failed, with the ZVM's reason, well
    inside the budget; the next call requests a new tag."""
    rig.zvm.tag_behaviour("jp-local", "fail", reason="VRA on esx01 did not answer")
    decision = rig.decide("jp-ubuntu")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "VRA on esx01 did not answer" in decision.reason
    assert decision.elapsed_ms < 10_000  # one cadence and a poll, not the 20 s budget
    assert rig.decide("jp-ubuntu").row == Row.CONFIRMED
    assert rig.zvm.tag_requests("jp-local") == 2


def test_a_vpg_paused_mid_wait_is_failed_not_pending(rig: Rig) -> None:
    """The tag was expected within the budget; replication is paused before it lands."""
    rig.clock.at(rig.clock.wall() + 0.5, lambda: rig.zvm.pause("jp-local"))
    decision = rig.decide("jp-ubuntu")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "paused" in decision.reason
    assert "stopped taking checkpoints" in decision.reason


def test_the_guard_never_waits_past_its_deadline(rig: Rig) -> None:
    """A tag that never lands: the answer comes by the deadline, as pending."""
    rig.zvm.tag_behaviour("jp-local", "never")
    started = rig.clock.mono()
    decision = rig.guard().decide(rig.call("jp-ubuntu"), deadline=started + 8.0)
    assert decision.row == Row.PENDING
    assert rig.clock.mono() <= started + 8.0 + 0.5


def test_a_zvm_error_denies_with_the_reason(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ZertoRewindError from the client: row error, deny, naming the error and the VM."""
    from zerto_rewind.errors import ZvmTimeout

    def timeout(*_args: object, **_kwargs: object) -> None:
        raise ZvmTimeout("GET /v1/vms timed out")

    monkeypatch.setattr(rig.zvm, "find_vms", timeout)
    decision = rig.decide("jp-ubuntu")
    assert (decision.row, decision.outcome) == (Row.ERROR, Outcome.DENY)
    assert "ZvmTimeout" in decision.reason
    assert "jp-ubuntu" in decision.reason


def test_the_seeds_false_denial_at_real_aws_scale(tmp_path: Path) -> None:
    """The seed's scenario with the real figures: a 150 s budget, an AWS VPG at 630 s. The
    seed waited 45 s and said "failed" while the tag landed minutes later; the guard says
    pending at once, and the retry after the landing runs on that same checkpoint."""
    rig = Rig(tmp_path, timeout_s=150)
    first = rig.decide("win2019-1")
    assert (first.row, rig.clock.sleeps) == (Row.PENDING, [])
    (pending,) = first.vpgs
    assert (pending.expected_at or 0) - rig.clock.wall() > 150
    rig.clock.advance(45.0)  # where the seed gave up: not landed, yet not failed either
    assert rig.zvm.tags("CMH-AWS-1") == []
    assert rig.decide("win2019-1").row == Row.PENDING
    rig.clock.advance((first.retry_after or 0) - rig.clock.wall())
    retry = rig.decide("win2019-1")
    assert (retry.row, retry.vpgs[0].tag) == (Row.CONFIRMED, pending.tag)
    assert rig.zvm.tag_requests("CMH-AWS-1") == 1


def test_a_retry_that_joins_a_failed_tag_task_fails_fast_with_the_task_reason(rig: Rig) -> None:
    """Cloud VPG, the ZVM fails the tag task: the first call is pending (the task still runs
    when it answers); a retry that joins the tag before its expected landing asks the task and
    is failed with the ZVM's reason, not pending again until the tag is overdue; the call
    after that requests a new tag."""
    rig.zvm.tag_behaviour("CMH-AWS-1", "fail", reason="VRA on esx07 did not answer")
    first = rig.decide("win2019-1")
    assert first.row == Row.PENDING
    rig.clock.advance(30.0)  # well before the expected landing (~630 s)
    retry = rig.decide("win2019-1")
    assert (retry.row, retry.outcome) == (Row.FAILED, Outcome.DENY), retry.reason
    assert "the ZVM refused the tag: VRA on esx07 did not answer" in retry.reason
    assert rig.clock.sleeps == []
    assert rig.zvm.tag_requests("CMH-AWS-1") == 1
    assert rig.decide("win2019-1").row == Row.PENDING
    assert rig.zvm.tag_requests("CMH-AWS-1") == 2
