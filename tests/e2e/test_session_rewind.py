"""An agent session's changes to three real VMs, put back by a person with ``zerto-rewind rewind``.

The real Claude Code CLI (a scripted model on loopback) has one VM server: ``zerto-rewind
gateway`` over stdio (Claude Code starts it), in front of the real mcvsphere against
govmomi's vCenter simulator (``gateway_e2e.GatewayRig``). The ZVM simulator is linked to
the same vcsim (``--vcenter``): its protected VMs are vcsim's, their state is kept at each
checkpoint, and a journal restore's commit puts the vcsim VM back to the state of the
restored checkpoint (the simulator's stand-in for Zerto's replica, docs/simulator.md).

- Session 1 (one ``claude -p`` run) reconfigures ``RECONF`` (CPUs, memory), powers ``OFF``
  off and removes ``DISK``'s disk (mcvsphere's ``remove_disk``, its file deleted), each
  call allowed on a tagged checkpoint, and each forwarded call's result line says it
  succeeded.
- Session 2 (a second run) later reconfigures ``RECONF`` again.
- The approver's dry run names session 2's change before anything runs; the agent's unix
  user running the saved plan is refused and nothing changes; the approver's run brings all
  three VMs back, read from vcsim with pyVmomi.

The approver and the agent are real users (``useradd``), both in a group that may read and
write the guard's files, so the agent's refusal is the identity rule's, not the file
system's. The CLI runs as each in a private mount namespace (``support.users``).
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.fake_anthropic import call
from e2e.gateway_e2e import PYTHON, GatewayRig, tool
from e2e.harness import E2ESession
from support.realvm import change_vm, vm_states
from support.users import namespace_command

RECONF, OFF, DISK = "DC0_H0_VM0", "DC0_H0_VM1", "DC0_H1_VM0"
DISK_LABEL = "disk-202-0"  # vcsim's label for its VMs' one disk (mcvsphere's list_disks)
SHARED_VPG, DISK_VPG = "rewind-vpg", "rewind-disk-vpg"
ESTATE: dict[str, Any] = {
    "local_site": {"name": "zvm-local", "kind": "vcenter"},
    "vpgs": [
        {"name": SHARED_VPG, "site_kind": "vcenter", "vms": [RECONF, OFF]},
        {"name": DISK_VPG, "site_kind": "vcenter", "vms": [DISK]},
    ],
}
RECONFIGURE, POWER_OFF, REMOVE_DISK = (
    tool("reconfigure_vm"),
    tool("power_off"),
    tool("remove_disk"),
)
MUTATING = (RECONFIGURE, POWER_OFF, REMOVE_DISK)


@dataclass(frozen=True)
class Person:
    name: str
    uid: int


@dataclass(frozen=True)
class People:
    approver: Person
    agent: Person
    gid: int  # the group that may read and write the guard's files
    stage: Path  # root's, 0755: the namespace's mount points


@contextlib.contextmanager
def _people(base: Path) -> Iterator[People]:
    suffix = secrets.token_hex(3)
    group, approver, agent = f"zrops{suffix}", f"zrappr{suffix}", f"zragent{suffix}"
    subprocess.run(["groupadd", group], check=True, capture_output=True)
    made: list[str] = []
    try:
        for name in (approver, agent):
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                 "--gid", group, name],
                check=True, capture_output=True,
            )  # fmt: skip
            made.append(name)
        stage = base / "stage"
        stage.mkdir(mode=0o755)
        yield People(
            Person(approver, pwd.getpwnam(approver).pw_uid),
            Person(agent, pwd.getpwnam(agent).pw_uid),
            grp.getgrnam(group).gr_gid,
            stage,
        )
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False, capture_output=True)
        subprocess.run(["groupdel", group], check=False, capture_output=True)


@dataclass
class World:
    rig: GatewayRig
    people: People

    def share_guard_files(self) -> None:
        """The guard's files (config, secret, state, log) readable and writable by the group."""
        root = self.rig.root
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                if os.path.islink(name):
                    continue
                os.chown(name, -1, self.people.gid)
                mode = os.stat(name).st_mode & 0o7777
                extra = 0o2070 if os.path.isdir(name) else 0o060
                os.chmod(name, mode | extra)

    def config_of(self, who: Person) -> Path:
        """The guard's config as this person's own 0600 copy, without the upstreams section
        (mcvsphere's vCenter login: a rewind speaks to the ZVM only)."""
        config = json.loads(Path(self.rig.box.config_path).read_text(encoding="utf-8"))
        config.pop("upstreams", None)
        ca = self.people.stage.parent / "zvm-ca.pem"  # the simulator's own sits in a 0700 dir
        shutil.copyfile(config["zvm"]["ca_bundle"], ca)
        ca.chmod(0o644)
        config["zvm"]["ca_bundle"] = str(ca)
        path = self.people.stage.parent / f"config-{who.name}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        path.chmod(0o600)
        os.chown(path, who.uid, self.people.gid)
        return path

    def rewind_as(self, who: Person, *args: str) -> subprocess.CompletedProcess[str]:
        self.share_guard_files()
        argv = [PYTHON, "-m", "zerto_rewind", "rewind", *args]
        command = namespace_command(who.uid, self.people.gid, argv, stage=self.people.stage)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/",
            "USER": who.name,
            "ZERTO_REWIND_CONFIG": str(self.config_of(who)),
            "PYTHONDONTWRITEBYTECODE": "1",
            "COLUMNS": "200",
        }
        return subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=300, check=False,
            cwd="/", stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def three(self) -> dict[str, Any]:
        vms = vm_states(self.rig.vcenter)["vms"]
        return {name: vms[name] for name in (RECONF, OFF, DISK)}


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    assert os.geteuid() == 0, "this test creates users with useradd: run it as root"
    base = Path(tempfile.mkdtemp(prefix="zr-rewind-e2e-"))
    base.chmod(0o755)
    try:
        with (
            _people(base) as people,
            GatewayRig.running(
                base / "guard", http=False, estate=lambda _vc: ESTATE, link_vcenter=True
            ) as rig,
        ):
            approvals = {
                "approvers": {"users": [people.approver.name]},
                "agent_users": [people.agent.name],
            }
            rig.write_config(approvals=approvals)
            yield World(rig, people)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Change:
    """One logged change: its session and the checkpoint the guard took before it."""

    session: str
    checkpoint: str


def _change(rig: GatewayRig, name: str, vm: str) -> Change:
    """The last decision line of ``name`` on ``vm``: allowed on a landed checkpoint, and
    the gateway's result line for that call says it succeeded."""
    lines = [r for r in rig.log() if r.get("tool") == name and r.get("vms") == [vm]]
    assert lines, f"no decision logged for {name} on {vm}"
    line = lines[-1]
    assert (line["row"], line["decision"]) == ("confirmed", "context"), line
    joined = ("session_id", "tool_use_id")
    outcomes = [r["result"] for r in rig.results() if all(r[k] == line[k] for k in joined)]
    assert outcomes == ["succeeded"], (name, vm, outcomes, rig.results())
    [checkpoint] = line["checkpoint_ids"]
    return Change(str(line["session_id"]), str(checkpoint))


def _run(e2e: E2ESession, turns: list[Any]) -> None:
    """One Claude Code run (one agent session) of ``turns``; every call ran without error."""
    e2e.script(turns)
    run = e2e.run(permission_mode="bypassPermissions", timeout=180)
    assert run.ok, run.describe()
    assert run.permission_denials == []
    errors = [r.text for r in e2e.api.tool_results() if r.is_error]
    assert errors == [], errors


def _first_session(world: World, e2e: E2ESession) -> dict[str, Change]:
    """Three changes, one per turn, each on a checkpoint of its own; the changes by VM."""
    _run(
        e2e,
        [
            [call(RECONFIGURE, name=RECONF, cpu=4, memory_mb=2048)],
            [call(POWER_OFF, name=OFF)],
            # Claude Code loads this deferred tool's schema before it lets the model call it.
            [call("ToolSearch", query=f"select:{REMOVE_DISK}")],
            [call(REMOVE_DISK, vm_name=DISK, disk_label=DISK_LABEL, delete_file=True)],
            "changed three VMs",
        ],
    )
    changed = world.three()
    assert (changed[RECONF]["num_cpu"], changed[RECONF]["memory_mb"]) == (4, 2048)
    assert changed[OFF]["power_state"] == "poweredOff"
    assert changed[DISK]["disks"] == []
    changes = {
        RECONF: _change(world.rig, RECONFIGURE, RECONF),
        OFF: _change(world.rig, POWER_OFF, OFF),
        DISK: _change(world.rig, REMOVE_DISK, DISK),
    }
    assert len({c.session for c in changes.values()}) == 1, changes
    # Each checkpoint is a real tagged checkpoint in its VPG's journal (the ZVM's API).
    journal = {**world.rig.tagged_checkpoints(SHARED_VPG), **world.rig.tagged_checkpoints(DISK_VPG)}
    assert all(c.checkpoint in journal for c in changes.values()), (changes, journal)
    return changes


def _second_session(world: World, e2e: E2ESession, first: str) -> str:
    """A later change to RECONF by another session; that session's id."""
    _run(e2e, [[call(RECONFIGURE, name=RECONF, cpu=2, annotation="second session")], "ok"])
    other = _change(world.rig, RECONFIGURE, RECONF).session
    assert other != first
    now = world.three()[RECONF]
    assert (now["num_cpu"], now["annotation"]) == (2, "second session")
    return other


def _dry_run(world: World, changes: dict[str, Change], other: str) -> str:
    """The approver's dry run names the other session's change; nothing runs. The plan id."""
    session = changes[RECONF].session
    before = world.three()
    text = world.rewind_as(world.people.approver, "--session", session, "--dry-run")
    assert text.returncode == 0, text.stderr
    undone = [ln.strip() for ln in text.stdout.splitlines() if "also undoes: " in ln]
    named = [ln.endswith(f"{RECONFIGURE} by session {other}") for ln in undone]
    assert named == [True], text.stdout
    dry = world.rewind_as(world.people.approver, "--session", session, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    by_vm = {v["vm"]: v for v in plan["vms"]}
    assert {vm: v["checkpoint_id"] for vm, v in by_vm.items()} == {
        vm: c.checkpoint for vm, c in changes.items()
    }
    assert all(v["in_journal"] and not v["blocked"] for v in by_vm.values()), by_vm
    undoes = by_vm[RECONF]["also_undoes"]
    assert [(c["session_id"], c["tool"]) for c in undoes] == [(other, RECONFIGURE)]
    assert by_vm[OFF]["also_undoes"] == by_vm[DISK]["also_undoes"] == []
    assert by_vm[RECONF]["failover_touches"] == [OFF]  # a VPG failover would move OFF too
    assert world.three() == before
    assert _rewind_steps(world) == []
    return str(plan["plan_id"])


def _rewind_steps(world: World) -> list[dict[str, Any]]:
    return [r for r in world.rig.log() if r.get("event_type") == "rewind.step"]


def test_a_person_rewinds_an_agent_session_on_real_vms(
    world: World, e2e: E2ESession, tmp_path: Path
) -> None:
    rig = world.rig
    e2e.mcp_config = rig.mcp_config(tmp_path / "gateway-mcp.json", "stdio")
    # vcsim ignores an empty annotation in a reconfigure, so the VM starts with one of its own
    # (a restore back to "" would leave the second session's text: a vcsim limit).
    change_vm(rig.vcenter, RECONF, {"annotation": "web tier"})
    before = world.three()
    assert [before[vm]["power_state"] for vm in (RECONF, OFF, DISK)] == ["poweredOn"] * 3
    assert before[DISK]["disks"] != []
    changes = _first_session(world, e2e)
    other = _second_session(world, e2e, changes[RECONF].session)
    plan_id = _dry_run(world, changes, other)
    changed = world.three()

    # The agent's unix user running the same plan is refused; nothing changes.
    refused = world.rewind_as(world.people.agent, "--plan", plan_id)
    assert refused.returncode != 0
    assert "agent's identity" in refused.stderr, refused.stderr
    assert "Nothing was changed" in refused.stderr
    assert world.three() == changed
    assert _rewind_steps(world) == []

    # The approver runs the plan: all three VMs are back, as vcsim shows them.
    done = world.rewind_as(world.people.approver, "--plan", plan_id, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert {r["vm"]: (r["state"], r["vm_state"]) for r in report["results"]} == {
        vm: ("done", "restored") for vm in (RECONF, OFF, DISK)
    }
    back = world.three()
    for vm in (RECONF, OFF, DISK):
        moved = {k: (back[vm][k], v) for k, v in before[vm].items() if back[vm][k] != v}
        assert moved == {}, (vm, moved)
    assert back[DISK]["disks"] != []
    steps = _rewind_steps(world)
    assert {r["principal_id"] for r in steps} == {f"unix:{world.people.approver.name}"}
    assert {r["step"] for r in steps} >= {"start", "restore", "commit", "end"}
