"""``zerto-rewind status | checkpoints | tag``: thin adapters over the library.

``status`` and ``checkpoints`` render :func:`~zerto_rewind.recovery.protection.protection_status`
and :func:`~zerto_rewind.recovery.protection.checkpoint_listing` (what the MCP tools
return); ``tag`` asks the ZVM for a tagged checkpoint and waits for it, showing its
progress against the expected landing time. With several ZVMs (``zvms``) the VM is
found across the estate as the guard finds it (:mod:`.zvm_sites`): each VPG is shown,
listed and tagged on the ZVM of its protected site, named in the output; a VPG that
cannot be tagged is shown with why; a site that did not answer is always listed, in
text and in ``--json`` (``unreachable_sites``). Tables wrap at the terminal's (or a
pipe's 80) columns instead of cutting names. Each command parses its arguments, calls
the library and renders the result (tables on stdout, progress on stderr). Errors
from the library are reported once, by the edge in :mod:`zerto_rewind.cli`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config.settings import Settings
from ..core.guard import entity_type_names
from ..core.tagging import planned_landing
from ..errors import UsageError, ZvmError, ZvmTimeout
from ..recovery.protection import (
    CheckpointInfo,
    VpgProtection,
    checkpoint_listing,
    observe_cadence,
    parse_since,
    protection_status,
    vm_refs,
)
from ..zvm.client import ZvmClient
from ..zvm.models import Checkpoint, Vpg, format_iso, parse_iso, site_kind, tag_refusal
from .tag_progress import TagProgress
from .zvm_sites import Place, Places, places

__all__ = ["checkpoints", "status", "tag"]

# Tag landings are searched from a little before the request (clock skew).
_SKEW = timedelta(seconds=60)

Command = Callable[[argparse.Namespace, Console], int]


# ---------------------------------------------------------------- entry points


def status(argv: list[str]) -> int:
    """``zerto-rewind status VM``: each VPG's site, health, RPO, cadence, latest checkpoint."""
    parser = _parser("status", "Show the protection status of a VM's VPGs.")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return _run(_status, parser, argv)


def checkpoints(argv: list[str]) -> int:
    """``zerto-rewind checkpoints VM``: the checkpoints of each of the VM's VPGs."""
    parser = _parser("checkpoints", "List the journal checkpoints of a VM's VPGs.")
    parser.add_argument(
        "--since",
        type=_since,
        default="1h",
        help="ISO-8601 time or a duration back from now: 90s, 10m, 2h, 1d (default 1h)",
    )
    parser.add_argument("--tagged", action="store_true", help="only tagged checkpoints")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return _run(_checkpoints, parser, argv)


def tag(argv: list[str]) -> int:
    """``zerto-rewind tag VM [TEXT]``: tag a checkpoint on each of the VM's VPGs; wait for it."""
    parser = _parser("tag", "Tag a checkpoint on every VPG of a VM and wait for it to land.")
    parser.add_argument(
        "text", nargs="?", help="the tag text (default: zerto-rewind manual VM TIME)"
    )
    parser.add_argument("--name", help="the tag text, as an option (same as TEXT)")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds to wait (default 900)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print what landed as JSON instead of a table"
    )
    return _run(_tag, parser, argv)


def _parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"zerto-rewind {name}", description=description)
    parser.add_argument("vm", help="the VM's name as Zerto shows it")
    parser.add_argument(
        "--config", metavar="PATH", help="config file (default: $ZERTO_REWIND_CONFIG)"
    )
    return parser


def _run(command: Command, parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    if getattr(args, "text", None) and args.name and args.text != args.name:
        parser.error("give the tag text once: as TEXT or as --name, not two different texts")
    return command(args, Console(stderr=True))


# ---------------------------------------------------------------- shared plumbing


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _table(title: str, headers: tuple[str, ...]) -> Table:
    """A table whose cells wrap (fold a long word) instead of ending in an ellipsis."""
    table = Table(title=title, title_justify="left")
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _when(cp: CheckpointInfo | None) -> str:
    return parse_iso(cp.timestamp).strftime("%Y-%m-%d %H:%M:%S UTC") if cp else "—"


def _cp_json(cp: CheckpointInfo | None) -> dict[str, Any] | None:
    if cp is None:
        return None
    return {"id": cp.checkpoint_id, "timestamp": cp.timestamp, "tag": cp.tag}


def _notes(out: Console, found: Places) -> None:
    """The sites that did not answer and the VPGs no answering ZVM lists: once each."""
    for dark in found.dark:
        out.print(f"[yellow]unreachable[/yellow]: {escape(dark.line())}", highlight=False)
    for unshown in found.unshown:
        out.print(f"[yellow]not shown[/yellow]: {escape(unshown)}", highlight=False)


# ---------------------------------------------------------------- status


@dataclass
class _Row:
    site: str | None
    v: VpgProtection
    cannot_tag: str | None  # the VPG's own state, else the estate (its site is dark)


def _status(args: argparse.Namespace, err: Console) -> int:
    rows: list[_Row] = []
    shown = args.vm
    with places(args.vm, time.monotonic() + 120.0, args.config) as found:
        for place in found.places:
            report = protection_status(place.client, found.settings, args.vm)
            shown = report.vm
            rows += [
                _Row(place.site, v, v.tag_refusal or place.cannot_tag(v.vpg_id))
                for v in report.vpgs
                if place.holds(v.vpg_id)
            ]
    if args.json:
        listed = [_status_json(args.vm, r) for r in rows]
        report_json = {
            "vm": args.vm,
            "vpgs": listed,
            "unreachable_sites": found.dark_json(),
            "not_shown": found.unshown,
        }
        print(json.dumps(report_json, indent=2))
        return 0
    out = _stdout()
    out.print(_status_table(shown, rows))
    for row in rows:
        if row.cannot_tag:
            why = escape(row.cannot_tag)
            out.print(f"[yellow]cannot tag[/yellow] VPG {escape(row.v.vpg)}: {why}")
    _notes(out, found)
    return 0


def _status_json(vm: str, row: _Row) -> dict[str, Any]:
    v = row.v
    return {
        **({"zvm_site": row.site} if row.site is not None else {}),
        "vm": vm,
        "vpg": v.vpg,
        "vpg_id": v.vpg_id,
        "site_kind": v.site_kind,
        "status": v.status_code,
        "status_name": v.status,
        "sub_status": v.sub_status_code,
        "sub_status_name": v.sub_status,
        "actual_rpo_s": v.actual_rpo_s,
        "cadence_s": v.cadence_s,
        "cadence_source": v.cadence_source,
        "latest_checkpoint": _cp_json(v.latest_checkpoint),
        "tag_refusal": row.cannot_tag,
    }


def _status_table(vm: str, rows: list[_Row]) -> Table:
    several = any(row.site is not None for row in rows)
    headers = ("VPG", "site", "status", "substatus", "RPO", "cadence", "latest checkpoint")
    table = _table(f"VM {escape(vm)}", (*(("ZVM site",) if several else ()), *headers))
    for row in rows:
        v = row.v
        rpo = f"{v.actual_rpo_s} s" if v.actual_rpo_s is not None else "—"
        cp = v.latest_checkpoint
        latest = f"{cp.checkpoint_id} {_when(cp)}" if cp else "—"
        if cp and cp.tag:
            latest += f" [{cp.tag}]"
        table.add_row(
            *((escape(row.site or ""),) if several else ()),
            escape(v.vpg) + (" (cannot tag)" if row.cannot_tag else ""),
            v.site_kind,
            v.status,
            v.sub_status,
            rpo,
            f"{v.cadence_s:g} s ({v.cadence_source})",
            escape(latest),
        )
    return table


# ---------------------------------------------------------------- checkpoints


def _since(text: str) -> str:
    """Validate ``--since`` up front (a usage error, exit 2); the library parses it again."""
    try:
        parse_since(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _checkpoints(args: argparse.Namespace, err: Console) -> int:
    listed: list[tuple[str | None, str, CheckpointInfo]] = []
    since = ""
    with places(args.vm, time.monotonic() + 120.0, args.config) as found:
        for place in found.places:
            listing = checkpoint_listing(
                place.client, args.vm, since=args.since, tagged_only=args.tagged, limit=None
            )
            since = listing.since
            # The library lists newest first; this command has always shown oldest first.
            listed += [
                (place.site, g.vpg, cp)
                for g in listing.vpgs
                if place.holds(g.vpg_id)
                for cp in reversed(g.checkpoints)
            ]
    several = any(site is not None for site, _vpg, _cp in listed)
    if args.json:
        rows = [
            {**({"zvm_site": site} if several else {}), "vpg": vpg, **(_cp_json(cp) or {})}
            for site, vpg, cp in listed
        ]
        report = {
            "vm": args.vm,
            "since": since,
            "checkpoints": rows,
            "unreachable_sites": found.dark_json(),
            "not_shown": found.unshown,
        }
        print(json.dumps(report, indent=2))
        return 0
    headers = (*(("ZVM site",) if several else ()), "VPG", "id", "time", "tag")
    table = _table(f"VM {escape(args.vm)}: checkpoints since {since}", headers)
    for site, vpg, cp in listed:
        first = (escape(site or ""),) if several else ()
        table.add_row(*first, escape(vpg), cp.checkpoint_id, _when(cp), escape(cp.tag or ""))
    out = _stdout()
    out.print(table)
    _notes(out, found)
    return 0


# ---------------------------------------------------------------- tag


@dataclass
class _Request:
    vpg: Vpg
    place: Place
    expected_s: float  # from the request to the expected landing
    task_id: str = ""
    landed: Checkpoint | None = None
    waited_s: float = 0.0


def _tag(args: argparse.Namespace, err: Console) -> int:
    deadline = time.monotonic() + args.timeout
    name = (
        args.text or args.name or f"zerto-rewind manual {args.vm} {format_iso(datetime.now(UTC))}"
    )
    with places(args.vm, deadline, args.config) as found:
        chosen: list[tuple[Place, Vpg]] = []
        for place in found.taggable():
            refs = vm_refs(place.client, args.vm, deadline=deadline)
            ids = dict.fromkeys(ref.vpg_id for ref in refs if place.holds(ref.vpg_id))
            chosen += [(place, place.client.get_vpg(i, deadline=deadline)) for i in ids]
        for dark in found.dark:
            err.print(f"[yellow]unreachable[/yellow]: {escape(dark.line())}", highlight=False)
        refusals = found.refusals() + [reason for _p, vpg in chosen if (reason := tag_refusal(vpg))]
        for reason in refusals:
            err.print(f"[red]Refused[/red]: {escape(reason)}", highlight=False)
        if refusals:
            return 1
        started, requested_at = time.monotonic(), datetime.now(UTC)
        requests = [_request(found.settings, p, v, requested_at, deadline) for p, v in chosen]
        for req in requests:
            req.task_id = req.place.client.tag_checkpoint(req.vpg.vpg_id, name, deadline=deadline)
        with TagProgress(err, args.vm) as progress:
            for req in requests:
                _await_landing(req, args.vm, name, requested_at, deadline, started, progress)
    if args.json:
        print(json.dumps(_landed_json(args.vm, name, requests), indent=2))
    else:
        _print_landed(requests, name)
    return 0


def _request(
    settings: Settings, place: Place, vpg: Vpg, requested_at: datetime, deadline: float
) -> _Request:
    """The VPG's tag request, with when its tag should land (its cadence, last checkpoint)."""
    client, guard = place.client, settings.guard
    names = entity_type_names(client, deadline=deadline)
    kind = site_kind(vpg.protected_entity, names, guard.site_types)
    now = requested_at.timestamp()
    cadence, _source, listed = observe_cadence(
        settings, client, vpg, kind, now=now, deadline=deadline
    )
    last = listed[-1].timestamp.timestamp() if listed else None
    expected, _overdue = planned_landing(now, last, cadence, guard.landing_allowance_s, guard)
    return _Request(vpg, place, max(0.0, expected - now))


def _await_landing(
    req: _Request,
    vm: str,
    name: str,
    requested_at: datetime,
    deadline: float,
    started: float,
    progress: TagProgress,
) -> None:
    client: ZvmClient = req.place.client
    vpg = req.vpg.name
    progress.update(vpg, time.monotonic() - started, req.expected_s, "the tag task runs")
    task = client.wait_for_task(req.task_id, deadline=deadline)
    if task.failed:
        reason = task.complete_reason or "no reason given"
        msg = f"tag task {req.task_id} on VPG '{vpg}' ended {task.state_name}: {reason}"
        raise ZvmError(msg)
    while req.landed is None:
        waited = time.monotonic() - started
        progress.update(vpg, waited, req.expected_s, "waiting for the tag to land")
        cps = client.list_checkpoints(req.vpg.vpg_id, since=requested_at - _SKEW, deadline=deadline)
        req.landed = next((cp for cp in cps if cp.tag == name), None)
        if req.landed is None:
            if time.monotonic() + 1.0 >= deadline:
                raise ZvmTimeout(_not_landed(req, vm, name, requested_at, waited))
            time.sleep(1.0)
    req.waited_s = time.monotonic() - started
    progress.landed(vpg, req.waited_s)


def _not_landed(req: _Request, vm: str, name: str, requested_at: datetime, waited: float) -> str:
    return (
        f"tag {name!r} requested at {format_iso(requested_at)} for VM {vm!r} on VPG "
        f"'{req.vpg.name}' has not landed after {waited:.0f} s (expected after about "
        f"{req.expected_s:.0f} s); it may still land, check with "
        f"`zerto-rewind checkpoints {shlex.quote(vm)} --tagged` or raise --timeout"
    )


def _landed_json(vm: str, name: str, requests: list[_Request]) -> dict[str, Any]:
    landed = []
    for req in requests:
        cp = req.landed
        assert cp is not None  # _await_landing returns only once it landed
        landed.append(
            {
                **({"zvm_site": req.place.site} if req.place.site is not None else {}),
                "vpg": req.vpg.name,
                "vpg_id": req.vpg.vpg_id,
                "checkpoint": _cp_json(CheckpointInfo.of(cp)),
                "waited_s": round(req.waited_s, 1),
                "expected_s": round(req.expected_s, 1),
            }
        )
    return {"vm": vm, "tag": name, "landed": landed}


def _print_landed(requests: list[_Request], name: str) -> None:
    several = any(req.place.site is not None for req in requests)
    headers = (*(("ZVM site",) if several else ()), "VPG", "checkpoint", "time", "tag", "waited")
    table = _table(f"tag {escape(repr(name))} landed", headers)
    for req in requests:
        cp = req.landed
        assert cp is not None  # _await_landing returns only once it landed
        table.add_row(
            *((escape(req.place.site or ""),) if several else ()),
            escape(req.vpg.name),
            cp.cp_id,
            _when(CheckpointInfo.of(cp)),
            escape(cp.tag or ""),
            f"{req.waited_s:.1f} s",
        )
    _stdout().print(table)
    sys.stdout.flush()
