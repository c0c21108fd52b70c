"""`zerto-rewind log`: the decision table, and what became of pending tags."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime

from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"


def run_log(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    """`zerto-rewind log ARGS` with the sandbox's environment."""
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "log", *args],
        capture_output=True,
        text=True,
        env=box.env(COLUMNS="200"),
        timeout=60,
        check=False,
    )


def pending_fate(box: Sandbox) -> dict[str, str]:
    """The reconciled fate of the (single) pending decision in the log."""
    result = run_log(box, "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    pending = [r for r in records if r["row"] == "pending"]
    assert len(pending) == 1
    fates: list[dict[str, str]] = pending[0]["reconciled"]
    return fates[0]


def wait_until(iso: str, extra_s: float) -> None:
    """Sleep until an ISO time from the log, plus a margin."""
    target = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    time.sleep(max(0.0, target - time.time()) + extra_s)


def test_log_shows_decisions_as_a_table(box: Sandbox) -> None:
    """The table lists each decision with its row, decision and checkpoint."""
    box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    box.run_hook(POWER_OFF, {"name": "sql-paused-1"})
    result = run_log(box)
    assert result.returncode == 0, result.stderr
    checkpoint = box.log_records()[0]["checkpoint_ids"][0]
    for expected in ("confirmed", "failed", "context", "deny", checkpoint, "jp-ubuntu"):
        assert expected in result.stdout


def test_a_pending_tag_is_later_shown_as_landed(slow_aws_box: Sandbox) -> None:
    """Right after a pending decision the log says pending; once the tag lands it says landed."""
    box = slow_aws_box
    box.wait_past_boundary("CMH-AWS-1")
    assert box.run_hook(POWER_OFF, {"name": "win2019-1"}).decision == "deny"
    assert pending_fate(box)["state"] == "pending"
    wait_until(box.log_records()[-1]["expected_at"], extra_s=0.5)
    fate = pending_fate(box)
    assert fate["state"] == "landed"
    assert "checkpoint" in fate["detail"]
    assert "landed" in run_log(box).stdout


def test_a_tag_that_never_lands_is_shown_as_failed(box: Sandbox) -> None:
    """A dropped tag, once overdue, is reported as never having reached the journal."""
    box.write_config(guard={"timeout_s": 2, "overdue_factor": 1.0, "overdue_min_s": 1.0})
    box.control("POST", "/_sim/vpgs/jp-local/tag-behaviour", {"mode": "never"})
    box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    record = box.log_records()[-1]
    assert record["row"] == "pending"
    wait_until(record["expected_at"], extra_s=2.5)
    fate = pending_fate(box)
    assert fate["state"] == "failed"
    assert "never reached the journal" in fate["detail"]


def test_log_without_a_usable_config_still_shows_the_log(box: Sandbox) -> None:
    """A broken config does not hide the log; it is shown unreconciled with a warning."""
    box.run_hook(POWER_OFF, {"name": "sql-paused-1"})
    with open(box.config_path, "w", encoding="utf-8") as fh:
        fh.write("{broken")
    result = run_log(box, "--json")
    assert result.returncode == 0
    assert "config not usable" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["row"] == "failed"
