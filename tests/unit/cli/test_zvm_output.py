"""status' table and tag's progress, rendered without a ZVM: wrapping and plain lines."""

from __future__ import annotations

import io

from rich.console import Console

from zerto_rewind.cli.tag_progress import TagProgress
from zerto_rewind.cli.zvm_cmds import _Row, _status_table
from zerto_rewind.recovery.protection import VpgProtection

LONG_VPG = "hq-application-tier-with-a-long-name"


def _vpg(name: str) -> VpgProtection:
    return VpgProtection(
        vpg=name, vpg_id="vpg-1", vm_id="vm-1", protected_site="hq", recovery_site="dr",
        site_kind="vcenter", status="MeetingSLA", status_code=1, sub_status="None",
        sub_status_code=0, actual_rpo_s=7, configured_rpo_s=300, history_minutes=60,
        cadence_s=10.0, cadence_source="observed", latest_checkpoint=None,
        latest_tagged_checkpoint=None, can_tag=True, tag_refusal=None,
        failover_test_running=False, guard_tag=None,
    )  # fmt: skip


def test_at_80_columns_through_a_pipe_names_wrap_instead_of_being_cut() -> None:
    """No ellipsis: every character of the VPG name and the status is in the output."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=False, color_system=None)
    rows = [_Row("hq-site-with-long-name", _vpg(LONG_VPG), None)]
    console.print(_status_table("web-01", rows))
    out = buffer.getvalue()
    assert "…" not in out
    body = [line.split("│") for line in out.splitlines() if line.count("│") > 2]
    assert "".join(cells[1].strip() for cells in body) == "hq-site-with-long-name"
    assert "".join(cells[2].strip() for cells in body) == LONG_VPG
    assert "".join(cells[4].strip() for cells in body) == "MeetingSLA"
    assert max(len(line) for line in out.splitlines()) <= 80


def test_progress_off_a_terminal_is_plain_lines_naming_the_vm() -> None:
    """A pipe gets a line when a VPG starts waiting, one per interval, and one when it lands."""
    buffer = io.StringIO()
    err = Console(file=buffer, width=200, force_terminal=False)
    now = [0.0]
    with TagProgress(err, "web-01", every_s=10.0, clock=lambda: now[0]) as progress:
        progress.update("web-vpg", 0.0, 30.0, "the tag task runs")
        now[0] = 5.0
        progress.update("web-vpg", 5.0, 30.0, "waiting for the tag to land")  # too soon
        now[0] = 40.0
        progress.update("web-vpg", 40.0, 30.0, "waiting for the tag to land")
        progress.landed("web-vpg", 41.0)
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "VM web-01, VPG web-vpg: the tag task runs, 0 s of ~30 s expected",
        "VM web-01, VPG web-vpg: waiting for the tag to land, 40 s of ~30 s expected "
        "(later than expected)",
        "VM web-01, VPG web-vpg: the tag landed after 41 s",
    ]


def test_progress_on_a_terminal_draws_a_bar_against_the_expected_time() -> None:
    buffer = io.StringIO()
    err = Console(file=buffer, width=120, force_terminal=True, color_system=None)
    with TagProgress(err, "web-01") as progress:
        progress.update("web-vpg", 12.0, 30.0, "waiting for the tag to land")
        progress.landed("web-vpg", 13.0)
    out = buffer.getvalue()
    assert "VM web-01, VPG web-vpg" in out
    assert "of ~30 s" in out
