"""``zerto-rewind log --verify``: the decision log's hash chain, checked from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"


def run_verify(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "log", "--verify", *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def bare_env(tmp_path: Path, log: Path) -> dict[str, str]:
    """No config at all (HOME is empty): the log path comes from ZERTO_HOOK_LOG alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERTO_", "XDG_"))}
    return {**env, "HOME": str(tmp_path / "home"), "ZERTO_HOOK_LOG": str(log)}


def test_hook_decisions_verify_and_a_tampered_line_is_named(tmp_path: Path) -> None:
    """Decisions the real hook logged verify; turning a deny into a none is caught."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as box:
        box.write_config()
        box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
        box.run_hook(POWER_OFF, {"name": "sql-paused-1"})  # denied: not replicating
        box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
        good = run_verify(box.env())
        assert good.returncode == 0
        # the hook anchored its first line (no anchor yet); the next two are not due
        assert good.stdout.startswith("log OK: 3 lines, chain intact; anchored at seq 1 (")
        lines = Path(box.log_path).read_bytes().splitlines()
        assert json.loads(lines[1])["decision"] == "deny"
        lines[1] = lines[1].replace(b'"decision":"deny"', b'"decision":"none"')
        Path(box.log_path).write_bytes(b"".join(line + b"\n" for line in lines))
        bad = run_verify(box.env())
        assert bad.returncode == 1
        assert bad.stdout.startswith("log BROKEN at line 3: prev does not match line 2 — ")
        assert "edited" in bad.stdout


def test_a_deleted_line_from_zerto_hook_log(tmp_path: Path) -> None:
    """Without a config the path comes from ZERTO_HOOK_LOG; a deleted line is a gap."""
    log = tmp_path / "decisions.log"
    for n in range(5):
        write_record(str(log), {"tool": "mcp__vsphere__power_off", "row": "confirmed", "n": n})
    env = bare_env(tmp_path, log)
    good = run_verify(env)
    assert good.returncode == 0
    # written with no guard settings: chained, not anchored, and young and short
    assert good.stdout.startswith("log OK: 5 lines, chain intact; not anchored yet (5 new lines")
    lines = log.read_bytes().splitlines()
    log.write_bytes(b"".join(line + b"\n" for line in lines[:1] + lines[2:]))
    bad = run_verify(env)
    assert bad.returncode == 1
    assert bad.stdout.startswith("log BROKEN at line 2: the line with seq 2 is missing — ")


def test_legacy_lines_a_missing_log_and_the_log_option(tmp_path: Path) -> None:
    """Lines from before chaining are counted; a missing log is not reported OK."""
    log = tmp_path / "decisions.log"
    log.write_text('{"tool": "Bash", "row": "unlisted"}\n')
    write_record(str(log), {"tool": "Bash", "row": "unlisted"})
    env = bare_env(tmp_path, tmp_path / "elsewhere.log")
    run = run_verify(env, "--log", str(log))
    assert run.returncode == 0
    assert run.stdout.startswith(
        "log OK: 2 lines, chain intact (1 older line before it, written before chaining "
        "existed); not anchored yet (1 new line,"
    )
    missing = run_verify(env)
    assert missing.returncode == 1
    assert missing.stdout.startswith("log MISSING: ")


def test_a_cut_log_of_the_standalone_hook_fails_verify(tmp_path: Path) -> None:
    """The hook (a process per call) anchors from the file it finds; a cut tail is named."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as box:
        box.write_config(log_anchor={"every_lines": 2})
        for _ in range(5):
            box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
        good = run_verify(box.env())
        assert good.returncode == 0, good.stdout
        assert "anchored at seq 5 (" in good.stdout  # lines 1, 3 and 5
        lines = Path(box.log_path).read_bytes().splitlines()
        Path(box.log_path).write_bytes(b"".join(line + b"\n" for line in lines[:2]))
        cut = run_verify(box.env())
        assert cut.returncode == 1
        assert cut.stdout.startswith("log CUT: the log ends at seq 2, but the anchor of ")
        assert "3 lines cut from its end" in cut.stdout
