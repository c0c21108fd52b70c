"""`defer` with two calls in one turn: what Claude Code 2.1.328 really does.

The hook defers both calls. The run stops with only the *last* one reported as
deferred; `--resume` asks the hook again for that one alone, and the first call
is dropped — it never runs, guarded or not. Safe (nothing runs without the
guard), but an intended change is lost, which is why `guard.on_pending: defer`
is documented for single-call headless runs and `deny` stays the default.
"""

from __future__ import annotations

import pytest

from e2e.fake_anthropic import call
from e2e.harness import E2ESession, mcp_tool
from e2e.throwaway_hook import throwaway_hook

POWER_OFF = mcp_tool("power_off_vm")


@pytest.mark.parametrize("mode", ["bypassPermissions", "default"])
def test_two_deferred_calls_in_one_turn(e2e: E2ESession, mode: str) -> None:
    """Neither deferred call runs; on resume only the last is re-asked, the first is dropped."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"defer": True}})
    e2e.script([[call(POWER_OFF, name="web-01"), call(POWER_OFF, name="web-02")], "done"])
    extra = [] if mode == "bypassPermissions" else ["--allowedTools", "mcp__vsphere__*"]

    first = e2e.run(
        "Power off both.", settings=hook.settings, permission_mode=mode, extra_args=extra
    )

    assert first.stop_reason == "tool_deferred", first.describe()
    assert first.deferred_tool_use["input"] == {"name": "web-02"}
    assert e2e.actions() == [], "a deferred call must not run"
    asked = [c["tool_input"]["name"] for c in hook.calls()]
    assert asked == ["web-01", "web-02"]

    hook.set_rules({POWER_OFF: {"allow": "checkpoint landed"}})
    second = e2e.run(
        None,
        settings=hook.settings,
        permission_mode=mode,
        resume=first.session_id,
        extra_args=extra,
    )

    assert second.ok, second.describe()
    assert [a["vm"] for a in e2e.actions()] == ["web-02"]
    assert [c["tool_input"]["name"] for c in hook.calls()] == ["web-01", "web-02", "web-02"]
