"""``zerto-rewind log``: recent decisions as a table, what became of pending tags, and
``--verify``, which checks the log's hash chain and its latest signed anchor.

Every value is shown literally: a VM name is the agent's to choose, so rich markup in
it is never interpreted and control characters are shown as escapes."""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..config.loader import load_settings
from ..config.settings import Settings, default_log_path, home_dir
from ..core.call_result import RESULT_EVENT
from ..core.decisions_log import iter_records, verify
from ..core.reconcile import TagFate, reconcile
from ..errors import ConfigError, StateError, ZertoRewindError
from . import report_warning

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Show recent decisions; reconcile pending tags against the state and the ZVM."""
    args = _parser().parse_args(argv)
    env = dict(os.environ, ZERTO_REWIND_CONFIG=args.config) if args.config else os.environ
    settings = _settings(env, verifying=args.verify)
    path = args.log or (settings.log_path if settings else default_log_path(env))
    if args.verify:
        return _verify(path, settings, args.anchor, env)
    records = _recent(path, args.limit, args.session)
    fates = {} if args.no_reconcile else _reconcile(records, settings, ask_zvm=not args.offline)
    if args.json:
        for record in records:
            print(json.dumps(_with_fates(record, fates), ensure_ascii=False))
    else:
        _table(Console(), records, fates, path)
    if args.follow:
        return _follow(path, args.json)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zerto-rewind log", description=__doc__)
    parser.add_argument(
        "-n", "--limit", type=int, default=20, help="how many recent decisions (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--session",
        metavar="ID",
        help="only this agent session's lines (its id, or the start of it)",
    )
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new decisions")
    parser.add_argument("--config", help="config file (default: $ZERTO_REWIND_CONFIG)")
    parser.add_argument("--log", help="log file (default: $ZERTO_HOOK_LOG or the config's)")
    parser.add_argument(
        "--offline", action="store_true", help="reconcile from the state directory only"
    )
    parser.add_argument("--no-reconcile", action="store_true", help="show the log as written")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the log's hash chain and its latest anchor instead of showing it "
        "(exit 1 if the log is broken, cut, rewritten or not anchored)",
    )
    parser.add_argument(
        "--anchor",
        metavar="PATH",
        help="with --verify: check against this anchor copy (kept elsewhere) instead of "
        "the guard's own",
    )
    return parser


def _recent(path: str, limit: int, session: str | None) -> list[dict[str, Any]]:
    """The last ``limit`` records, of one session (an id or its start) if ``session``."""
    records = iter_records(path)
    if session:
        records = (r for r in records if str(r.get("session_id") or "").startswith(session))
    return list(collections.deque(records, maxlen=max(0, limit)))


def _verify(path: str, settings: Settings | None, anchor_copy: str | None, env: Any) -> int:
    """``--verify``: one line saying whether the log holds; 0 if it does, 1 if not."""
    try:
        report = verify(path)
        if report.ok and report.lines:
            from .log_verify import check_anchors

            anchored = check_anchors(path, settings, anchor_copy, _state_dir(settings, env))
    except StateError as exc:  # --verify answers on stdout in one line, whatever happened
        print(f"log NOT CHECKED: {exc}")
        return 1
    if not report.exists:
        print(
            f"log MISSING: there is no file {path} — nothing was logged there yet, or it "
            "was deleted; check the path (--log, $ZERTO_HOOK_LOG or the config's log)"
        )
        return 1
    problem = report.problem
    if problem is not None:
        print(f"log BROKEN at line {problem.line}: {problem.what} — {problem.todo}")
        return 1
    if report.legacy and report.legacy == report.lines:
        print(
            f"log OK: {report.lines} lines, none chained yet (all written before chaining "
            "existed; the next decision starts the chain)"
        )
        return 0
    if not report.lines:
        print("log OK: 0 lines, chain intact")
        return 0
    if not anchored.ok:
        print(anchored.line)
        return 1
    older = ""
    if report.legacy:
        lines = "line" if report.legacy == 1 else "lines"
        older = f" ({report.legacy} older {lines} before it, written before chaining existed)"
    print(f"log OK: {report.lines} lines, chain intact{older}; {anchored.line}")
    return 0


def _state_dir(settings: Settings | None, env: Any) -> str:
    """The state directory, as the config's parser finds it when there is no config."""
    if settings is not None:
        return settings.state_dir
    named = str(env.get("ZERTO_REWIND_STATE_DIR", "")).strip()
    if named:
        return os.path.abspath(os.path.expanduser(named))
    base = env.get("XDG_STATE_HOME") or os.path.join(home_dir(env), ".local", "state")
    return os.path.join(base, "zerto-rewind")


def _settings(env: Any, *, verifying: bool) -> Settings | None:
    try:
        return load_settings(env)
    except ConfigError as exc:  # the log is still worth showing: say so and go on without
        doing = (
            "verifying $ZERTO_HOOK_LOG or the default log"
            if verifying
            else "showing the log without reconciling"
        )
        report_warning("log", f"config not usable ({exc}); {doing}")
        return None


def _reconcile(
    records: list[dict[str, Any]], settings: Settings | None, *, ask_zvm: bool
) -> dict[str, TagFate]:
    if settings is None or not any(r.get("row") == "pending" for r in records):
        return {}
    from ..core.state_store import open_state

    state = open_state(settings.state_connection_url(), settings.state_dir)
    if not ask_zvm:
        return reconcile(records, state)
    from ..core.guard import Guard
    from ..errors import ZvmError

    guard = Guard(settings, state=state)
    estate = guard.estate()

    def client_of(site: str | None) -> Any:
        # A tag is asked of the ZVM that took it (its record's site); a one-ZVM tag has none.
        if site is None:
            return estate.client(estate.first)
        if site not in estate.names:
            msg = f"site {site} is no longer in the config's zvms"
            raise ZvmError(msg)
        return estate.client(site)

    try:
        return reconcile(records, state, clients=client_of)
    except ZertoRewindError as exc:  # fall back to what the state directory knows
        report_warning("log", f"ZVM not asked ({exc}); reconciling from state only")
        return reconcile(records, state)
    finally:
        guard.close()


def _with_fates(record: dict[str, Any], fates: dict[str, TagFate]) -> dict[str, Any]:
    found = [fates[t] for t in record.get("tags") or [] if t in fates]
    if record.get("row") == "pending" and found:
        return {
            **record,
            "reconciled": [{"tag": f.tag, "state": f.state, "detail": f.detail} for f in found],
        }
    return record


# Columns, and the order they are dropped in when the console is too narrow (a
# table that wraps splits times and tool names across lines; dropping reads better).
_COLUMNS = (
    "date",
    "time",
    "session",
    "tool",
    "VMs",
    "row",
    "decision",
    "checkpoint",
    "s",
    "what became of it",
)
_DROP_ORDER = ("s", "row", "what became of it", "checkpoint", "date")
# Columns that may be shortened (with …) once nothing more can be dropped.
_FLEXIBLE = ("session", "tool", "VMs", "what became of it", "checkpoint")
_PAD = 2


def _table(
    console: Console, records: list[dict[str, Any]], fates: dict[str, TagFate], path: str
) -> None:
    """One line per decision: narrow consoles lose columns, then long cells are shortened."""
    from rich import box

    if not records:
        console.print(Text(f"no decisions logged in {visible(path)}"))
        return
    rows = [_cells(record, fates) for record in records]
    natural = {c: max(len(c), *(len(r[c]) for r in rows)) for c in _COLUMNS}
    shown = [c for c in _COLUMNS if c in ("date", "time", "tool") or any(r[c] for r in rows)]
    for column in _DROP_ORDER:
        if sum(natural[c] + _PAD for c in shown) <= console.width:
            break
        if column in shown:
            shown.remove(column)
    widths = _fit(shown, natural, console.width)
    table = Table(
        title=Text(f"decisions, times in UTC ({visible(path)})"),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for column in shown:
        table.add_column(column, no_wrap=True, overflow="ellipsis", width=widths[column])
    for record, cells in zip(records, rows, strict=True):
        # Text, never a str: rich would read a VM named `[/]` as markup (and fail on it)
        table.add_row(*(Text(cells[c]) for c in shown), style=_style(record))
    console.print(table)


def _fit(shown: list[str], natural: dict[str, int], total: int) -> dict[str, int]:
    """Column widths within ``total``: fixed columns whole, the flexible ones share the rest."""
    widths = {c: natural[c] for c in shown}
    flexible = [c for c in shown if c in _FLEXIBLE]
    excess = sum(w + _PAD for w in widths.values()) - total
    while excess > 0 and flexible:
        widest = max(flexible, key=lambda c: widths[c])
        if widths[widest] <= 6:
            break
        widths[widest] -= 1
        excess -= 1
    return widths


def _cells(record: dict[str, Any], fates: dict[str, TagFate]) -> dict[str, str]:
    later = "; ".join(
        f"{f.state}: {f.detail}" for t in record.get("tags") or [] if (f := fates.get(t))
    )
    cells = {
        "date": str(record.get("time", ""))[:10],
        "time": str(record.get("time", ""))[11:19],
        "session": str(record.get("session_id") or ""),
        "tool": str(record.get("tool", "")).removeprefix("mcp__"),
        "VMs": ", ".join(str(vm) for vm in record.get("vms") or []),
        "row": str(record.get("row", "")),
        "decision": _decision(record),
        "checkpoint": ", ".join(str(c) for c in record.get("checkpoint_ids") or []),
        "s": f"{(record.get('elapsed_ms') or 0) / 1000:.1f}",
        "what became of it": later if record.get("row") == "pending" else _answer(record),
    }
    return {column: visible(text) for column, text in cells.items()}


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on shown as an escape:
    C0/C1 controls and DEL as ``\\xNN``, format characters (bidi overrides, zero-width)
    as ``<U+XXXX>``. A backslash stays as it is: this is for reading, not parsing."""
    if text.isprintable():
        return text
    import unicodedata

    out = []
    for char in text:
        if char.isprintable() or char == " ":
            out.append(char)
        elif ord(char) < 0x100 and unicodedata.category(char) == "Cc":
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"<U+{ord(char):04X}>")
    return "".join(out)


def _decision(record: dict[str, Any]) -> str:
    """The decision; a forwarded call's result line (core.call_result) shows its result."""
    if record.get("event_type") == RESULT_EVENT:
        return f"result: {record.get('result')}"
    return str(record.get("decision", ""))


def _answer(record: dict[str, Any]) -> str:
    """A person's part: an approval request's event, or what a prompt's answer was."""
    answer = str(record.get("answer") or "")
    request, approver = record.get("approval_id"), record.get("approver")
    if not answer:
        return ""
    text = f"{answer} {request}" if request else answer
    return f"{text} by {approver}" if approver else text


def _style(record: dict[str, Any]) -> str:
    return {
        "deny": "red",
        "prompt": "yellow",
        "defer": "yellow",
        "context": "green",
        "approval": "cyan",
    }.get(str(record.get("decision")), "")


def _follow(path: str, as_json: bool) -> int:
    console = Console()
    position = os.path.getsize(path) if os.path.exists(path) else 0
    try:
        while True:
            time.sleep(0.5)
            if not os.path.exists(path) or os.path.getsize(path) <= position:
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                fh.seek(position)
                chunk = fh.read()
                position = fh.tell()
            for line in chunk.splitlines():
                _print_line(console, line, as_json)
    except KeyboardInterrupt:
        return 0


def _print_line(console: Console, line: str, as_json: bool) -> None:
    if as_json:
        print(line, flush=True)
        return
    try:
        record = json.loads(line)
    except ValueError:
        return
    if not isinstance(record, dict):
        return
    vms = ", ".join(str(vm) for vm in record.get("vms") or [])
    row, decision = record.get("row"), _decision(record)
    text = visible(f"{record.get('time')} {record.get('tool')} {vms} {row} → {decision}")
    console.print(Text(text), style=_style(record), highlight=False)
