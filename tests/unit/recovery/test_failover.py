"""recovery, recovery_plan, recovery_live (and protection's lookups): plans, refusals, confirms."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from support.config import load_written_settings
from support.fakes import FakeZvmClient, cp
from zerto_rewind.config import Settings
from zerto_rewind.errors import AmbiguousVm, RecoveryError, UsageError
from zerto_rewind.recovery import failover as recovery
from zerto_rewind.recovery import live as recovery_live
from zerto_rewind.recovery import plan as recovery_plan
from zerto_rewind.recovery.failover import confirm_token
from zerto_rewind.recovery.protection import parse_since, select_ref
from zerto_rewind.zvm.models import VmRef

NOW = 1_800_000_000.0


def make_settings(tmp_path: Path, *, allow_live: bool) -> Settings:
    """Settings whose recovery.allow_live is as given."""
    config = {
        "zvm": {"url": "https://zvm.test", "username": "u", "password": "p"},
        "recovery": {"allow_live": allow_live},
        "state_dir": str(tmp_path / "state"),
    }
    return load_written_settings(tmp_path, config)


@pytest.fixture
def zvm() -> FakeZvmClient:
    """jp-ubuntu in one VPG, multi-1 in two, a journal with tags at 100 and 140."""
    fake = FakeZvmClient()
    fake.add("jp-local", "jp-ubuntu")
    fake.add("multi-a", "multi-1")
    fake.add("multi-b", "multi-1")
    now = datetime.now(UTC).timestamp()
    fake.journal = [
        cp(str(100 + i), now - 300 + i, tag="before change" if i in (0, 40) else None)
        for i in range(60)
    ]
    return fake


@pytest.fixture
def live(tmp_path: Path) -> Settings:
    """Settings with live recovery enabled."""
    return make_settings(tmp_path, allow_live=True)


# ---------------------------------------------------------------- lookups


def test_parse_since_accepts_durations_and_iso_times():
    """since takes 90s/30m/2h/1d back from now, or an ISO-8601 time."""
    assert parse_since("30m", NOW).timestamp() == NOW - 1800
    assert parse_since(" 2h ", NOW).timestamp() == NOW - 7200
    assert parse_since("1.5d", NOW).timestamp() == NOW - 129600
    assert parse_since("2027-01-15T08:00:00Z", NOW).timestamp() == NOW
    with pytest.raises(UsageError, match="neither a duration"):
        parse_since("last tuesday", NOW)


def test_select_ref_needs_a_vpg_when_the_vm_is_in_several(zvm):
    """A multi-VPG VM needs vpg=, named or by id; a wrong vpg lists the choices."""
    refs = zvm.refs["multi-1"]
    with pytest.raises(AmbiguousVm, match="'multi-a', 'multi-b'"):
        select_ref(refs, "multi-1", None)
    assert select_ref(refs, "multi-1", "MULTI-B").vpg_name == "multi-b"
    assert select_ref(refs, "multi-1", "id-multi-a").vpg_name == "multi-a"
    with pytest.raises(UsageError, match="its VPGs are 'multi-a', 'multi-b'"):
        select_ref(refs, "multi-1", "other")


def test_find_checkpoint_names_the_nearest_tagged_ones(zvm):
    """An absent checkpoint is an error listing tagged checkpoints nearest to the id asked for."""
    with pytest.raises(UsageError) as caught:
        recovery.find_checkpoint(zvm, "id-jp-local", "jp-local", "175")
    message = str(caught.value)
    assert "checkpoint '175' is not in the journal of VPG 'jp-local'" in message
    assert message.index("140 at") < message.index("100 at")  # nearest first
    assert recovery.find_checkpoint(zvm, "id-jp-local", "jp-local", "140").tag == "before change"


def test_find_checkpoint_searches_the_whole_journal_when_it_reaches_back(zvm):
    """When the journal starts before the recent window, the whole journal is searched."""
    now = datetime.now(UTC).timestamp()
    zvm.journal[:0] = [cp("7", now - 86400 * 3), cp("8", now - 6 * 3600 + 30)]
    assert recovery.find_checkpoint(zvm, "id-jp-local", "jp-local", "7").cp_id == "7"
    assert zvm.calls == [("list_checkpoints", True), ("list_checkpoints", False)]


# ---------------------------------------------------------------- the plan


def test_plan_lists_the_three_ways_and_gates_live_ones(zvm, tmp_path):
    """The plan offers test, failover and restore; live ones are unavailable unless enabled."""
    plan = recovery_plan.recovery_plan(
        zvm, make_settings(tmp_path, allow_live=False), "jp-ubuntu", "140"
    )
    assert plan.confirm == "jp-ubuntu@140"
    assert plan.checkpoint.tag == "before change"
    options = {o.operation: o for o in plan.options}
    assert options["failover_test"].available
    assert not options["live_failover"].available
    assert "allow_live" in (options["journal_vm_restore"].unavailable_reason or "")
    assert options["live_failover"].steps[0].arguments["confirm"] == "jp-ubuntu@140"
    assert zvm.operations() == []  # read-only


def test_plan_for_a_busy_vpg_marks_everything_unavailable(tmp_path, live):
    """A VPG waiting before commit with a running test offers nothing to run now."""
    zvm = FakeZvmClient()
    zvm.add("busy", "vm-1", sub=15, test=True)
    zvm.journal = [cp("1", datetime.now(UTC).timestamp() - 10)]
    plan = recovery_plan.recovery_plan(zvm, live, "vm-1", "1")
    assert [o.available for o in plan.options] == [False, False, False]
    assert "FailingOverBeforeCommit" in (plan.options[1].unavailable_reason or "")


def test_plan_for_a_multi_vpg_vm_names_the_vpg_in_every_step(zvm, live):
    """With vpg= the steps repeat it; without it the plan is refused."""
    with pytest.raises(AmbiguousVm):
        recovery_plan.recovery_plan(zvm, live, "multi-1", "140")
    plan = recovery_plan.recovery_plan(zvm, live, "multi-1", "140", vpg="multi-b")
    assert all(s.arguments["vpg"] == "multi-b" for o in plan.options for s in o.steps)


# ---------------------------------------------------------------- failover test


def test_failover_test_starts_from_the_checkpoint_for_this_vm(zvm):
    """The test targets the VM's VPG, the checkpoint and only this VM; then says how to stop."""
    result = recovery.start_failover_test(zvm, "jp-ubuntu", "140")
    assert zvm.calls[-1] == ("failover_test", "id-jp-local", "140", ["vm-jp-ubuntu"])
    assert (result.task_state, result.next_steps[0].tool) == (
        "COMPLETED",
        "zerto_stop_failover_test",
    )


def test_failed_task_is_an_error_with_the_zvm_reason(zvm):
    """A failed ZVM task raises RecoveryError carrying the CompleteReason."""
    zvm.task_state, zvm.complete_reason = 4, "no test network"
    with pytest.raises(RecoveryError, match="ended FAILED: no test network"):
        recovery.start_failover_test(zvm, "jp-ubuntu", "140")


def test_task_still_running_is_reported_not_failed(zvm):
    """A task still running at the wait's end is returned as running."""
    zvm.task_state = 1
    result = recovery.stop_failover_test(zvm, "jp-ubuntu", False, "bad disk", wait_s=0.1)
    assert result.task_state == "IN_PROGRESS"
    assert "still IN_PROGRESS" in result.summary
    assert zvm.calls[-1] == ("failover_test_stop", "id-jp-local", False, "bad disk")


# ---------------------------------------------------------------- live recovery


def test_live_recovery_is_refused_when_disabled(zvm, tmp_path):
    """With allow_live false every live function refuses before touching the ZVM."""
    settings = make_settings(tmp_path, allow_live=False)
    token = confirm_token("jp-ubuntu", "140")
    attempts = [
        lambda: recovery_live.failover(zvm, settings, "jp-ubuntu", "140", token),
        lambda: recovery_live.finish_failover(zvm, settings, "jp-ubuntu", token, commit=True),
        lambda: recovery_live.finish_failover(zvm, settings, "jp-ubuntu", token, commit=False),
        lambda: recovery_live.restore_vm(zvm, settings, "jp-ubuntu", "140", token),
        lambda: recovery_live.finish_restore(zvm, settings, "jp-ubuntu", token, commit=True),
        lambda: recovery_live.finish_restore(zvm, settings, "jp-ubuntu", token, commit=False),
    ]
    for attempt in attempts:
        with pytest.raises(RecoveryError, match='"allow_live": true'):
            attempt()
    assert zvm.calls == []


@pytest.mark.parametrize(
    "confirm", ["jp-ubuntu", "jp-ubuntu@141", "JP-UBUNTU@140", " jp-ubuntu@140"]
)
def test_live_recovery_needs_the_exact_confirm(zvm, live, confirm):
    """Anything but '<vm>@<checkpoint>' exactly is refused before any ZVM call."""
    with pytest.raises(RecoveryError, match="'jp-ubuntu@140'"):
        recovery_live.failover(zvm, live, "jp-ubuntu", "140", confirm)
    with pytest.raises(RecoveryError, match="Nothing was changed"):
        recovery_live.restore_vm(zvm, live, "jp-ubuntu", "140", confirm)
    assert zvm.calls == []


def test_failover_then_commit_uses_the_recorded_checkpoint(zvm, live):
    """Failover passes the policies; commit wants the checkpoint the failover started from."""
    token = confirm_token("jp-ubuntu", "140")
    result = recovery_live.failover(
        zvm, live, "jp-ubuntu", "140", token, commit_policy="commit", reverse_protection=True,
        shutdown_policy="force_shutdown",
    )  # fmt: skip
    policies = {"commit_policy": 1, "shutdown_policy": 2, "reverse_protection": True}
    assert zvm.calls[-1] == ("failover", "id-jp-local", "140", policies)
    assert [s.arguments["confirm"] for s in result.next_steps] == [token, token]
    with pytest.raises(RecoveryError, match="'jp-ubuntu@140'"):
        recovery_live.finish_failover(
            zvm, live, "jp-ubuntu", "jp-ubuntu@100", commit=True, reverse_protection=True
        )
    recovery_live.finish_failover(
        zvm, live, "jp-ubuntu", token, commit=True, reverse_protection=True
    )
    assert zvm.calls[-1] == ("failover_commit", "id-jp-local", True)
    assert not list((Path(live.state_dir) / "recovery").iterdir())  # record dropped


def test_commit_of_a_failover_started_elsewhere_checks_the_journal(zvm, live):
    """Without a record, the confirm's checkpoint must be in the VPG's journal."""
    with pytest.raises(UsageError, match="checkpoint '999' is not in the journal"):
        recovery_live.finish_failover(zvm, live, "jp-ubuntu", "jp-ubuntu@999", commit=False)
    with pytest.raises(RecoveryError, match="confirm must repeat"):
        recovery_live.finish_failover(zvm, live, "jp-ubuntu", "other-vm@140", commit=False)
    recovery_live.finish_failover(zvm, live, "jp-ubuntu", "jp-ubuntu@140", commit=False)
    assert zvm.operations() == ["failover_rollback"]


def test_restore_then_rollback(zvm, live):
    """A journal restore names the restored VM; its rollback repeats the same confirm."""
    token = confirm_token("jp-ubuntu", "100")
    recovery_live.restore_vm(zvm, live, "jp-ubuntu", "100", token, restored_vm_name="jp-back")
    assert zvm.calls[-1] == ("restore_vm", "vm-jp-ubuntu", "id-jp-local", "100", "jp-back")
    with pytest.raises(RecoveryError):
        recovery_live.finish_restore(zvm, live, "jp-ubuntu", "jp-ubuntu@140", commit=False)
    result = recovery_live.finish_restore(zvm, live, "jp-ubuntu", token, commit=False)
    assert zvm.calls[-1] == ("restore_rollback", "vm-jp-ubuntu", "id-jp-local")
    assert "rolled back" in result.summary


def test_vm_refs_refuses_a_name_zerto_lists_for_two_vms(zvm):
    """The recovery tools act on one VM: two identifiers under one name are refused."""
    from zerto_rewind.recovery.protection import vm_refs

    zvm.refs["web"] = [VmRef("s.vm-42", "web", "id-a", "a"), VmRef("s.vm-43", "web", "id-b", "b")]
    with pytest.raises(AmbiguousVm, match=r"several VMs named 'web' \(s\.vm-42, s\.vm-43\)"):
        vm_refs(zvm, "web")
    zvm.refs["one"] = [VmRef("s.vm-7", "one", "id-a", "a"), VmRef("s.vm-7", "one", "id-b", "b")]
    assert [r.vpg_name for r in vm_refs(zvm, "one")] == ["a", "b"]  # one VM in two VPGs
