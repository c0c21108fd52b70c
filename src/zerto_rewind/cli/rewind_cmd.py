"""``zerto-rewind rewind``: plan putting a session's VMs back, and run the plan as a person.

A thin adapter over :mod:`zerto_rewind.recovery.rewind_build` (the plan) and
:mod:`zerto_rewind.recovery.rewind_run` (the run): it parses the arguments, checks
who runs it, shows progress bars on stderr and prints the plan and the report.
docs/rewind.md says what each Zerto operation does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from ..errors import RecoveryError, UsageError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..recovery.rewind_build import RewindPlan
    from ..recovery.rewind_run import Mode, RunReport
    from ..zvm.client import ZvmClient

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind rewind",
        description="Put the VMs an agent session changed back to the checkpoints the guard "
        "took before its changes (docs/rewind.md).",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", metavar="ID", help="the session whose changes to undo")
    which.add_argument("--vm", metavar="VM", help="one VM (with --before TIME)")
    which.add_argument("--plan", metavar="ID", help="run a plan saved by --dry-run")
    which.add_argument("--resume", metavar="ID", help="carry on with a plan's VMs not done")
    parser.add_argument("--before", metavar="TIME", help="with --vm: ISO-8601 time")
    parser.add_argument("--dry-run", action="store_true", help="print and save the plan only")
    parser.add_argument("--json", action="store_true", help="print JSON")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--test", action="store_true", help="start failover tests instead")
    how.add_argument(
        "--failover", action="store_true", help="live failover of each whole VPG instead"
    )
    parser.add_argument(
        "--confirm", metavar="VPG", action="append", default=[],
        help="with --failover: the VPG's name, typed (else asked at a prompt)",
    )  # fmt: skip
    parser.add_argument("--config", metavar="PATH", help="config file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.vm is not None and args.before is None:
        msg = "--vm needs --before TIME: the VM is put back as it was before that time"
        raise UsageError(msg)
    from ..config.loader import load_settings
    from ..core.decisions_log import register_anchor
    from ..core.log_anchor import policy_for

    settings = load_settings(path=args.config)
    register_anchor(policy_for(settings))
    approver = None if args.dry_run else _approver(settings)
    with _zvms(settings) as zvms:
        plan = _plan(args, settings, zvms)
        built = args.plan is None and args.resume is None
        # A run's --json is its report alone: one JSON document on stdout.
        if args.dry_run or (built and not args.json):
            _show_plan(plan, args.json, dry_run=args.dry_run)
        if args.dry_run or approver is None:
            return 0
        mode: Mode = "test" if args.test else "failover" if args.failover else "restore"
        confirmed = _confirmed(plan, args.confirm) if mode == "failover" else frozenset()
        report = _run(zvms, settings, plan, mode, approver, confirmed, args)
    _show_report(report, args.json)
    if report.interrupted:
        return 130
    return 0 if report.ok else 1


def _approver(settings: Settings) -> str:
    import os
    import pwd

    from ..recovery.rewind_run import approver_refusal

    refused = approver_refusal(settings)
    if refused is not None:
        raise RecoveryError(refused)
    return f"unix:{pwd.getpwuid(os.geteuid()).pw_name}"


@contextlib.contextmanager
def _zvms(settings: Settings) -> Iterator[Guard | ZvmClient]:
    """One ZVM's client, or the guard's estate when the config names several."""
    if len(settings.zvms) == 1:
        from ..zvm.auth import TokenCache
        from ..zvm.client import ZvmClient

        zvm = next(iter(settings.zvms.values()))
        with ZvmClient(zvm, token_cache=TokenCache(settings.state_dir)) as client:
            yield client
        return
    from ..core.guard import Guard

    guard = Guard(settings)
    try:
        yield guard
    finally:
        guard.close()


def _plan(args: argparse.Namespace, settings: Settings, zvms: Guard | ZvmClient) -> RewindPlan:
    from ..recovery.rewind_build import build_plan
    from ..recovery.rewind_plan import Scope
    from ..recovery.rewind_store import load_plan, save_plan

    saved = args.plan or args.resume
    if saved is not None:
        return load_plan(settings.state_dir, saved)
    scope = Scope(session_id=args.session, vm=args.vm, before=args.before)
    plan = build_plan(zvms, settings, scope)
    save_plan(settings.state_dir, plan)
    return plan


def _confirmed(plan: RewindPlan, typed: list[str]) -> frozenset[str]:
    """The VPGs a person named: on the command line, else typed at a prompt."""
    names = set(typed)
    for vpg in sorted({v.vpg for v in plan.vms if v.vpg and v.vpg not in names}):
        if not sys.stdin.isatty():
            continue  # left unconfirmed: its VMs are skipped, and the report says so
        moved = sorted({m for v in plan.vms if v.vpg == vpg for m in (v.vm, *v.failover_touches)})
        sys.stderr.write(
            f"A live failover of VPG {vpg} moves every VM in it: {', '.join(moved)}.\n"
            "Type the VPG's name to fail it over (anything else skips it): "
        )
        if input().strip() == vpg:
            names.add(vpg)
    return frozenset(names)


def _run(
    zvms: Guard | ZvmClient,
    settings: Settings,
    plan: RewindPlan,
    mode: Mode,
    approver: str,
    confirmed: frozenset[str],
    args: argparse.Namespace,
) -> RunReport:
    from ..recovery.rewind_run import run_plan

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
        console=console, transient=False, disable=args.json or not console.is_terminal,
    ) as bars:  # fmt: skip
        tasks: dict[str, TaskID] = {}

        def show(label: str, phase: str, percent: int) -> None:
            if label not in tasks:
                tasks[label] = bars.add_task(escape(label), total=100)
            bars.update(tasks[label], completed=percent, description=f"{escape(label)} {phase}")

        return run_plan(
            zvms, settings, plan, mode=mode, approver=approver, confirmed=confirmed,
            resume=args.resume is not None, progress=show,
        )  # fmt: skip


# ---------------------------------------------------------------- output


def _show_plan(plan: RewindPlan, as_json: bool, *, dry_run: bool) -> None:
    if as_json:
        print(json.dumps(plan.model_dump(mode="json"), indent=2))
        return
    out = Console(highlight=False, soft_wrap=True)
    scope = ", ".join(f"{k} {v}" for k, v in plan.scope.items())
    out.print(f"Rewind plan [bold]{plan.plan_id}[/bold] ({escape(scope)}), built {plan.created_at}")
    for v in plan.vms:
        out.print(f"\n[bold]{escape(v.vm)}[/bold] in VPG {escape(str(v.vpg))}")
        journal = {True: "in the journal", False: "GONE from the journal", None: "not checked"}
        tag = f" tagged {v.checkpoint_tag!r}" if v.checkpoint_tag else ""
        when = f" at {v.checkpoint_time}" if v.checkpoint_time else ""
        out.print(f"  rewind point: checkpoint {v.checkpoint_id}{escape(tag)}{when}, "
                  f"{journal[v.in_journal]}")  # fmt: skip
        out.print(f"  first change: {v.first_change.time} {escape(v.first_change.tool)}")
        out.print(f"  operation: {escape(v.operation)}")
        touches = ", ".join(v.failover_touches) or "no other VM"
        out.print(f"  a --failover of the VPG would also move: {escape(touches)}")
        for c in v.also_undoes:
            out.print(f"  also undoes: {c.time} {escape(c.tool)} by session {c.session_id}")
        for cp in v.later_checkpoints:
            out.print(f"  also undoes whatever came after: checkpoint {escape(cp)}")
        if v.blocked:
            out.print(f"  [red]cannot run:[/red] {escape(v.blocked)}")
    for c in plan.cannot_rewind:
        vms = ", ".join(c.vms) or "no VM"
        out.print(f"\ncannot be rewound: {c.time} {escape(c.tool)} on {escape(vms)}: {c.why}")
    if dry_run:
        out.print(f"\nNothing was changed. Run it: zerto-rewind rewind --plan {plan.plan_id}")


def _show_report(report: RunReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"\nRewind {report.plan_id} ({report.mode}):")
    for r in report.results:
        out.print(f"  {escape(r.vm)}: {r.state} ({r.vm_state}): {escape(r.why)}")
    if not report.ok:
        out.print(f"Carry on with the VMs not done: zerto-rewind rewind --resume {report.plan_id}")
