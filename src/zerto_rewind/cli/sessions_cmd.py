"""``zerto-rewind sessions`` and ``zerto-rewind session show ID``: what agent sessions changed.

Read from the decision log (:mod:`zerto_rewind.core.sessions` says what counts as a
change). Every value from the log is shown literally and escaped (a VM or tool name
is the agent's to choose): rich markup is never interpreted, control characters
are shown as escapes. Long names fold onto a second line, never cut: through a pipe
too, where rich would otherwise assume 80 columns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..config.loader import load_settings
from ..config.settings import default_log_path
from ..core.approval_view import visible
from ..core.keys import read_key_file
from ..core.record_mac import RecordMac, state_key_path
from ..core.sessions import SessionSummary, Timeline, list_sessions, parse_since, read_timeline
from ..errors import ConfigError, KeyFileError

__all__ = ["list_main", "session_main"]


def list_main(argv: list[str] | None = None) -> int:
    """``zerto-rewind sessions``: recent sessions, latest activity first."""
    parser = _parser("sessions", "Recent agent sessions, from the decision log.")
    parser.add_argument(
        "--since", help="only activity since: 30m, 12h, 7d or an ISO time (UTC)", default=""
    )
    parser.add_argument(
        "-n", "--limit", type=int, default=20, help="how many sessions (default 20)"
    )
    args = parser.parse_args(argv)
    path = _log_path(args)
    since = parse_since(args.since, time.time()) if args.since else ""
    found = list_sessions(path, since=since, limit=args.limit)
    if args.json:
        print(json.dumps([s.to_json() for s in found], ensure_ascii=False, indent=2))
        return 0
    _sessions_table(_console(), found, path)
    return 0


def session_main(argv: list[str] | None = None) -> int:
    """``zerto-rewind session show ID``: one session's timeline."""
    parser = argparse.ArgumentParser(prog="zerto-rewind session", description=__doc__)
    commands = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = commands.add_parser("show", help="one session's changes, in order")
    _common(show)
    show.add_argument("id", help="the session id, or its start if no other id starts so")
    args = parser.parse_args(argv)
    timeline = read_timeline(_log_path(args), args.id, mac=_state_mac(args))
    if args.json:
        print(json.dumps(timeline.to_json(), ensure_ascii=False, indent=2))
        return 0
    _timeline_table(_console(), timeline)
    return 0


def _parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"zerto-rewind {name}", description=description)
    _common(parser)
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--config", metavar="PATH", help="config file (default: $ZERTO_REWIND_CONFIG)"
    )
    parser.add_argument("--log", help="log file (default: $ZERTO_HOOK_LOG or the config's)")


def _log_path(args: argparse.Namespace) -> str:
    """The log ``zerto-rewind log`` reads: ``--log``, else the config's, else the default."""
    if args.log:
        return str(args.log)
    env = dict(os.environ, ZERTO_REWIND_CONFIG=args.config) if args.config else os.environ
    try:
        return load_settings(env).log_path
    except ConfigError as exc:  # the log is still worth reading: say so and go on without
        if args.config:
            raise  # a config named on the command line must be usable
        sys.stderr.write(f"zerto-rewind: config not usable ({exc}); reading the default log\n")
        return default_log_path(env)


def _state_mac(args: argparse.Namespace) -> RecordMac | None:
    """The state's MAC key, which seals the log's index; None (read the log whole) if
    there is no usable config or key. A reader never creates the key: the guard does."""
    from .log_cmd import _state_dir  # the state directory, with or without a config

    env = dict(os.environ, ZERTO_REWIND_CONFIG=args.config) if args.config else os.environ
    try:
        settings = load_settings(env)
    except ConfigError:
        settings = None
    try:
        key = read_key_file(state_key_path(_state_dir(settings, env)))
    except (KeyFileError, FileNotFoundError):
        return None
    return RecordMac(key=key)


def _console() -> Console:
    # Not a terminal (a pipe, a file): no width to fit, so none is assumed.
    console = Console(highlight=False)
    return console if console.is_terminal else Console(highlight=False, width=200)


# Columns kept on one line (times, counts, decisions): the others share what is left.
_WHOLE = frozenset({"first change", "when (UTC)"})
# A folding column is never narrower than this: a name in 2-letter slices reads badly.
_MIN_WIDTH = 8


def _table(title: str, headers: tuple[str, ...]) -> Table:
    """Names fold onto further lines instead of ending in an ellipsis: never cut."""
    from rich import box

    table = Table(
        title=Text(title),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in headers:
        whole = header in _WHOLE
        table.add_column(
            header, overflow="fold", no_wrap=whole, min_width=None if whole else _MIN_WIDTH
        )
    return table


def _cells(*values: Any) -> list[Text]:
    # Text, never a str: rich would read a VM named `[/]` as markup (and fail on it).
    return [Text(visible("" if v is None else str(v))) for v in values]


def _sessions_table(console: Console, found: list[SessionSummary], path: str) -> None:
    if not found:
        console.print(Text(f"no sessions in {visible(path)}"))
        return
    headers = ("session", "principal", "host", "first change", "last change", "changes", "VMs")
    table = _table(f"sessions, latest first, times in UTC ({path})", headers)
    for s in found:
        first, last = _when(s.first)[:16], _last(s.first, s.last)
        vms = ", ".join(s.vms)
        table.add_row(*_cells(s.session_id, s.principal, s.host, first, last, _counts(s), vms))
    console.print(table)
    console.print(Text("one session's changes: zerto-rewind session show ID"), style="dim")


def _last(first: str, last: str) -> str:
    """The last change: its time alone when on the first change's day."""
    if first[:10] == last[:10]:
        return _when(last)[11:16]
    return _when(last)[:16]


def _counts(summary: SessionSummary) -> str:
    """How many changes, and how many calls were refused (denied, not run, deferred)."""
    if summary.refused:
        return f"{summary.changes} (+{summary.refused} refused)"
    return str(summary.changes)


def _when(value: str) -> str:
    """A log time as a person reads it: ``2026-12-01 08:04:00``; ``—`` if none."""
    return value[:19].replace("T", " ") if value else "—"


def _timeline_table(console: Console, timeline: Timeline) -> None:
    head = (
        f"session {timeline.session_id}: {len(timeline.changes)} change(s), "
        f"principal {timeline.principal or '—'}, host {timeline.host or '—'}"
    )
    console.print(Text(visible(head)))
    headers = (
        "when (UTC)",
        "tool",
        "VMs",
        "decision",
        "result",
        "rewind point",
        "later, by other sessions",
    )
    table = _table("timeline, in order", headers)
    for entry in timeline.entries:
        later = "; ".join(
            f"{_when(o.time)} {o.session_id} {o.tool} {', '.join(o.vms)}" for o in entry.later
        )
        result = entry.result if entry.kind == "change" else entry.kind
        style = "" if entry.kind == "change" else "dim"
        table.add_row(
            *_cells(
                _when(entry.time),
                entry.tool,
                ", ".join(entry.vms),
                entry.decision,
                result,
                entry.rewind_point or "—",
                later or "—",
            ),
            style=style,
        )
    console.print(table)
