"""The scan's review table: one row per tool, so a person can check 94 tools in a minute."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from .heuristics import READ_ONLY, ReviewRow

__all__ = ["render_review"]

_STYLE = {"high": "green", "medium": "yellow", "low": "red"}


def render_review(rows: Sequence[ReviewRow], stream: TextIO, *, server: str) -> None:
    """Write the table (rich) to ``stream``: tool, class, vm_arg, evidence, confidence, notes."""
    from rich.console import Console
    from rich.table import Table

    prefix = f"mcp__{server}__"
    table = Table(title=f"catalog scan of {server!r}: {len(rows)} tools", show_lines=False)
    for column in ("tool", "class", "vm_arg", "evidence", "conf.", "notes"):
        table.add_column(column, overflow="fold")
    for row in rows:
        short = row.tool[len(prefix) :] if row.tool.startswith(prefix) else row.tool
        kind = "read-only" if row.kind == READ_ONLY else "mutating"
        if _touches_host(row):
            kind = "host files"  # a person approves each call that names one
        if row.guessed:
            kind += " (guessed)"
        vm_arg = ", ".join(row.vm_arg) or ("—" if row.kind == READ_ONLY else "none")
        confidence = f"[{_STYLE.get(row.confidence, '')}]{row.confidence}[/]"
        table.add_row(
            short, kind, vm_arg, "; ".join(row.evidence), confidence, "; ".join(row.notes)
        )
    read_only = sum(1 for r in rows if r.kind == READ_ONLY)
    no_vm = sum(1 for r in rows if r.kind != READ_ONLY and not r.vm_arg)
    guessed = sum(1 for r in rows if r.guessed)
    host = sum(1 for r in rows if _touches_host(r))
    console = Console(file=stream, width=max(120, Console(file=stream).width))
    console.print(table)
    console.print(
        f"{read_only} read-only, {len(rows) - read_only} mutating ({no_vm} with no VM argument), "
        f"{guessed} guessed from the name; {host} touch files on the VM server's host (a person "
        "approves those calls). Review before installing."
    )


def _touches_host(row: ReviewRow) -> bool:
    return bool(row.host_paths) or any(e.startswith("host files:") for e in row.evidence)
