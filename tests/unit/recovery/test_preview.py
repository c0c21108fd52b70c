"""preview.py: the guard's decision predicted with no side effects, and the MCP answer form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.config import load_written_settings
from support.fakes import FakeZvmClient, cp
from zerto_rewind.config import Settings
from zerto_rewind.core.decision import Decision, Outcome, Row, VpgOutcome
from zerto_rewind.core.state import GuardState, TagRecord
from zerto_rewind.recovery.preview import answer_of, preview_call
from zerto_rewind.zvm.models import VmRef

NOW = 1_800_000_000.0
TOOL = "mcp__vsphere__power_off_vm"


def make_settings(tmp_path: Path, *, top: dict[str, Any] | None = None, **guard: Any) -> Settings:
    """Settings with a vsphere-like catalog, the given guard knobs and top-level keys."""
    config = {
        "zvm": {"url": "https://zvm.test", "username": "u", "password": "p"},
        "read_only_tools": ["mcp__vsphere__list_vms"],
        "tools": {TOOL: {"vm_arg": ["name", "names[]"]}},
        "guard": guard,
        "state_dir": str(tmp_path / "state"),
        **(top or {}),
    }
    return load_written_settings(tmp_path, config)


@pytest.fixture
def zvm() -> FakeZvmClient:
    """A ZVM with a vCenter VPG, an AWS VPG and a paused VPG."""
    fake = FakeZvmClient(journal_cadence=5.0, now=NOW)
    fake.add("jp-local", ["jp-ubuntu"])
    fake.add("aws-1", ["win2019-1"], entity=3, cadence=630.0, last=20.0)
    fake.add("paused-vpg", ["sql-paused-1"], sub=25)
    return fake


@pytest.fixture
def state(tmp_path: Path) -> GuardState:
    """An empty state directory."""
    return GuardState(str(tmp_path / "state"))


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its content."""
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def preview(settings, zvm, state, vm: str | None = "jp-ubuntu", tool: str = TOOL):
    """Preview a call on ``vm`` (no VM argument when None)."""
    tool_input = {} if vm is None else {"name": vm}
    return preview_call(settings, zvm, state, tool, tool_input, now=NOW)


def seed_tag(guard_state: GuardState, vpg_id: str, **fields: Any) -> None:
    """Put a guard tag on a VPG's record."""
    allowed = fields.pop("allowed", 0)
    values = {
        "name": "t1",
        "requested_at": NOW - 30,
        "expected_at": NOW - 25,
        "overdue_at": NOW + 60,
    }
    with guard_state.vpg(vpg_id) as record:
        record.tag = TagRecord(**{**values, **fields})
        record.allowed_since_landing = allowed


# ---------------------------------------------------------------- rows without a tag


def test_read_only_needs_no_zvm(tmp_path, zvm, state):
    """A read-only tool is answered from the catalog alone."""
    check = preview(make_settings(tmp_path), zvm, state, tool="mcp__vsphere__list_vms")
    assert (check.row, check.outcome, check.classification) == ("read_only", "none", "read_only")
    assert zvm.asked == []


def test_unlisted_follows_the_unknown_tools_rule(tmp_path, zvm, state):
    """An unlisted tool gets the configured rule, and no ZVM call."""
    settings = make_settings(tmp_path, top={"unknown_tools": "deny"})
    check = preview(settings, zvm, state, tool="Bash")
    assert (check.row, check.outcome) == ("unlisted", "deny")
    assert zvm.asked == []


def test_mutating_without_a_vm_prompts(tmp_path, zvm, state):
    """A mutating call whose VM cannot be found in the arguments is a prompt."""
    check = preview(make_settings(tmp_path), zvm, state, vm=None)
    assert (check.row, check.outcome) == ("no_vm", "prompt")
    assert "no VM name found in the arguments" in check.summary
    assert "fix vm_arg" not in check.summary.lower()  # never tells the model to change the guard


def test_unknown_vm_prompts(tmp_path, zvm, state):
    """A VM no VPG protects is a prompt, with the name in the summary."""
    check = preview(make_settings(tmp_path), zvm, state, vm="ghost")
    assert (check.row, check.unknown_vms) == ("vm_unknown", ["ghost"])
    assert "ghost" in check.summary


def test_paused_vpg_is_refused_without_listing(tmp_path, zvm, state):
    """A VPG that cannot take a tag is a failed row, decided from its status alone."""
    check = preview(make_settings(tmp_path), zvm, state, vm="sql-paused-1")
    assert (check.row, check.outcome) == ("failed", "deny")
    assert check.vpgs[0].action == "refuse"
    assert "replication is paused" in (check.vpgs[0].refusal or "")
    assert not any(c.startswith("list_checkpoints") for c in zvm.asked)


def test_new_tag_wait_follows_the_cadence(tmp_path, zvm, state):
    """A new tag is expected at the next journal boundary plus the landing allowance."""
    check = preview(make_settings(tmp_path, landing_allowance_s=1.0), zvm, state)
    (vpg,) = check.vpgs
    assert (vpg.action, vpg.cadence_s, vpg.cadence_source) == ("request_new", 5.0, "observed")
    assert vpg.expected_wait_s == pytest.approx(3.0 + 1.0)  # last checkpoint 2 s ago
    assert (check.row, check.outcome, check.would_request_tag) == ("confirmed", "context", True)
    assert vpg.site_kind == "vcenter"


def test_cloud_cadence_beyond_the_budget_is_pending(tmp_path, zvm, state):
    """An AWS VPG whose next checkpoint lies past the budget is pending, per on_pending."""
    denied = preview(make_settings(tmp_path, timeout_s=10), zvm, state, vm="win2019-1")
    assert (denied.row, denied.outcome, denied.exceeds_budget) == ("pending", "deny", True)
    assert denied.vpgs[0].site_kind == "aws"
    assert denied.expected_wait_s is not None
    assert denied.expected_wait_s > denied.budget_s
    asked = preview(
        make_settings(tmp_path, timeout_s=10, on_pending="prompt"), zvm, state, "win2019-1"
    )
    assert asked.outcome == "prompt"


def test_worst_vpg_wins_for_several_vms(tmp_path, zvm, state):
    """One VM on a paused VPG makes the whole call failed."""
    settings = make_settings(tmp_path)
    check = preview_call(
        settings, zvm, state, TOOL, {"names": ["jp-ubuntu", "sql-paused-1"]}, now=NOW
    )
    assert [v.row for v in check.vpgs] == ["confirmed", "failed"]
    assert check.row == "failed"


# ---------------------------------------------------------------- existing tags


def test_unused_landed_tag_is_reused(tmp_path, zvm, state):
    """A landed tag no change has used covers the call: no wait, no new tag."""
    seed_tag(state, "id-jp-local", state="landed", checkpoint_id="1059", landed_at=NOW - 24)
    zvm.journals["id-jp-local"].append(cp("1059", NOW - 24, tag="t1"))  # the journal bears it out
    check = preview(make_settings(tmp_path), zvm, state)
    vpg = check.vpgs[0]
    assert (vpg.action, vpg.row, vpg.expected_wait_s) == ("reuse_landed", "confirmed", 0.0)
    assert vpg.existing_tag is not None
    assert vpg.existing_tag.checkpoint_id == "1059"
    assert check.would_request_tag is False


def test_a_landed_tag_the_journal_does_not_bear_out_is_not_reused(tmp_path, zvm, state):
    """As the guard: a record the journal does not confirm (the state is the agent's to
    write) is failed and a new tag requested; the preview writes neither."""
    seed_tag(state, "id-jp-local", state="landed", checkpoint_id="1059", landed_at=NOW - 24)
    check = preview(make_settings(tmp_path), zvm, state)
    assert (check.vpgs[0].action, check.row) == ("request_new", "confirmed")
    assert state.peek_vpg("id-jp-local").tag.state == "landed"


def test_used_landed_tag_means_a_new_tag(tmp_path, zvm, state):
    """After a change was allowed on a landed tag, the next call needs its own tag."""
    seed_tag(state, "id-jp-local", state="landed", landed_at=NOW - 24, allowed=1)
    check = preview(make_settings(tmp_path), zvm, state)
    assert check.vpgs[0].action == "request_new"
    assert check.vpgs[0].existing_tag.changes_allowed_since_landing == 1


def test_requested_tag_is_joined_until_expected(tmp_path, zvm, state):
    """A requested tag not yet due is joined; its wait is the time left to its expected landing."""
    seed_tag(state, "id-aws-1", expected_at=NOW + 400, overdue_at=NOW + 2000)
    check = preview(make_settings(tmp_path, timeout_s=60), zvm, state, vm="win2019-1")
    vpg = check.vpgs[0]
    assert (vpg.action, vpg.expected_wait_s, vpg.row) == ("join_pending", 400.0, "pending")
    assert check.would_request_tag is False


def test_a_joined_tag_past_the_budget_asks_its_task_as_the_tagger_does(tmp_path, zvm, state):
    """A requested tag the guard would join but not wait for: its task is read (never written);
    a failed task is a failed row with the ZVM's reason, a running or completed one pending."""
    settings = make_settings(tmp_path, timeout_s=60)
    seed_tag(state, "id-aws-1", expected_at=NOW + 400, overdue_at=NOW + 2000, task_id="ok-1")
    check = preview(settings, zvm, state, vm="win2019-1")
    assert (check.vpgs[0].action, check.row, check.vpgs[0].refusal) == (
        "join_pending",
        "pending",
        None,
    )
    seed_tag(state, "id-aws-1", expected_at=NOW + 400, overdue_at=NOW + 2000, task_id="failed-2")
    check = preview(settings, zvm, state, vm="win2019-1")
    vpg = check.vpgs[0]
    assert (vpg.action, vpg.row, check.row, check.outcome) == (
        "join_pending",
        "failed",
        "failed",
        "deny",
    )
    assert vpg.refusal == "the ZVM refused the tag: VRA on esx07 did not answer"
    assert zvm.asked.count("get_task failed-2") == 1


def test_a_joined_tag_within_the_budget_leaves_its_task_to_the_wait(tmp_path, zvm, state):
    """Joined and waited for: the preview, like the tagger, does not ask the task."""
    seed_tag(state, "id-jp-local", expected_at=NOW + 3, overdue_at=NOW + 60, task_id="failed-3")
    check = preview(make_settings(tmp_path), zvm, state)
    assert (check.vpgs[0].action, check.row) == ("join_pending", "confirmed")
    assert not any(c.startswith("get_task") for c in zvm.asked)


def test_requested_tag_found_in_the_journal_is_reused(tmp_path, zvm, state):
    """A requested tag that is listable once due counts as landed."""
    seed_tag(state, "id-jp-local", name="landed-tag")
    zvm.journals["id-jp-local"].append(cp("2000", NOW - 24, tag="landed-tag"))
    check = preview(make_settings(tmp_path), zvm, state)
    assert (check.vpgs[0].action, check.row) == ("reuse_landed", "confirmed")


def test_overdue_tag_fails_the_call(tmp_path, zvm, state):
    """A requested tag past its overdue time and not in the journal fails the call."""
    seed_tag(state, "id-jp-local", overdue_at=NOW - 1)
    check = preview(make_settings(tmp_path), zvm, state)
    assert (check.vpgs[0].action, check.row) == ("fail_overdue", "failed")
    assert "never reached the journal" in (check.vpgs[0].refusal or "")


def test_preview_writes_nothing(tmp_path, zvm, state):
    """Whatever the row, the state directory is byte-for-byte unchanged."""
    seed_tag(state, "id-aws-1", expected_at=NOW + 400, overdue_at=NOW + 2000)
    settings = make_settings(tmp_path)
    before = files(tmp_path / "state")
    for vm in ("jp-ubuntu", "win2019-1", "sql-paused-1", "ghost"):
        preview(settings, zvm, state, vm=vm)
    assert files(tmp_path / "state") == before


# ---------------------------------------------------------------- the MCP answer


def test_answer_of_a_pending_decision_gives_the_retry_time():
    """A pending decision becomes proceed=false with retry_after and seconds to wait."""
    outcome = VpgOutcome("id-1", "aws-1", ("win2019-1",), "aws", Row.PENDING, tag="t")
    decision = Decision(
        Row.PENDING, Outcome.DENY, TOOL, reason="pending", vpgs=[outcome], retry_after=NOW + 42
    )
    answer = answer_of(decision, now=NOW)
    assert (answer.proceed, answer.retry_in_s, answer.message) == (False, 42.0, "pending")
    assert answer.retry_after == "2027-01-15T08:00:42.000Z"
    assert answer.checkpoints[0].rewind is None


def test_answer_of_a_confirmed_decision_says_how_to_rewind():
    """A confirmed decision carries the checkpoint, its landing time and the way back."""
    outcome = VpgOutcome("id-1", "jp-local", ("jp-ubuntu",), "vcenter", Row.CONFIRMED)
    outcome.checkpoint_id, outcome.tag, outcome.landed_at = "77", "t", NOW
    decision = Decision(Row.CONFIRMED, Outcome.CONTEXT, TOOL, context="ctx", vpgs=[outcome])
    answer = answer_of(decision, now=NOW)
    (confirmation,) = answer.checkpoints
    assert (answer.proceed, answer.message, confirmation.checkpoint_id) == (True, "ctx", "77")
    assert confirmation.timestamp == "2027-01-15T08:00:00.000Z"
    assert "zerto_recovery_plan(vm='jp-ubuntu', checkpoint='77')" in (confirmation.rewind or "")


def test_a_name_zerto_lists_for_two_vms_previews_as_ambiguous(tmp_path: Path, zvm, state):
    """Two VM identifiers under one name: the guard would prompt, and nothing is planned."""
    zvm.add("web-a", [])
    zvm.add("web-b", [])
    zvm.refs["web"] = [VmRef("s.vm-42", "web", "id-web-a", "web-a"),
                       VmRef("s.vm-43", "web", "id-web-b", "web-b")]  # fmt: skip
    check = preview(make_settings(tmp_path), zvm, state, "web")
    assert (check.row, check.outcome) == (Row.VM_AMBIGUOUS, Outcome.PROMPT)
    assert "several VMs of the name 'web' (2 VMs: s.vm-42, s.vm-43)" in check.summary
    assert check.vpgs == []


def test_a_case_twin_previews_as_unknown(tmp_path: Path, zvm, state):
    """The preview asks the ZVM for the name exactly as the call gives it."""
    check = preview(make_settings(tmp_path), zvm, state, "JP-Ubuntu")
    assert check.row == Row.VM_UNKNOWN
    assert check.unknown_vms == ["JP-Ubuntu"]
    assert "find_vms JP-Ubuntu" in zvm.asked
