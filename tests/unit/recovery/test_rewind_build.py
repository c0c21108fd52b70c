"""rewind_build and rewind_run against a scripted ZVM: journal facts, refusals, rollbacks."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest

from support.config import load_written_settings
from support.fakes import FakeZvmClient, cp
from zerto_rewind.config import Settings
from zerto_rewind.core.decision import fmt_time
from zerto_rewind.core.decisions_log import iter_records, write_record
from zerto_rewind.errors import RecoveryError, ZvmConnectionError
from zerto_rewind.recovery.rewind_build import build_plan
from zerto_rewind.recovery.rewind_plan import Scope
from zerto_rewind.recovery.rewind_run import approver_refusal, run_plan
from zerto_rewind.zvm.models import VmRef

NOW = 1_800_000_000.0


class RewindZvm(FakeZvmClient):
    """The fake ZVM with the VPG member listing and restores as the rewind calls them."""

    def __init__(self) -> None:
        super().__init__(now=NOW)
        self.fail_commit = False

    def vpg_vms(self, vpg_name: str, *, deadline: Any = None) -> list[VmRef]:
        return [r for refs in self.refs.values() for r in refs if r.vpg_name == vpg_name]

    def restore_vm(self, vm_id: str, vpg_id: str, checkpoint_id: str, **kwargs: Any) -> str:
        return self._task("restore_vm", vm_id, vpg_id, checkpoint_id)

    def restore_commit(self, vm_id: str, vpg_id: str, *, deadline: Any = None) -> str:
        self._task("restore_commit", vm_id, vpg_id)
        return "failed-commit" if self.fail_commit else f"task-{len(self.calls)}"


@pytest.fixture
def zvm() -> RewindZvm:
    """web-01 and app-01 in vpg-web, whose journal has the guard's 100 and an outside tag 150."""
    fake = RewindZvm()
    fake.add("vpg-web", ["web-01", "app-01"])
    fake.journal = [cp(str(i), NOW - 600 + i) for i in range(90, 200)]
    fake.journal[10] = cp("100", NOW - 500, tag="zr before vm_reconfigure")
    fake.journal[60] = cp("150", NOW - 450, tag="by hand in the Zerto UI")
    return fake


def settings_for(tmp_path: Path, approvers: list[str]) -> Settings:
    """A config whose approvers are ``approvers`` (unix user names)."""
    config = {
        "zvm": {"url": "https://zvm.test", "username": "u", "password": "p"},
        "state_dir": str(tmp_path / "state"),
        "log": str(tmp_path / "decisions.jsonl"),
        "approvals": {"approvers": {"users": approvers}},
    }
    return load_written_settings(tmp_path, config)


def log_change(settings: Settings, session: str, vm: str, checkpoint: str | None) -> None:
    """One allowed change to ``vm`` in vpg-web, with the checkpoint the guard recorded."""
    write_record(
        settings.log_path,
        {
            "time": fmt_time(NOW - 400),
            "session_id": session,
            "tool": "vm_reconfigure",
            "row": "mutating",
            "decision": "context" if checkpoint else "prompt",
            "vms": [vm],
            "vpgs": ["vpg-web"],
            "vpg_ids": ["id-vpg-web"],
            "checkpoint_ids": [checkpoint] if checkpoint else [],
        },
    )


def test_plan_reads_the_journal(tmp_path: Path, zvm: RewindZvm):
    """The plan names the checkpoint in the journal, an outside tag after it, the other VMs."""
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    plan = build_plan(zvm, settings, Scope(session_id="s1"))
    (web,) = plan.vms
    assert (web.checkpoint_id, web.in_journal, web.vm_id) == ("100", True, "vm-web-01")
    assert web.failover_touches == ["app-01"]
    assert web.later_checkpoints[0].startswith("150 tagged 'by hand in the Zerto UI'")
    assert web.blocked is None
    assert build_plan(zvm, settings, Scope(session_id="s1")).plan_id == plan.plan_id


def test_plan_blocks_a_checkpoint_gone_from_the_journal(tmp_path: Path, zvm: RewindZvm):
    """A re-synced journal no longer holds the rewind point: the VM cannot run, and says why."""
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    before = build_plan(zvm, settings, Scope(session_id="s1"))
    zvm.journal = [c for c in zvm.journal if c.cp_id != "100"]
    after = build_plan(zvm, settings, Scope(session_id="s1"))
    assert after.vms[0].in_journal is False
    assert "no longer in the journal" in str(after.vms[0].blocked)
    assert after.plan_id != before.plan_id


def test_run_refuses_a_plan_that_moved(tmp_path: Path, zvm: RewindZvm):
    """A change logged after the dry run: refused, naming it, nothing sent to the ZVM."""
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    plan = build_plan(zvm, settings, Scope(session_id="s1"))
    log_change(settings, "s2", "web-01", "160")
    with pytest.raises(RecoveryError, match="web-01: log"):
        run_plan(zvm, settings, plan, approver="unix:olivia")
    assert zvm.operations() == []
    refused = [r for r in iter_records(settings.log_path) if r.get("step") == "refused"]
    assert refused[0]["event_type"] == "rewind.step"


def test_run_restores_then_commits(tmp_path: Path, zvm: RewindZvm):
    """Per VM: restore from the rewind point, then commit; each step is a log event."""
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    plan = build_plan(zvm, settings, Scope(session_id="s1"))
    report = run_plan(zvm, settings, plan, approver="unix:olivia")
    assert report.ok
    assert zvm.calls[-2:] == [
        ("restore_vm", "vm-web-01", "id-vpg-web", "100"),
        ("restore_commit", "vm-web-01", "id-vpg-web"),
    ]
    steps = [r["step"] for r in iter_records(settings.log_path) if r.get("origin") == "rewind"]
    assert steps == ["start", "restore", "commit", "result", "end"]


def test_a_failed_commit_is_rolled_back(tmp_path: Path, zvm: RewindZvm):
    """The commit's task fails: the restore is rolled back and the VM reported untouched."""
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    zvm.fail_commit = True
    plan = build_plan(zvm, settings, Scope(session_id="s1"))
    report = run_plan(zvm, settings, plan, approver="unix:olivia")
    (result,) = report.results
    assert (result.state, result.vm_state) == ("failed", "untouched")
    assert "VRA on esx07 did not answer" in result.why
    assert zvm.operations()[-1] == "restore_rollback"


def test_only_an_approver_may_run(tmp_path: Path):
    """Not listed as an approver, or a name an agent's token also has: refused."""
    me = getpass.getuser()
    assert approver_refusal(settings_for(tmp_path, [me])) is None
    refused = approver_refusal(settings_for(tmp_path, ["someone-else"]))
    assert refused is not None
    assert "not an approver" in refused
    config = {
        "zvm": {"url": "https://zvm.test", "username": "u", "password": "p"},
        "state_dir": str(tmp_path / "state"),
        "approvals": {"approvers": {"users": [me]}},
        "gateway": {"clients": {f"unix:{me}": "0" * 64}},
    }
    token = approver_refusal(load_written_settings(tmp_path, config, name="agent.json"))
    assert token is not None
    assert "agents cannot approve" in token


class InterruptedZvm(RewindZvm):
    """Ctrl-C arrives while the commit's task is followed."""

    def get_task(self, task_id: str, *, deadline: Any = None) -> Any:
        if self.calls and self.calls[-1][0] == "restore_commit":
            self.calls.append(("ctrl-c",))
            raise KeyboardInterrupt
        return super().get_task(task_id, deadline=deadline)


def test_ctrl_c_rolls_the_vm_back_and_stops(tmp_path: Path):
    """Ctrl-C during the first VM: its restore is rolled back, the second is not started."""
    zvm = InterruptedZvm()
    zvm.add("vpg-web", ["web-01", "app-01"])
    zvm.journal = [cp("100", NOW - 500, tag="zr"), cp("101", NOW - 400, tag="zr 2")]
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    log_change(settings, "s1", "app-01", "101")
    plan = build_plan(zvm, settings, Scope(session_id="s1"))
    report = run_plan(zvm, settings, plan, approver="unix:olivia")
    assert report.interrupted
    states = {r.vm: (r.state, r.vm_state) for r in report.results}
    assert states == {"web-01": ("failed", "untouched"), "app-01": ("skipped", "untouched")}
    assert zvm.operations() == ["restore_vm", "restore_commit", "ctrl-c", "restore_rollback"]


class DarkAfterCommit(RewindZvm):
    """The ZVM stops answering once the first VM's restore is committed."""

    def find_vms(self, name: str, *, deadline: Any = None) -> list[VmRef]:
        if "restore_commit" in self.operations():
            raise ZvmConnectionError(f"GET https://zvm.test/v1/vms: connection refused ({name})")
        return super().find_vms(name, deadline=deadline)


def test_a_zvm_gone_between_vms_leaves_the_rest_untouched(tmp_path: Path):
    """The second VM cannot even be looked up: nothing is sent for it; --resume may carry on."""
    zvm = DarkAfterCommit()
    zvm.add("vpg-web", ["web-01", "app-01"])
    zvm.journal = [cp("100", NOW - 500, tag="zr"), cp("101", NOW - 400, tag="zr 2")]
    settings = settings_for(tmp_path, [getpass.getuser()])
    log_change(settings, "s1", "web-01", "100")
    log_change(settings, "s1", "app-01", "101")
    plan = build_plan(zvm, settings, Scope(session_id="s1"))
    report = run_plan(zvm, settings, plan, approver="unix:olivia")
    states = {r.vm: (r.state, r.vm_state) for r in report.results}
    assert states == {"web-01": ("done", "restored"), "app-01": ("failed", "untouched")}
    assert "nothing was sent" in report.results[1].why
    assert zvm.operations() == ["restore_vm", "restore_commit"]
    steps = [r["step"] for r in iter_records(settings.log_path) if r.get("origin") == "rewind"]
    assert steps[-2:] == ["result", "end"]
