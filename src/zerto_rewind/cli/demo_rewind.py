"""The demo's last act: one agent session changes three protected VMs, and a person rewinds it.

The simulator is linked to an in-memory vCenter (:class:`~zerto_rewind.sim.vcenter_memory.
MemoryVcenter`, the embedded stand-in for ``sim --vcenter``): it keeps the VMs' state at each
checkpoint, and a journal restore's commit puts a VM back to the state of its checkpoint.
One session (one ``session_id`` in the hook's payloads) reconfigures ``shop-web-01``,
powers ``shop-app-01`` off and removes a disk of ``shop-db-01``; each call gets its
checkpoint from the hook, and the demo then changes the VM as the VM server's tool would.
Then, as a person types them: ``zerto-rewind session show`` (the timeline), ``rewind
--session ID --dry-run`` (the plan) and ``rewind --plan ID`` (the demo's user is an
approver in the sandbox's config). Each VM's state before the change, after it and after
the rewind is shown; the act fails when a VM is not back.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..sim.vcenter_memory import MemoryVcenter
from ..sim.vmstate import POWERED_OFF, POWERED_ON, DiskState, NicState, VmState
from ..testing import Sandbox

__all__ = ["REWIND_TOOLS", "REWIND_VPGS", "SESSION", "approvals", "memory_vcenter", "play"]

SESSION = "demo-agent-session-0042"
WEB, APP, DB = "shop-web-01", "shop-app-01", "shop-db-01"
# Two VPGs protected from hq: a failover of the first would move both its VMs.
REWIND_VPGS: list[dict[str, Any]] = [
    {"name": "hq-shop-dr", "site_kind": "vcenter", "protected_site": "hq",
     "recovery_site": "dr", "vms": [WEB, APP]},
    {"name": "hq-shop-db-dr", "site_kind": "vcenter", "protected_site": "hq",
     "recovery_site": "dr", "vms": [DB]},
]  # fmt: skip
# mcvsphere's tools, under its names and argument names.
POWER_OFF = "mcp__vsphere__power_off"
RECONFIGURE = "mcp__vsphere__reconfigure_vm"
REMOVE_DISK = "mcp__vsphere__remove_disk"
REWIND_TOOLS: dict[str, Any] = {RECONFIGURE: {"vm_arg": "name"}, REMOVE_DISK: {"vm_arg": "vm_name"}}
CLI_TIMEOUT_S = 120.0


def _vm(name: str, cpu: int, memory_mb: int, annotation: str, disks: int) -> VmState:
    return VmState(
        POWERED_ON,
        cpu,
        memory_mb,
        annotation,
        tuple(
            DiskState(f"Hard disk {i + 1}", f"[ds-hq] {name}/{name}_{i}.vmdk", 40 << 20, 1000, i)
            for i in range(disks)
        ),
        (NicState("Network adapter 1", f"00:50:56:9a:00:{len(name):02x}", "shop-net"),),
    )


def memory_vcenter() -> MemoryVcenter:
    """hq's vCenter, in memory, with the three VMs the session changes."""
    return MemoryVcenter(
        {
            WEB: _vm(WEB, 2, 4096, "shop front end", 1),
            APP: _vm(APP, 4, 8192, "shop orders", 1),
            DB: _vm(DB, 4, 16384, "shop database", 2),
        }
    )


def approvals() -> dict[str, Any]:
    """The sandbox's approvals: the demo's own user is the approver who runs the rewind
    (by its effective uid, as the rewind checks it, not ``$USER``)."""
    return {"approvers": {"users": [pwd.getpwuid(os.geteuid()).pw_name]}}


@dataclass(frozen=True)
class Change:
    """One call of the session, and what the VM server's tool does to the VM."""

    what: str
    tool: str
    tool_input: dict[str, Any]
    vm: str
    effect: Callable[[VmState], VmState]


CHANGES = (
    Change("reconfigure to 8 CPUs, 16 GB", RECONFIGURE,
           {"name": WEB, "cpu": 8, "memory_mb": 16384}, WEB,
           lambda s: replace(s, num_cpu=8, memory_mb=16384)),
    Change("power off", POWER_OFF, {"name": APP}, APP,
           lambda s: replace(s, power_state=POWERED_OFF)),
    Change("remove Hard disk 2, its file deleted", REMOVE_DISK,
           {"vm_name": DB, "disk_label": "Hard disk 2", "delete_file": True}, DB,
           lambda s: replace(s, disks=s.disks[:1])),
)  # fmt: skip


def play(console: Console, box: Sandbox, vcenter: MemoryVcenter) -> bool:
    """The act; True when every VM the session changed is back as it was."""
    console.rule("[bold]rewind an agent session[/bold]")
    before = {c.vm: vcenter.state(c.vm) for c in CHANGES}
    if not _agent_session(console, box, vcenter):
        return False
    after = {c.vm: vcenter.state(c.vm) for c in CHANGES}
    ran = _cli(console, box, "session", "show", SESSION) is not None
    plan = _cli(console, box, "rewind", "--session", SESSION, "--dry-run")
    found = re.search(r"Rewind plan ([0-9a-f]{16})", plan or "")
    if not (ran and found):
        console.print("[red]no timeline or no rewind plan: nothing was rewound[/red]")
        return False
    rewound = _cli(console, box, "rewind", "--plan", found.group(1)) is not None
    back = {c.vm: vcenter.state(c.vm) for c in CHANGES}
    _print_states(console, before, after, back)
    missing = [vm for vm in before if back[vm] != before[vm]]
    if rewound and not missing:
        console.print("[green]every VM the session changed is back as it was[/green]")
        return True
    console.print(f"[red]not back: {', '.join(missing) or 'the rewind failed'}[/red]")
    return False


def _agent_session(console: Console, box: Sandbox, vcenter: MemoryVcenter) -> bool:
    """The session's three calls through the hook; each allowed call changes its VM."""
    console.print(f"agent session [bold]{SESSION}[/bold] changes three protected VMs:")
    for i, change in enumerate(CHANGES, start=1):
        run = box.run_hook(
            change.tool, change.tool_input, session_id=SESSION, tool_use_id=f"toolu_rewind_{i}"
        )
        ok = run.decision == "context"
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        console.print(f"{mark} {change.vm}: {change.what}: {run.decision} in {run.elapsed_s:.1f} s")
        if not ok:
            console.print(f"    [red]expected a checkpoint first[/red] [dim]{run.reason}[/dim]")
            return False
        # The hook only decides; here the VM server's tool makes the change.
        vcenter.put(change.vm, change.effect(vcenter.state(change.vm)))
    return True


def _cli(console: Console, box: Sandbox, *args: str) -> str | None:
    """``zerto-rewind ARGS`` as the approver types it; its output, or None when it failed."""
    console.print(f"\n[bold]$ zerto-rewind {' '.join(args)}[/bold]")
    proc = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", *args],
        env=box.env(COLUMNS=str(console.width)),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    console.print(Text(proc.stdout.rstrip()), soft_wrap=True)
    if proc.returncode != 0:
        console.print(Text(proc.stderr.rstrip(), style="red"), soft_wrap=True)
        return None
    return proc.stdout


def describe(state: VmState) -> str:
    """A VM's state in one short line."""
    power = {POWERED_ON: "on", POWERED_OFF: "off"}.get(state.power_state, state.power_state)
    disks = f"{len(state.disks)} disk" + ("s" if len(state.disks) != 1 else "")
    return f"{power}, {state.num_cpu} CPU, {state.memory_mb // 1024} GB, {disks}"


def _print_states(
    console: Console,
    before: dict[str, VmState],
    after: dict[str, VmState],
    back: dict[str, VmState],
) -> None:
    table = Table(title="the VMs, as the in-memory vCenter shows them", box=box.SIMPLE_HEAD)
    for column in ("VM", "before the session", "after its change", "after the rewind", "back"):
        table.add_column(column, no_wrap=True)
    for vm, state in before.items():
        same = back[vm] == state
        table.add_row(
            vm,
            describe(state),
            describe(after[vm]),
            describe(back[vm]),
            "[green]yes[/green]" if same else "[red]no[/red]",
        )
    console.print(table)
