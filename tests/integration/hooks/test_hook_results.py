"""The hook's post events record each change's result: the hook as a subprocess, against the
simulator, read back with ``zerto-rewind session show --json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"
SESSION = "results-session-0001"


def post(
    box: Sandbox,
    tool: str,
    tool_input: dict[str, Any],
    tool_use_id: str | None,
    *,
    event: str = "PostToolUse",
    response: Any = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The hook as Claude Code runs it after the call (the same command as before it)."""
    payload: dict[str, Any] = {
        "session_id": SESSION,
        "cwd": box.root,
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": response if response is not None else {"content": []},
    }
    if tool_use_id is not None:
        payload["tool_use_id"] = tool_use_id
    run = box.run_hook(tool, tool_input, stdin=json.dumps(payload).encode(), env=env)
    return subprocess.CompletedProcess([], run.returncode, run.stdout, run.stderr)


def session_show(box: Sandbox) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "session", "show", SESSION, "--json"],
        capture_output=True,
        text=True,
        env=box.env(),
        timeout=120,
        check=True,
    )
    changes: list[dict[str, Any]] = json.loads(proc.stdout)["entries"]
    return changes


def test_each_change_shows_its_result_in_session_show(box: Sandbox) -> None:
    """A change that succeeded and one that failed: each has its result line, naming the
    VM, the VPG, the checkpoint, the principal and the host; session show shows both."""
    for use_id, vm in (("toolu_ok", "jp-ubuntu"), ("toolu_bad", "jp-ubuntu")):
        pre = box.run_hook(POWER_OFF, {"name": vm}, session_id=SESSION, tool_use_id=use_id)
        assert pre.decision == "context", pre.stderr
    ok = post(box, POWER_OFF, {"name": "jp-ubuntu"}, "toolu_ok")
    bad = post(box, POWER_OFF, {"name": "jp-ubuntu"}, "toolu_bad", event="PostToolUseFailure")
    for run in (ok, bad):
        assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    lines = {line["tool_use_id"]: line for line in box.result_records()}
    assert {k: v["result"] for k, v in lines.items()} == {
        "toolu_ok": "succeeded",
        "toolu_bad": "failed",
    }
    decision = next(r for r in box.log_records() if r.get("tool_use_id") == "toolu_ok")
    line = lines["toolu_ok"]
    assert line["session_id"] == SESSION
    assert line["vms"] == ["jp-ubuntu"]
    assert line["vpgs"] == decision["vpgs"] == ["jp-local"]
    assert line["checkpoint_ids"] == decision["checkpoint_ids"]
    assert line["tags"] == decision["tags"]
    assert line["landed_at"] == decision["landed_at"]
    assert line["client"].startswith("hook:")
    assert line["host"] == "claude-code"
    shown = {e["tool_use_id"]: e["result"] for e in session_show(box)}
    assert shown == {"toolu_ok": "succeeded", "toolu_bad": "failed"}


def test_an_mcp_error_answer_is_a_failed_result(box: Sandbox) -> None:
    """PostToolUse with an ``isError`` answer: the change failed."""
    box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, session_id=SESSION, tool_use_id="toolu_err")
    run = post(box, POWER_OFF, {"name": "jp-ubuntu"}, "toolu_err", response={"isError": True})
    assert run.returncode == 0, run.stderr
    assert [line["result"] for line in box.result_records()] == ["failed"]


def test_without_a_tool_use_id_the_call_is_matched_by_its_arguments(box: Sandbox) -> None:
    """No tool_use_id from the host: the decision and the result share one made of the
    session, the tool and the arguments; session show joins them."""
    payload = {
        "session_id": SESSION,
        "hook_event_name": "PreToolUse",
        "tool_name": POWER_OFF,
        "tool_input": {"name": "jp-ubuntu"},
    }
    pre = box.run_hook(POWER_OFF, {}, stdin=json.dumps(payload).encode())
    assert pre.decision == "context", pre.stderr
    run = post(box, POWER_OFF, {"name": "jp-ubuntu"}, None)
    assert (run.returncode, run.stderr) == (0, "")
    [line] = box.result_records()
    assert line["tool_use_id"].startswith("args-")
    assert "jp-ubuntu" not in line["tool_use_id"]
    assert [e["result"] for e in session_show(box)] == ["succeeded"]


def test_a_read_only_call_records_nothing(box: Sandbox) -> None:
    """The post event of a read-only call: silent, no line, no log file."""
    run = post(box, "mcp__vsphere__get_vm", {"name": "jp-ubuntu"}, "toolu_ro")
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert box.log_records() == []


def test_a_denied_call_gets_no_result_and_an_asked_one_does(box: Sandbox) -> None:
    """Only a change the guard let through gets a result line: a call asked of the person
    at the host ran if its post event comes; a denied one never ran."""
    denied = box.run_hook(
        POWER_OFF, {"name": "sql-paused-1"}, session_id=SESSION, tool_use_id="toolu_denied"
    )
    asked = box.run_hook(
        POWER_OFF, {"name": "ghost-vm"}, session_id=SESSION, tool_use_id="toolu_asked"
    )
    assert (denied.decision, asked.decision) == ("deny", "ask")
    for use_id, vm in (("toolu_denied", "sql-paused-1"), ("toolu_asked", "ghost-vm")):
        run = post(box, POWER_OFF, {"name": vm}, use_id)
        assert (run.returncode, run.stderr) == (0, "")
    assert [(r["tool_use_id"], r["result"]) for r in box.result_records()] == [
        ("toolu_asked", "succeeded")
    ]


def test_a_call_the_log_does_not_hold_is_not_recorded_and_said(box: Sandbox) -> None:
    """No decision line for the call: nothing written, a note on stderr, the host goes on."""
    run = post(box, POWER_OFF, {"name": "jp-ubuntu"}, "toolu_never_decided")
    assert (run.returncode, run.stdout) == (0, "")
    assert "no decision line" in run.stderr
    assert box.result_records() == []


def test_a_failure_to_record_never_blocks_and_is_reported(box: Sandbox) -> None:
    """A log that cannot be read or written: exit 1 (Claude Code shows stderr and goes
    on), no decision on stdout."""
    blocker = os.path.join(box.root, "not-a-dir")
    with open(blocker, "w") as fh:
        fh.write("x")
    env = box.env(ZERTO_HOOK_LOG=os.path.join(blocker, "decisions.log"))
    run = post(box, POWER_OFF, {"name": "jp-ubuntu"}, "toolu_x", env=env)
    assert (run.returncode, run.stdout) == (1, "")
    assert "was not recorded" in run.stderr
    assert "The call itself ran" in run.stderr
