"""``zerto-rewind log`` at 80 columns: one line per decision, times never split."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from zerto_rewind.cli.log_cmd import _table
from zerto_rewind.core.reconcile import TagFate


def record(n: int, **extra: Any) -> dict[str, Any]:
    """A confirmed decision with a long tool name, two VMs and a UUID checkpoint."""
    return {
        "time": f"2025-05-0{n}T12:34:5{n}.123Z",
        "tool": "mcp__vsphere__reconfigure_vm_hardware_settings",
        "vms": ["web-prod-frontend-01.lab.local", "db-02"],
        "row": "confirmed",
        "decision": "context",
        "checkpoint_ids": ["6f3a9c1e-aaaa-bbbb-cccc-1234567890ab"],
        "tags": [f"zerto-rewind t{n}"],
        "elapsed_ms": 4210,
        **extra,
    }


def render(records: list[dict[str, Any]], width: int, fates: dict[str, TagFate]) -> list[str]:
    out = io.StringIO()
    _table(Console(file=out, width=width, force_terminal=False), records, fates, "/var/log/zr.log")
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, 100, 60])
def test_each_decision_is_one_line_within_the_width(width: int) -> None:
    """Columns are dropped, then cells shortened: never wrapped."""
    records = [record(1), record(2), record(3, row="pending", decision="deny")]
    records.append({"time": "2025-05-04T01:02:03Z", "tool": "Bash", "row": "unlisted"})
    fates = {"zerto-rewind t3": TagFate("zerto-rewind t3", "landed", "landed at 12:40:01 UTC")}
    lines = render(records, width, fates)
    assert max(len(line) for line in lines) <= width
    for time in ("12:34:51", "12:34:52", "12:34:53", "01:02:03"):
        assert sum(time in ln for ln in lines) == 1  # the whole time, on exactly one line
    assert sum("vsphere__" in ln for ln in lines) == 3
    assert sum("context" in ln for ln in lines) == 2  # the decision column is kept


def test_a_wide_console_shows_every_column() -> None:
    """With room, nothing is dropped or shortened."""
    lines = render([record(1)], 200, {})
    text = "\n".join(lines)
    for cell in ("confirmed", "6f3a9c1e-aaaa-bbbb-cccc-1234567890ab", "4.2", "db-02"):
        assert cell in text
