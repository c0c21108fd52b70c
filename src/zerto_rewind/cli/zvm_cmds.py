"""``zerto-rewind status | checkpoints | tag``: thin adapters over the library.

``status`` and ``checkpoints`` render :func:`~zerto_rewind.recovery.protection.protection_status`
and :func:`~zerto_rewind.recovery.protection.checkpoint_listing` (what the MCP tools
return); ``tag`` asks the ZVM for a tagged checkpoint and waits for it. With several
ZVMs (``zvms``) the VM is found across the estate as the guard finds it, and each VPG
is shown, listed and tagged on the ZVM of its protected site, named in the output. Each
command parses its arguments, calls the library and renders the result (rich
tables on stdout, progress on stderr). Errors from the library are reported
once, by the edge in :mod:`zerto_rewind.cli`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config.loader import load_settings
from ..config.settings import Settings
from ..core.guard import Guard
from ..errors import NotFound, UsageError, ZvmError, ZvmTimeout
from ..recovery.protection import (
    CheckpointInfo,
    VpgProtection,
    checkpoint_listing,
    parse_since,
    protection_status,
    vm_refs,
)
from ..zvm.auth import TokenCache
from ..zvm.client import ZvmClient
from ..zvm.models import Checkpoint, Vpg, format_iso, parse_iso, tag_refusal

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
    """``zerto-rewind tag VM``: tag a checkpoint on each of the VM's VPGs; wait until it lands."""
    parser = _parser("tag", "Tag a checkpoint on every VPG of a VM and wait for it to land.")
    parser.add_argument("--name", help="the tag text (default: zerto-rewind manual VM TIME)")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds to wait (default 900)"
    )
    return _run(_tag, parser, argv)


def _parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"zerto-rewind {name}", description=description)
    parser.add_argument("vm", help="the VM's name as Zerto shows it")
    return parser


def _run(command: Command, parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    return command(args, Console(stderr=True))


# ---------------------------------------------------------------- shared plumbing


@contextmanager
def _session() -> Iterator[tuple[Settings, ZvmClient]]:
    settings = load_settings()
    with ZvmClient(settings.zvm, token_cache=TokenCache(settings.state_dir)) as client:
        yield settings, client


@dataclass
class _Place:
    """One site's ZVM and the VPGs of the VM it speaks for (those it tags)."""

    site: str | None  # None: a one-ZVM config, shown as before the estate
    client: ZvmClient
    vpg_ids: set[str] | None  # lowercased; None: every VPG that ZVM lists

    def holds(self, vpg_id: str) -> bool:
        return self.vpg_ids is None or vpg_id.lower() in self.vpg_ids


@contextmanager
def _places(vm: str, err: Console, deadline: float) -> Iterator[tuple[Settings, list[_Place]]]:
    """The ZVMs that speak for the VM's VPGs: each VPG's protected site, as the guard tags.

    A site that did not answer is named on stderr; if no answering site knows the VM
    while one is dark, that is an error naming it, never "not protected".
    """
    settings = load_settings()
    if len(settings.zvms) == 1:
        with _session() as (loaded, client):
            yield loaded, [_Place(None, client, None)]
        return
    guard = Guard(settings)
    try:
        lookup = guard.sites().find((vm,), deadline)
        estate = guard.estate()
        chosen: dict[str, set[str]] = {}
        problems = []
        for vpg in lookup.vpgs[vm].values():
            site, problem = guard.sites().tag_site(vpg, lookup.failed)
            if site is None:
                problems.append(problem)
            else:
                chosen.setdefault(site, set()).add(vpg.vpg_id.lower())
        for site, why in lookup.failed.items():
            err.print(
                f"[yellow]site {escape(site)}[/yellow]: the ZVM at {escape(estate.url(site))} "
                f"did not answer: {escape(why)}",
                highlight=False,
            )
        for problem in problems:
            err.print(f"[yellow]not shown[/yellow]: {escape(problem)}", highlight=False)
        if not chosen and (problems or lookup.failed):
            dark = ", ".join(lookup.failed) or "none"
            msg = (
                f"no ZVM that answered can speak for VM {vm!r} (sites that did not answer: "
                f"{dark}); check them with `zerto-rewind doctor` and retry"
            )
            raise ZvmError(msg)
        if not chosen:
            where = ", ".join(f"site {s} ({estate.url(s)})" for s in estate.names)
            msg = (
                f"no VPG protects a VM named {vm!r} on any ZVM of the estate ({where}); check "
                "the name as the Zerto UI shows it (names match exactly: case and spaces count)"
            )
            raise NotFound(msg, method="GET", url=f"{estate.url(estate.first)}/v1/vms", status=None)
        places = [_Place(s, estate.client(s), ids or None) for s, ids in chosen.items()]
        yield settings, places
    finally:
        guard.close()


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _when(cp: CheckpointInfo | None) -> str:
    return parse_iso(cp.timestamp).strftime("%Y-%m-%d %H:%M:%S UTC") if cp else "—"


def _cp_json(cp: CheckpointInfo | None) -> dict[str, Any] | None:
    if cp is None:
        return None
    return {"id": cp.checkpoint_id, "timestamp": cp.timestamp, "tag": cp.tag}


# ---------------------------------------------------------------- status


def _status(args: argparse.Namespace, err: Console) -> int:
    rows: list[tuple[str | None, VpgProtection]] = []
    shown = args.vm
    with _places(args.vm, err, time.monotonic() + 120.0) as (settings, places):
        for place in places:
            report = protection_status(place.client, settings, args.vm)
            shown = report.vm
            rows += [(place.site, v) for v in report.vpgs if place.holds(v.vpg_id)]
    if args.json:
        listed = [_status_json(args.vm, v, site) for site, v in rows]
        print(json.dumps({"vm": args.vm, "vpgs": listed}, indent=2))
        return 0
    out = _stdout()
    out.print(_status_table(shown, rows))
    for _site, v in rows:
        if v.tag_refusal:
            out.print(f"[yellow]cannot tag[/yellow]: {escape(v.tag_refusal)}")
    return 0


def _status_json(vm: str, v: VpgProtection, site: str | None = None) -> dict[str, Any]:
    return {
        **({"zvm_site": site} if site is not None else {}),
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
        "tag_refusal": v.tag_refusal,
    }


def _status_table(vm: str, rows: list[tuple[str | None, VpgProtection]]) -> Table:
    table = Table(title=f"VM {vm}")
    several = any(site is not None for site, _v in rows)
    headers = ("VPG", "site", "status", "substatus", "RPO", "cadence", "latest checkpoint")
    for header in (*(("ZVM site",) if several else ()), *headers):
        table.add_column(header)
    for site, v in rows:
        rpo = f"{v.actual_rpo_s} s" if v.actual_rpo_s is not None else "—"
        cp = v.latest_checkpoint
        latest = f"{cp.checkpoint_id} {_when(cp)}" if cp else "—"
        if cp and cp.tag:
            latest += f" [{escape(cp.tag)}]"
        table.add_row(
            *((escape(site or ""),) if several else ()),
            escape(v.vpg),
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
    with _places(args.vm, err, time.monotonic() + 120.0) as (_settings, places):
        for place in places:
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
        report = {"vm": args.vm, "since": since, "checkpoints": rows}
        print(json.dumps(report, indent=2))
        return 0
    table = Table(title=f"VM {args.vm}: checkpoints since {since}")
    for header in (*(("ZVM site",) if several else ()), "VPG", "id", "time", "tag"):
        table.add_column(header)
    for site, vpg, cp in listed:
        first = (escape(site or ""),) if several else ()
        table.add_row(*first, escape(vpg), cp.checkpoint_id, _when(cp), escape(cp.tag or ""))
    _stdout().print(table)
    return 0


# ---------------------------------------------------------------- tag


@dataclass
class _Request:
    vpg: Vpg
    task_id: str
    place: _Place
    landed: Checkpoint | None = None
    waited_s: float = 0.0


def _tag(args: argparse.Namespace, err: Console) -> int:
    deadline = time.monotonic() + args.timeout
    name = args.name or f"zerto-rewind manual {args.vm} {format_iso(datetime.now(UTC))}"
    with _places(args.vm, err, deadline) as (_settings, places):
        chosen: list[tuple[_Place, Vpg]] = []
        for place in places:
            refs = vm_refs(place.client, args.vm, deadline=deadline)
            ids = dict.fromkeys(ref.vpg_id for ref in refs if place.holds(ref.vpg_id))
            chosen += [(place, place.client.get_vpg(i, deadline=deadline)) for i in ids]
        refusals = [reason for _p, vpg in chosen if (reason := tag_refusal(vpg))]
        for reason in refusals:
            err.print(f"[red]Refused[/red]: {escape(reason)}", highlight=False)
        if refusals:
            return 1
        started, requested_at = time.monotonic(), datetime.now(UTC)
        requests = [
            _Request(v, p.client.tag_checkpoint(v.vpg_id, name, deadline=deadline), p)
            for p, v in chosen
        ]
        with err.status("requesting the tag…") as spinner:
            for req in requests:
                _await_landing(
                    req.place.client, req, name, requested_at, deadline, started, spinner.update
                )
    _print_landed(requests, name)
    return 0


def _await_landing(
    client: ZvmClient,
    req: _Request,
    name: str,
    requested_at: datetime,
    deadline: float,
    started: float,
    show: Callable[[str], None],
) -> None:
    show(f"VPG {escape(req.vpg.name)}: waiting for task {escape(req.task_id)}…")
    task = client.wait_for_task(req.task_id, deadline=deadline)
    if task.failed:
        reason = task.complete_reason or "no reason given"
        msg = f"tag task {req.task_id} on VPG '{req.vpg.name}' ended {task.state_name}: {reason}"
        raise ZvmError(msg)
    while req.landed is None:
        waited = time.monotonic() - started
        show(f"VPG {escape(req.vpg.name)}: waiting for the tag to land ({waited:.0f} s)…")
        cps = client.list_checkpoints(req.vpg.vpg_id, since=requested_at - _SKEW, deadline=deadline)
        req.landed = next((cp for cp in cps if cp.tag == name), None)
        if req.landed is None:
            if time.monotonic() + 1.0 >= deadline:
                raise ZvmTimeout(_not_landed(req, name, requested_at, waited))
            time.sleep(1.0)
    req.waited_s = time.monotonic() - started


def _not_landed(req: _Request, name: str, requested_at: datetime, waited: float) -> str:
    return (
        f"tag {name!r} requested at {format_iso(requested_at)} on VPG '{req.vpg.name}' "
        f"has not landed after {waited:.0f} s; it may still land, "
        "check with `zerto-rewind checkpoints VM --tagged` or raise --timeout"
    )


def _print_landed(requests: list[_Request], name: str) -> None:
    table = Table(title=f"tag {name!r} landed")
    several = any(req.place.site is not None for req in requests)
    for header in (*(("ZVM site",) if several else ()), "VPG", "checkpoint", "time", "tag"):
        table.add_column(header)
    table.add_column("waited")
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
