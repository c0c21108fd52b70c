"""``zerto-rewind sessions`` and ``session show`` over decisions the real hook logged.

The hook runs as installed, against the embedded ZVM simulator (real TLS); the
commands run as their own processes, reading the log the config names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_two_sessions_from_real_hook_decisions(tmp_path: Path) -> None:
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as box:
        box.write_config()
        box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, session_id="sess-one", tool_use_id="a1")
        box.run_hook(POWER_OFF, {"name": "sql-paused-1"}, session_id="sess-one")  # denied
        box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, session_id="sess-two", tool_use_id="b1")
        env = box.env()

        listed = cli(env, "sessions", "--json")
        assert listed.returncode == 0, listed.stderr
        sessions = {s["session_id"]: s for s in json.loads(listed.stdout)}
        assert set(sessions) == {"sess-one", "sess-two"}
        assert (sessions["sess-one"]["changes"], sessions["sess-one"]["refused"]) == (1, 1)
        assert sessions["sess-one"]["vms"] == ["jp-ubuntu"]
        assert sessions["sess-one"]["host"] == "hook"

        shown = cli(env, "session", "show", "sess-o", "--json")
        assert shown.returncode == 0, shown.stderr
        timeline = json.loads(shown.stdout)
        change, denied = timeline["entries"]
        assert (change["kind"], denied["kind"]) == ("change", "denied")
        assert change["checkpoint"]["checkpoint_ids"]  # the hook's confirmed checkpoint
        assert change["rewind_point"].startswith("checkpoint ")
        assert change["result"] == "not recorded"
        assert [o["session_id"] for o in change["later_by_other_sessions"]] == ["sess-two"]

        table = cli(env, "session", "show", "sess-one", "--config", box.config_path)
        assert table.returncode == 0, table.stderr
        assert "jp-ubuntu" in table.stdout
        assert "sess-two" in table.stdout  # the later change, by the other session

        logged = cli(env, "log", "--session", "sess-two", "--no-reconcile")
        assert logged.returncode == 0, logged.stderr
        assert "sess-two" in logged.stdout
        assert "sess-one" not in logged.stdout

        unknown = cli(env, "session", "show", "sess-x")
        assert unknown.returncode == 1
        assert "UsageError: no session 'sess-x'" in unknown.stderr
        assert "zerto-rewind sessions" in unknown.stderr
        ambiguous = cli(env, "session", "show", "sess-")
        assert ambiguous.returncode == 1
        assert "several session ids" in ambiguous.stderr
