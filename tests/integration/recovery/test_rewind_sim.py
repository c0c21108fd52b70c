"""``zerto-rewind rewind`` against the ZVM simulator over TLS: plan, run, refusals, resume, test.

The session's log lines are written with ``write_record`` as the guard writes them,
naming checkpoints the simulator's journal really holds (tagged through its API).
What the simulator did is read back from its own state: the restores it was asked
for (with their checkpoint), its request counters, and its VPGs.
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.config import write_sim_config
from support.sim import sim_fixture, sim_settings
from support.sim_changes import log_change, sim_http, sim_requests
from zerto_rewind.cli import main
from zerto_rewind.core.decision import fmt_time
from zerto_rewind.core.decisions_log import iter_records, write_record
from zerto_rewind.sim import SimServer
from zerto_rewind.sim import recovery as sim_recovery
from zerto_rewind.zvm.client import ZvmClient

# vpg-00001 holds vm-00001 and vm-00002; vpg-00002 holds vm-00003.
sim = sim_fixture(vms=3, vms_per_vpg=2, task_duration_s=0.3)


@pytest.fixture
def zvm(sim: SimServer) -> Iterator[ZvmClient]:
    """A client of the simulator, for the test's own reads and tags."""
    with ZvmClient(sim_settings(sim)) as client:
        yield client


@pytest.fixture
def restores(sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(VM id, checkpoint id) of each restore the simulator was asked to start."""
    asked: list[tuple[str, str]] = []
    real = sim_recovery.restore

    def restore(backend: Any, vm_id: str, body: dict[str, Any]) -> Any:
        asked.append((vm_id, str(body.get("checkpointidentifier"))))
        return real(backend, vm_id, body)

    monkeypatch.setattr(sim_recovery, "restore", restore)
    return asked


def config(sim: SimServer, tmp_path: Path, approvers: list[str]) -> Path:
    """A config for the simulator, its decision log in tmp_path, these approvers."""
    return write_sim_config(
        sim,
        tmp_path,
        log=str(tmp_path / "decisions.jsonl"),
        approvals={"approvers": {"users": approvers}},
    )


def rewind(capsys: pytest.CaptureFixture[str], cfg: Path, *args: str) -> tuple[int, Any, str]:
    """Run ``zerto-rewind rewind ARGS --json``: (exit code, its JSON or None, stderr)."""
    code = main(["rewind", *args, "--json", "--config", str(cfg)])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def test_dry_run_then_run_restores_each_vm(
    sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any, restores: list[Any]
):
    """Dry run: a plan id, nothing changed; run: each VM restored from its point and committed."""
    cfg = config(sim, tmp_path, [getpass.getuser()])
    first = log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    third = log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00003")
    code, plan, _ = rewind(capsys, cfg, "--session", "s1", "--dry-run")
    assert code == 0
    assert [v["vm"] for v in plan["vms"]] == ["vm-00001", "vm-00003"]
    assert plan["vms"][0]["failover_touches"] == ["vm-00002"]
    assert all(v["in_journal"] for v in plan["vms"])
    assert sim_requests(sim).get("POST vms.restore", 0) == 0
    code, report, _ = rewind(capsys, cfg, "--plan", plan["plan_id"])
    assert code == 0, report
    assert [r["state"] for r in report["results"]] == ["done", "done"]
    assert restores == [first, third]
    assert sim_requests(sim)["POST vms.restore_commit"] == 2
    assert all(not v.restores for v in sim.world.vpgs.values())  # nothing left waiting
    steps = [r["step"] for r in iter_records(str(tmp_path / "decisions.jsonl")) if "step" in r]
    assert steps.count("commit") == 2


def test_a_plan_changed_since_the_dry_run_is_refused(
    sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any
):
    """Another session changes the VM after the dry run: refused, the change named, nothing run."""
    cfg = config(sim, tmp_path, [getpass.getuser()])
    log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    _, plan, _ = rewind(capsys, cfg, "--session", "s1", "--dry-run")
    log_change(tmp_path / "decisions.jsonl", zvm, "s2", "vm-00001")
    code, _, err = rewind(capsys, cfg, "--plan", plan["plan_id"])
    assert code == 1
    assert "refused: since the dry run, vm-00001: log" in err
    assert "Nothing was changed" in err
    assert sim_requests(sim).get("POST vms.restore", 0) == 0


@pytest.mark.parametrize("kind", ["status", "drop"])
def test_a_fault_partway_then_resume(
    sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any, restores: list[Any], kind: str
):
    """The second VM's commit fails (a 503, a dropped connection): it is rolled back, the
    first stays restored; --resume finishes the second."""
    cfg = config(sim, tmp_path, [getpass.getuser()])
    log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    third, _ = log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00003")
    _, plan, _ = rewind(capsys, cfg, "--session", "s1", "--dry-run")
    fault = {"route": f"POST /v1/vms/{third}/RestoreCommit", "kind": kind, "status": 503}
    with sim_http(sim) as http:
        http.post(f"{sim.url}/_sim/faults", json=fault).raise_for_status()
    code, report, _ = rewind(capsys, cfg, "--plan", plan["plan_id"])
    assert code == 1
    states = {r["vm"]: (r["state"], r["vm_state"]) for r in report["results"]}
    assert states == {"vm-00001": ("done", "restored"), "vm-00003": ("failed", "untouched")}
    assert sim_requests(sim)["POST vms.restore_rollback"] == 1
    assert all(not v.restores for v in sim.world.vpgs.values())
    with sim_http(sim) as http:
        http.delete(f"{sim.url}/_sim/faults").raise_for_status()
    code, report, _ = rewind(capsys, cfg, "--resume", plan["plan_id"])
    assert code == 0, report
    assert [r[0] for r in restores] == [restores[0][0], third, third]  # vm-00001 not again
    assert sim_requests(sim)["POST vms.restore_commit"] == 3  # one refused by the fault


def test_a_non_approver_is_refused(sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any):
    """Someone not listed as an approver (here: the agent's user) cannot run a rewind."""
    me = getpass.getuser()
    cfg = write_sim_config(
        sim,
        tmp_path,
        log=str(tmp_path / "decisions.jsonl"),
        approvals={"approvers": {"users": ["olivia"]}, "agent_users": [me]},
    )
    log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    code, _, err = rewind(capsys, cfg, "--session", "s1")
    assert code == 1
    assert "agents cannot approve" in err
    assert "never by an agent" in err
    assert sim_requests(sim).get("POST vms.restore", 0) == 0


def test_test_mode_starts_failover_tests(
    sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any
):
    """--test: a failover test of each VPG from the same checkpoint; no restore."""
    cfg = config(sim, tmp_path, [getpass.getuser()])
    vm_id, checkpoint = log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    _, plan, _ = rewind(capsys, cfg, "--session", "s1", "--dry-run")
    code, report, _ = rewind(capsys, cfg, "--plan", plan["plan_id"], "--test")
    assert code == 0, report
    assert report["results"][0]["vm_state"] == "test running"
    test = sim.world.vpgs_by_name["vpg-00001"].test
    assert test is not None
    assert (test.checkpoint_id, test.vm_ids) == (checkpoint, (vm_id,))
    assert sim_requests(sim).get("POST vms.restore", 0) == 0


@pytest.fixture
def anyio_backend() -> str:
    """Run the async test on asyncio."""
    return "asyncio"


@pytest.mark.anyio
async def test_the_mcp_tool_proposes_a_plan_and_runs_nothing(
    sim: SimServer, zvm: ZvmClient, tmp_path: Path
):
    """zerto_rewind_plan: the same plan, read-only; nothing saved, nothing restored."""
    from mcp import Client

    from integration.mcp_server.mcp_helpers import call
    from zerto_rewind.mcp_server.server import build_server

    cfg = config(sim, tmp_path, [getpass.getuser()])
    _, checkpoint = log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    server = build_server({"HOME": str(tmp_path)}, config=str(cfg))
    async with Client(server, raise_exceptions=True) as client:
        plan = await call(client, "zerto_rewind_plan", session="s1")
    assert plan["vms"][0]["checkpoint_id"] == checkpoint
    assert not (tmp_path / "state" / "rewind").exists()
    assert sim_requests(sim).get("POST vms.restore", 0) == 0


def test_failover_needs_the_vpg_typed(sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any):
    """--failover: skipped unless the VPG's name is typed; with it, the whole VPG moves."""
    cfg = config(sim, tmp_path, [getpass.getuser()])
    log_change(tmp_path / "decisions.jsonl", zvm, "s1", "vm-00001")
    _, plan, _ = rewind(capsys, cfg, "--session", "s1", "--dry-run")
    vpg = sim.world.vpgs_by_name["vpg-00001"]
    protected = vpg.protected.name
    code, report, _ = rewind(capsys, cfg, "--plan", plan["plan_id"], "--failover")
    assert code == 1
    assert "not confirmed" in report["results"][0]["why"]
    assert sim_requests(sim).get("POST vpgs.failover", 0) == 0
    code, _, err = rewind(capsys, cfg, "--plan", plan["plan_id"], "--failover")
    assert code == 1
    assert "was already run (failover)" in err  # a second --plan would run it twice
    code, report, _ = rewind(
        capsys, cfg, "--resume", plan["plan_id"], "--failover", "--confirm", "vpg-00001"
    )
    assert code == 0, report
    assert "also moved vm-00002" in report["results"][0]["why"]
    assert vpg.protected.name != protected  # committed with reverse protection
    assert sim_requests(sim)["POST vpgs.failover_commit"] == 1


def test_the_text_plan(sim: SimServer, zvm: ZvmClient, tmp_path: Path, capsys: Any):
    """The dry run as text: the id, the rewind point, the VPG's other VM, what cannot be rewound."""
    cfg = config(sim, tmp_path, [getpass.getuser()])
    log = tmp_path / "decisions.jsonl"
    _, checkpoint = log_change(log, zvm, "s1", "vm-00001")
    write_record(
        str(log),
        {"time": fmt_time(time.time()), "session_id": "s1", "tool": "run_script",
         "decision": "prompt", "answer": "approved", "approver": "unix:olivia", "vms": []},
    )  # fmt: skip
    assert main(["rewind", "--session", "s1", "--dry-run", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert f"rewind point: checkpoint {checkpoint} tagged 'zr s1 vm-00001'" in out
    assert "a --failover of the VPG would also move: vm-00002" in out
    assert "cannot be rewound:" in out
    assert "run_script on no VM: the call names no VM" in out
    plan_id = out.split()[2]
    assert f"Nothing was changed. Run it: zerto-rewind rewind --plan {plan_id}" in out
    assert (tmp_path / "state" / "rewind" / f"plan-{plan_id}.json").stat().st_mode & 0o077 == 0
