"""Hook commands installed before the hooks package keep working, and install replaces them.

Users' settings files hold ``python -c "from zerto_rewind.claude_code.hook import run;
run()" hook …`` (and ``claude_code.thin_hook``, ``agent_hooks.hook``): each still runs
its hook, as a host runs it, and a new install recognises it as ours.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from zerto_rewind.hostconfig.hooks import _ours
from zerto_rewind.hostconfig.install.settings_file import is_our_hook, is_thin_hook, merge
from zerto_rewind.testing import Sandbox

OLD_STANDALONE = "from zerto_rewind.claude_code.hook import run; run()"
OLD_THIN = "from zerto_rewind.claude_code.thin_hook import run; run()"
OLD_HOST_HOOK = "from zerto_rewind.agent_hooks.hook import run; run()"
NO_SERVICE = "unix:/nonexistent/guard.sock"


def run(
    code: str, args: list[str], payload: dict[str, Any], env: dict[str, str] | None = None
) -> Any:
    return subprocess.run(
        [sys.executable, "-c", code, "hook", *args],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_old_standalone_command_guards_and_records(box: Sandbox) -> None:
    """A read-only call: silent. A change: a checkpoint; its post event: its result."""
    env = box.env()
    call = {
        "session_id": "compat-1",
        "tool_use_id": "toolu_c1",
        "hook_event_name": "PreToolUse",
        "tool_name": "mcp__vsphere__power_off_vm",
        "tool_input": {"name": "jp-ubuntu"},
    }
    quiet = run(OLD_STANDALONE, [], {**call, "tool_name": "mcp__vsphere__get_vm"}, env)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"", b"")
    change = run(OLD_STANDALONE, [], call, env)
    assert change.returncode == 0, change.stderr
    assert "additionalContext" in json.loads(change.stdout)["hookSpecificOutput"]
    after = run(OLD_STANDALONE, [], {**call, "hook_event_name": "PostToolUse"}, env)
    assert (after.returncode, after.stdout, after.stderr) == (0, b"", b"")
    results = box.result_records()
    assert [(r["tool_use_id"], r["result"]) for r in results] == [("toolu_c1", "succeeded")]


def test_the_old_thin_commands_still_ask_the_service_and_fail_closed() -> None:
    """No service there: each denies in its host's own form (Claude Code, then Gemini)."""
    call = {"hook_event_name": "PreToolUse", "tool_name": "mcp__v__power_off", "tool_input": {}}
    thin = run(OLD_THIN, ["--service", NO_SERVICE, "--service-user", "0", "--budget", "20"], call)
    decision = json.loads(thin.stdout)["hookSpecificOutput"]
    assert (thin.returncode, decision["permissionDecision"]) == (0, "deny")
    gemini_call = {**call, "hook_event_name": "BeforeTool", "tool_name": "mcp_v_power_off"}
    host = run(OLD_HOST_HOOK, ["--host", "gemini", "--service", NO_SERVICE, "--servers", "v"],
               gemini_call)  # fmt: skip
    assert (host.returncode, json.loads(host.stdout)["decision"]) == (0, "deny")


def test_install_recognises_an_old_command_as_ours_and_replaces_it() -> None:
    """A reinstall over an old entry leaves one entry, the new one."""
    old = {"type": "command", "command": f"/v/bin/python -c '{OLD_STANDALONE}' hook --config /c"}
    thin = {"type": "command", "command": f"/v/bin/python -c '{OLD_THIN}' hook --service u"}
    host = {"type": "command", "command": f"/v/bin/python -c '{OLD_HOST_HOOK}' hook --host codex"}
    assert is_our_hook(old)
    assert is_our_hook(thin)
    assert is_thin_hook(thin)
    assert not is_thin_hook(old)
    assert _ours(host)
    new = {"matcher": "m", "hooks": [{"type": "command", "command": "python -c "
           "'from zerto_rewind.hooks.standalone import run; run()' hook --config /c"}]}  # fmt: skip
    merged = merge({"hooks": {"PreToolUse": [{"matcher": "m", "hooks": [old]}]}}, new)
    assert merged["hooks"]["PreToolUse"] == [new]
