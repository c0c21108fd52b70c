"""``zerto-rewind status | checkpoints | tag``: thin adapters over the ZVM client.

Each command parses its arguments, calls the library and renders the result
(rich tables on stdout, progress and errors on stderr). Errors from the
library are reported once, here, as ``ErrorType: message`` with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import re
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

from ..cadence import Cadence, observed_cadence, resolve_cadence
from ..config import Settings, load_settings
from ..errors import ApiError, NotFound, ZertoRewindError, ZvmError, ZvmTimeout
from ..zvm.auth import TokenCache
from ..zvm.client import ZvmClient
from ..zvm.models import Checkpoint, VmRef, Vpg, format_iso, parse_iso, site_kind, tag_refusal

__all__ = ["checkpoints", "status", "tag"]

# Checkpoints listed to measure a cadence: this many site-cadences back.
_CADENCE_WINDOW_STEPS = 12
# Tag landings are searched from a little before the request (clock skew).
_SKEW = timedelta(seconds=60)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

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
        type=parse_since,
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
    err = Console(stderr=True)
    try:
        return command(args, err)
    except ZertoRewindError as exc:
        err.print(f"[red]{type(exc).__name__}[/red]: {escape(str(exc))}", highlight=False)
        return 1


# ---------------------------------------------------------------- shared plumbing


@contextmanager
def _session() -> Iterator[tuple[Settings, ZvmClient]]:
    settings = load_settings()
    with ZvmClient(settings.zvm, token_cache=TokenCache(settings.state_dir)) as client:
        yield settings, client


def _refs(client: ZvmClient, vm: str) -> list[VmRef]:
    refs = client.find_vms(vm)
    if not refs:
        url = f"{client.settings.url}/v1/vms?vmName={vm}"
        msg = (
            f"no VPG protects a VM named {vm!r} on the ZVM at {client.settings.url}; "
            "check the name as the Zerto UI shows it"
        )
        raise NotFound(msg, method="GET", url=url, status=None)
    return refs


def _entity_types(client: ZvmClient) -> list[str] | None:
    try:
        return client.entity_types()
    except ApiError:
        return None  # an older ZVM without the lookup: the built-in table applies


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _when(cp: Checkpoint | None) -> str:
    return cp.timestamp.strftime("%Y-%m-%d %H:%M:%S UTC") if cp else "—"


def _cp_json(cp: Checkpoint | None) -> dict[str, Any] | None:
    if cp is None:
        return None
    return {"id": cp.cp_id, "timestamp": format_iso(cp.timestamp), "tag": cp.tag}


# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class _Row:
    vm: str
    vpg: Vpg
    kind: str
    cadence: Cadence
    latest: Checkpoint | None

    def to_json(self) -> dict[str, Any]:
        v = self.vpg
        return {
            "vm": self.vm,
            "vpg": v.name,
            "vpg_id": v.vpg_id,
            "site_kind": self.kind,
            "status": v.status,
            "status_name": v.status_text,
            "sub_status": v.sub_status,
            "sub_status_name": v.sub_status_text,
            "actual_rpo_s": v.actual_rpo_s,
            "cadence_s": self.cadence.seconds,
            "cadence_source": self.cadence.source,
            "latest_checkpoint": _cp_json(self.latest),
            "tag_refusal": tag_refusal(v),
        }


def _status(args: argparse.Namespace, err: Console) -> int:
    with _session() as (settings, client):
        refs = _refs(client, args.vm)
        names = _entity_types(client)
        rows = [_status_row(settings, client, ref, names) for ref in refs]
    if args.json:
        print(json.dumps({"vm": args.vm, "vpgs": [r.to_json() for r in rows]}, indent=2))
        return 0
    out = _stdout()
    out.print(_status_table(rows))
    for row in rows:
        reason = tag_refusal(row.vpg)
        if reason:
            out.print(f"[yellow]cannot tag[/yellow]: {escape(reason)}")
    return 0


def _status_row(settings: Settings, client: ZvmClient, ref: VmRef, names: list[str] | None) -> _Row:
    guard = settings.guard
    vpg = client.get_vpg(ref.vpg_id)
    kind = site_kind(vpg.protected_entity, names, guard.site_types)
    window = _CADENCE_WINDOW_STEPS * guard.site_cadence_s.get(kind, 630.0)
    since = datetime.now(UTC) - timedelta(seconds=window)
    cps = client.list_checkpoints(vpg.vpg_id, since=since)
    observed = observed_cadence([c.timestamp.timestamp() for c in cps])
    cadence = resolve_cadence(
        vpg.name, observed, kind, overrides=guard.cadence_s, site_defaults=guard.site_cadence_s
    )
    latest = cps[-1] if cps else client.checkpoint_stats(vpg.vpg_id)[1]
    return _Row(ref.vm_name, vpg, kind, cadence, latest)


def _status_table(rows: list[_Row]) -> Table:
    table = Table(title=f"VM {rows[0].vm}")
    for header in ("VPG", "site", "status", "substatus", "RPO", "cadence", "latest checkpoint"):
        table.add_column(header)
    for row in rows:
        v, c = row.vpg, row.cadence
        rpo = f"{v.actual_rpo_s} s" if v.actual_rpo_s is not None else "—"
        latest = f"{row.latest.cp_id} {_when(row.latest)}" if row.latest else "—"
        if row.latest and row.latest.tag:
            latest += f" [{escape(row.latest.tag)}]"
        table.add_row(
            escape(v.name),
            row.kind,
            v.status_text,
            v.sub_status_text,
            rpo,
            f"{c.seconds:g} s ({c.source})",
            escape(latest),
        )
    return table


# ---------------------------------------------------------------- checkpoints


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``10m`` / ``2h`` / ``90s`` / ``1d`` back from now, or an ISO-8601 time."""
    now = now or datetime.now(UTC)
    match = _DURATION.match(text.strip())
    if match:
        return now - timedelta(seconds=float(match[1]) * _UNITS[match[2]])
    try:
        return parse_iso(text)
    except ValueError:
        msg = f"{text!r} is neither a duration (10m, 2h) nor an ISO-8601 time"
        raise argparse.ArgumentTypeError(msg) from None


def _checkpoints(args: argparse.Namespace, err: Console) -> int:
    since: datetime = args.since
    listed: list[tuple[VmRef, Checkpoint]] = []
    with _session() as (_settings, client):
        for ref in _refs(client, args.vm):
            cps = client.list_checkpoints(ref.vpg_id, since=since)
            listed += [(ref, cp) for cp in cps if cp.tag or not args.tagged]
    if args.json:
        rows = [{"vpg": ref.vpg_name, **(_cp_json(cp) or {})} for ref, cp in listed]
        print(
            json.dumps({"vm": args.vm, "since": format_iso(since), "checkpoints": rows}, indent=2)
        )
        return 0
    table = Table(title=f"VM {args.vm}: checkpoints since {format_iso(since)}")
    for header in ("VPG", "id", "time", "tag"):
        table.add_column(header)
    for ref, cp in listed:
        table.add_row(escape(ref.vpg_name), cp.cp_id, _when(cp), escape(cp.tag or ""))
    _stdout().print(table)
    return 0


# ---------------------------------------------------------------- tag


@dataclass
class _Request:
    vpg: Vpg
    task_id: str
    landed: Checkpoint | None = None
    waited_s: float = 0.0


def _tag(args: argparse.Namespace, err: Console) -> int:
    deadline = time.monotonic() + args.timeout
    name = args.name or f"zerto-rewind manual {args.vm} {format_iso(datetime.now(UTC))}"
    with _session() as (_settings, client):
        vpgs = [client.get_vpg(ref.vpg_id, deadline=deadline) for ref in _refs(client, args.vm)]
        refusals = [reason for reason in map(tag_refusal, vpgs) if reason]
        for reason in refusals:
            err.print(f"[red]Refused[/red]: {escape(reason)}", highlight=False)
        if refusals:
            return 1
        started, requested_at = time.monotonic(), datetime.now(UTC)
        requests = [
            _Request(v, client.tag_checkpoint(v.vpg_id, name, deadline=deadline)) for v in vpgs
        ]
        with err.status("requesting the tag…") as spinner:
            for req in requests:
                _await_landing(client, req, name, requested_at, deadline, started, spinner.update)
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
    for header in ("VPG", "checkpoint", "time", "tag", "waited"):
        table.add_column(header)
    for req in requests:
        cp = req.landed
        assert cp is not None  # _await_landing returns only once it landed
        table.add_row(
            escape(req.vpg.name), cp.cp_id, _when(cp), escape(cp.tag or ""), f"{req.waited_s:.1f} s"
        )
    _stdout().print(table)
    sys.stdout.flush()
