"""``zerto-rewind demo``: every decision row, live, against a simulated three-site estate.

Starts the simulator in-process with a ZVM per site — headquarters plus a vSphere DR
site, an Azure site and an AWS site (the packaged ``three-sites`` estate, with one VPG
protected from AWS added for the pending row) — cadences shortened so the whole run
takes about a minute. Then it feeds the hook — a subprocess, fed JSON on stdin, exactly
as Claude Code runs it, with ``zvms`` naming the four ZVMs — one call per row of the
decision table, and the estate's own rows: a VM of another site tagged on its protected
site's ZVM, a VM in two VPGs getting both checkpoints, and one site dark (its VM denied
naming it; another site's VM asked of a person, naming the dark site, since that site
may hold a VM of the same name). Last, one agent session changes three VMs and a
person rewinds it (:mod:`.demo_rewind`). Exits non-zero if any row did not get the
decision the table promises, or a VM the session changed is not back.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..testing import HookRun, Sandbox, fast_sim_config, packaged_estate
from . import demo_rewind

__all__ = ["main"]

AWS_CADENCE_S = 30.0
GUARD_BUDGET_S = 12.0
SITE_DOWN_S = 3.0
AWS_VPG = "aws-orders-hq"
DARK_SITE = "dr"


def demo_estate() -> dict[str, Any]:
    """``three-sites`` (ZVMs hq, dr, azure, aws) plus a VPG protected from AWS, whose slow
    journal gives the pending row, and the VPGs of the rewind act."""
    estate = packaged_estate("three-sites")
    estate["vpgs"].append(
        {
            "name": AWS_VPG,
            "site_kind": "aws",
            "protected_site": "aws",
            "recovery_site": "hq",
            "vms": ["win2019-1"],
        }
    )
    estate["vpgs"] += demo_rewind.REWIND_VPGS
    return estate


@dataclass
class Step:
    situation: str
    tool: str
    tool_input: dict[str, Any]
    expect: str  # none | context | deny | ask
    says: tuple[str, ...] = ()  # what the reason must name

    @property
    def vm(self) -> str:
        found = self.tool_input.get("name") or "—"
        return str(found)


# The tools of mcvsphere, the vSphere MCP server the README and docs use, under its names.
POWER_OFF = "mcp__vsphere__power_off"
DEMO_CATALOG: dict[str, Any] = {
    "read_only_tools": ["mcp__vsphere__list_vms", "mcp__vsphere__get_*"],
    "tools": {POWER_OFF: {"vm_arg": "name"}, **demo_rewind.REWIND_TOOLS},
    "vm_map": {"strip_domain": ["lab.local"]},
}
STEPS = [
    Step("read-only", "mcp__vsphere__list_vms", {}, "none"),
    Step("confirmed", POWER_OFF, {"name": "web-01"}, "context", ("VPG 'hq-web-dr'",)),
    Step("failed (VPG paused)", POWER_OFF, {"name": "sql-dr-01"}, "deny", ("paused",)),
    Step("pending (AWS cadence)", POWER_OFF, {"name": "win2019-1"}, "deny", ("pending",)),
    Step("VM unknown to Zerto", POWER_OFF, {"name": "ghost-vm"}, "ask"),
    Step("no VM in arguments", POWER_OFF, {"force": True}, "ask"),
    Step("unlisted tool", "mcp__vsphere__delete_datastore_file", {"path": "[ds1] x"}, "ask"),
    # The estate's rows, while the AWS tag lands.
    Step("VM of site dr, tagged on dr's ZVM", POWER_OFF, {"name": "reports-01"}, "context",
         ("VPG 'dr-reports-aws' (vcenter, site dr)",)),
    Step("one VM, two VPGs (to dr, to azure)", POWER_OFF, {"name": "app-01"}, "context",
         ("VPG 'hq-web-dr'", "VPG 'hq-app-azure'")),
]  # fmt: skip
DARK = [
    Step("site dr dark: its VM", POWER_OFF, {"name": "reports-01"}, "deny", ("site dr",)),
    # Silence is not absence: dr may hold a VM of the same name, so a person decides.
    Step("site dr dark: hq's VM", POWER_OFF, {"name": "crm-01"}, "ask",
         ("site dr", "did not answer")),
]  # fmt: skip
RETRY = Step("pending, retried", POWER_OFF, {"name": "win2019-1"}, "context")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 when every row got the decision the table promises and every VM
    the rewind act's session changed is back."""
    args = _parser().parse_args(argv)
    # Piped output (CI logs) gets a width the summary table fits in.
    console = Console() if Console().is_terminal else Console(width=120)
    vcenter = demo_rewind.memory_vcenter()
    sim_config = fast_sim_config(
        cadences={"vcenter": 2.0, "hyperv": 2.0, "vcd": 2.0, "azure": 6.0, "aws": args.aws_cadence},
        vcenter_link=vcenter,
    )
    # A dark site is remembered as down this long; the retry waits it out once dr is back.
    guard = {"timeout_s": args.budget, "site_down_s": SITE_DOWN_S}
    # Each ZVM answers within 2 s or counts as dark, well inside the budget.
    zvm = {"connect_timeout_s": 1, "read_timeout_s": 1}
    estate = demo_estate()
    with (
        tempfile.TemporaryDirectory(prefix="zerto-rewind-demo-") as root,
        Sandbox(
            root, sim_config=sim_config, guard=guard, estate=estate, zvm=zvm, catalog=DEMO_CATALOG
        ) as box,
    ):
        box.write_config(approvals=demo_rewind.approvals())
        console.print(
            "[bold]zerto-rewind demo[/bold]: a simulated estate, one ZVM per site (TLS, CA pinned)"
        )
        for site, fields in box.sites.items():
            console.print(f"  site {site} ({fields['kind']}): ZVM at {fields['url']}")
        rows = _play(console, box)
        _print_table(console, rows)
        code = _verdict(console, rows, box.tag_counts())
        rewound = demo_rewind.play(console, box, vcenter)
    return code if rewound else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zerto-rewind demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--aws-cadence", type=float, default=AWS_CADENCE_S, help="simulated AWS journal cadence (s)"
    )
    parser.add_argument(
        "--budget", type=float, default=GUARD_BUDGET_S, help="the guard's budget (s)"
    )
    return parser


def _play(console: Console, box: Sandbox) -> list[tuple[Step, HookRun]]:
    """Every step of the table, then the dark site's rows, then the pending call's retry."""
    rows = []
    for step in STEPS:
        if step.tool_input.get("name") == "win2019-1":
            box.wait_past_boundary(AWS_VPG)  # the next AWS checkpoint is a cadence away
        rows.append((step, _run(console, box, step)))
    console.print(f"\n[yellow]site {DARK_SITE}'s ZVM goes down[/yellow]")
    box.control("POST", "/_sim/faults", {"kind": "down"}, site=DARK_SITE)
    try:
        rows += [(step, _run(console, box, step)) for step in DARK]
    finally:
        box.control("DELETE", "/_sim/faults", site=DARK_SITE)
    back_at = time.monotonic()
    console.print(f"[yellow]site {DARK_SITE}'s ZVM is back[/yellow]")
    # The retry must not meet dr's remembered outage: win2019-1's name is asked of dr too.
    wait_s = max(_retry_wait(box), SITE_DOWN_S + 0.5 - (time.monotonic() - back_at))
    note = f"waiting {wait_s:.0f} s for the pending AWS tag to land, as the deny told the agent"
    console.print(f"\n[yellow]{note}...[/yellow]")
    time.sleep(wait_s)
    rows.append((RETRY, _run(console, box, RETRY)))
    return rows


def _verdict(
    console: Console, rows: list[tuple[Step, HookRun]], tags: dict[str, dict[str, int]]
) -> int:
    """Print the tag requests per ZVM; 0 when every row and tag count is as the table promises."""
    pending = rows[3][1]
    console.print("\ntag requests per ZVM (each VPG's tag goes to its protected site's ZVM):")
    for site, counts in tags.items():
        listed = ", ".join(f"{vpg} {n}" for vpg, n in sorted(counts.items())) or "none"
        console.print(f"  {site}: {listed}")
    failures = [step.situation for step, run in rows if not _as_promised(step, run)]
    aws_tags = tags["aws"].get(AWS_VPG, 0)
    console.print(f"AWS VPG tag requests: {aws_tags} (pending + retry share one tag)")
    # A VPG is tagged on its protected site's ZVM only: dr-reports-aws on dr, never elsewhere.
    elsewhere = sum(
        counts.get("dr-reports-aws", 0) for site, counts in tags.items() if site != "dr"
    )
    if pending.decision == "deny" and aws_tags == 1 and not elsewhere and not failures:
        console.print("[green]every row got the decision the table promises[/green]")
        return 0
    console.print(f"[red]unexpected decisions: {', '.join(failures) or 'tag counts'}[/red]")
    return 1


def _as_promised(step: Step, run: HookRun) -> bool:
    return run.decision == step.expect and all(said in run.reason for said in step.says)


def _run(console: Console, box: Sandbox, step: Step) -> HookRun:
    run = box.run_hook(step.tool, step.tool_input)
    mark = "[green]✓[/green]" if _as_promised(step, run) else "[red]✗[/red]"
    console.print(f"{mark} {step.situation}: {run.decision} in {run.elapsed_s:.1f} s")
    if run.reason:
        console.print(f"    [dim]{run.reason}[/dim]")
    return run


def _retry_wait(box: Sandbox) -> float:
    """Seconds until the retry time the pending answer named (from the decision log)."""
    for record in reversed(box.log_records()):
        if record.get("row") == "pending" and record.get("retry_after"):
            from datetime import datetime

            retry = datetime.fromisoformat(record["retry_after"].replace("Z", "+00:00")).timestamp()
            return max(0.0, retry - time.time())
    return 0.0


def _print_table(console: Console, rows: list[tuple[Step, HookRun]]) -> None:
    table = Table(title="decisions", box=box.SIMPLE_HEAD)
    for column in ("situation", "tool", "VM", "decision", "checkpoint", "tagged on", "seconds"):
        table.add_column(column, no_wrap=True)
    for step, run in rows:
        confirmed = run.decision == "context"
        style = "" if _as_promised(step, run) else "red"
        table.add_row(
            step.situation,
            step.tool.removeprefix("mcp__vsphere__"),
            step.vm,
            run.decision,
            ", ".join(re.findall(r"checkpoint (\S+) tagged", run.reason)) if confirmed else "",
            ", ".join(dict.fromkeys(re.findall(r"\(\w+, site ([\w-]+)\)", run.reason))),
            f"{run.elapsed_s:.1f}",
            style=style,
        )
    console.print(table)
