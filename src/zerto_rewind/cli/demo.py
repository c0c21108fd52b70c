"""``zerto-rewind demo``: every decision row, live, against the embedded simulator.

Starts the simulator in-process with the default estate (cadences shortened so
the whole run takes about a minute), then feeds the hook — a subprocess, fed
JSON on stdin, exactly as Claude Code runs it — one call per row of the
decision table, and prints what happened. Exits non-zero if any row did not
get the decision the table promises.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..testing import HookRun, Sandbox, fast_sim_config

__all__ = ["main"]

AWS_CADENCE_S = 30.0
GUARD_BUDGET_S = 12.0


@dataclass
class Step:
    situation: str
    tool: str
    tool_input: dict[str, Any]
    expect: str  # none | context | deny | ask

    @property
    def vm(self) -> str:
        found = self.tool_input.get("name") or "—"
        return str(found)


POWER_OFF = "mcp__vsphere__power_off_vm"
STEPS = [
    Step("read-only", "mcp__vsphere__list_vms", {}, "none"),
    Step("confirmed", POWER_OFF, {"name": "jp-ubuntu"}, "context"),
    Step("failed (VPG paused)", POWER_OFF, {"name": "sql-paused-1"}, "deny"),
    Step("pending (AWS cadence)", POWER_OFF, {"name": "win2019-1"}, "deny"),
    Step("VM unknown to Zerto", POWER_OFF, {"name": "ghost-vm"}, "ask"),
    Step("no VM in arguments", POWER_OFF, {"force": True}, "ask"),
    Step("unlisted tool", "mcp__vsphere__delete_datastore", {"datastore": "ds1"}, "ask"),
]
RETRY = Step("pending, retried", POWER_OFF, {"name": "win2019-1"}, "context")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 when every row got the decision the table promises."""
    parser = argparse.ArgumentParser(prog="zerto-rewind demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--aws-cadence", type=float, default=AWS_CADENCE_S, help="simulated AWS journal cadence (s)"
    )
    parser.add_argument(
        "--budget", type=float, default=GUARD_BUDGET_S, help="the guard's budget (s)"
    )
    args = parser.parse_args(argv)
    # Piped output (CI logs) gets a width the summary table fits in.
    console = Console() if Console().is_terminal else Console(width=110)
    sim_config = fast_sim_config(
        cadences={"vcenter": 2.0, "hyperv": 2.0, "vcd": 2.0, "azure": 6.0, "aws": args.aws_cadence}
    )
    with (
        tempfile.TemporaryDirectory(prefix="zerto-rewind-demo-") as root,
        Sandbox(root, sim_config=sim_config, guard={"timeout_s": args.budget}) as box,
    ):
        console.print(
            f"[bold]zerto-rewind demo[/bold]: simulated ZVM at {box.sim.url} (TLS, CA pinned)"
        )
        rows = []
        for step in STEPS:
            if step.tool_input.get("name") == "win2019-1":
                box.wait_past_boundary("CMH-AWS-1")  # the next AWS checkpoint is a cadence away
            rows.append((step, _run(console, box, step)))
        pending = rows[3][1]
        wait_s = _retry_wait(box)
        note = f"waiting {wait_s:.0f} s for the pending AWS tag to land, as the deny told the agent"
        console.print(f"\n[yellow]{note}...[/yellow]")
        time.sleep(wait_s)
        rows.append((RETRY, _run(console, box, RETRY)))
        tags = box.tag_requests("CMH-AWS-1")
    _print_table(console, rows)
    failures = [step.situation for step, run in rows if run.decision != step.expect]
    console.print(f"\nAWS VPG tag requests: {tags} (pending + retry share one tag)")
    if pending.decision == "deny" and tags == 1 and not failures:
        console.print("[green]every row got the decision the table promises[/green]")
        return 0
    console.print(f"[red]unexpected decisions: {', '.join(failures) or 'tag count'}[/red]")
    return 1


def _run(console: Console, box: Sandbox, step: Step) -> HookRun:
    run = box.run_hook(step.tool, step.tool_input)
    mark = "[green]✓[/green]" if run.decision == step.expect else "[red]✗[/red]"
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
    for column in ("situation", "tool", "VM", "decision", "checkpoint", "seconds"):
        table.add_column(column, no_wrap=True)
    for step, run in rows:
        checkpoint = _checkpoint_of(run) if run.decision == "context" else ""
        style = "" if run.decision == step.expect else "red"
        table.add_row(
            step.situation,
            step.tool.removeprefix("mcp__vsphere__"),
            step.vm,
            run.decision,
            checkpoint,
            f"{run.elapsed_s:.1f}",
            style=style,
        )
    console.print(table)


def _checkpoint_of(run: HookRun) -> str:
    import re

    found = re.search(r"checkpoint (\S+) tagged", run.reason)
    return found.group(1) if found else ""
