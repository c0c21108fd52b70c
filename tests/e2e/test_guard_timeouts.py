"""Timeouts in the real CLI: a hung ZVM against the guard's budget and the host's timeout.

The ZVM hangs through a simulator fault (``vpgs.get`` held without an answer). The guard's
budget comes from the config (4 s) or, to put it *above* the host's timeout, from
``ZERTO_HOOK_GUARD_TIMEOUT`` in Claude Code's environment (read by the hook when it runs, not
by ``install``) — the misconfiguration the timeout tests stand for.
"""

from __future__ import annotations

import json

import pytest

from e2e.fake_anthropic import call
from e2e.guarded import BUDGET_S, MODES, Guarded
from e2e.harness import mcp_tool

POWER_OFF = mcp_tool("power_off_vm")
# The smallest timeout install accepts for a 1 s budget: budget + 10 s margin, rounded up.
HOST_TIMEOUT_S = 11
HANG = {"route": "vpgs.get", "kind": "hang"}


def _hang_the_zvm(guarded: Guarded) -> None:
    guarded.box.control("POST", "/_sim/faults", HANG)


def _install_with_a_short_host_timeout(guarded: Guarded) -> None:
    guarded.configure(timeout_s=1)
    guarded.install("--timeout", str(HOST_TIMEOUT_S))
    assert guarded.handler()["timeout"] == HOST_TIMEOUT_S


@pytest.mark.parametrize("mode", MODES)
def test_guard_budget_below_the_host_timeout_is_a_real_deny(guarded: Guarded, mode: str) -> None:
    """The guard answers first: deny with its own reason, logged, and the call never runs."""
    handler = guarded.handler()
    assert handler["timeout"] > BUDGET_S
    assert handler["onFailure"] == "block"
    _hang_the_zvm(guarded)
    guarded.e2e.script([[call(POWER_OFF, name="jp-ubuntu")], "understood"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.denied_tools == [POWER_OFF]
    assert guarded.vm_actions() == []
    [record] = guarded.log()
    assert (record["row"], record["decision"]) == ("error", "deny")
    assert BUDGET_S * 1000 - 1500 < record["elapsed_ms"] < BUDGET_S * 1000 + 500
    [result] = guarded.e2e.api.tool_results()
    assert result.text == f"PreToolUse:{POWER_OFF} hook error: {record['reason']}"
    assert record["reason"].startswith(f"zerto-rewind denied {POWER_OFF} on jp-ubuntu")
    assert "ZvmTimeout" in record["reason"]
    assert "the call was not run" in record["reason"].lower()
    assert "onFailure" not in result.text  # not the host's blocking-timeout message


@pytest.mark.parametrize("mode", MODES)
def test_host_timeout_below_the_budget_with_on_failure_block_is_blocked(
    guarded: Guarded, mode: str
) -> None:
    """The host kills the hook at its timeout and, with ``onFailure: block``, blocks the call."""
    _install_with_a_short_host_timeout(guarded)
    _hang_the_zvm(guarded)
    guarded.e2e.script([[call(POWER_OFF, name="jp-ubuntu")], "understood"])

    run = guarded.run(mode, env={"ZERTO_HOOK_GUARD_TIMEOUT": "60"})

    assert run.ok, run.describe()
    assert HOST_TIMEOUT_S <= run.duration < HOST_TIMEOUT_S + 15
    assert run.denied_tools == [POWER_OFF]
    assert guarded.vm_actions() == []
    [result] = guarded.e2e.api.tool_results()
    assert result.is_error
    assert 'timed out; blocking because onFailure is "block"' in result.text
    assert guarded.log() == []  # the hook was killed before it could answer


@pytest.mark.parametrize("mode", MODES)
def test_host_timeout_without_on_failure_lets_the_call_run_and_doctor_flags_it(
    guarded: Guarded, mode: str
) -> None:
    """The seed's silent failure: the hook times out, the call runs; ``doctor`` flags the file."""
    # onFailure is removed from the installed settings to stand for an older, hand-made setup
    # (install always writes it).
    _install_with_a_short_host_timeout(guarded)
    settings = guarded.installed()
    del settings["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"]
    guarded.settings_path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    _hang_the_zvm(guarded)
    guarded.e2e.script([[call(POWER_OFF, name="jp-ubuntu")], "done"])

    run = guarded.run(mode, env={"ZERTO_HOOK_GUARD_TIMEOUT": "60"})

    assert run.ok, run.describe()
    assert run.duration >= HOST_TIMEOUT_S
    assert run.permission_denials == []
    assert guarded.vm_actions() == [("jp-ubuntu", "power_off_vm")]  # no checkpoint, yet it ran
    assert guarded.log() == []
    assert guarded.tag_requests() == 0
    [result] = guarded.e2e.api.tool_results()
    assert not result.is_error

    guarded.box.control("DELETE", "/_sim/faults")
    doctor = guarded.zerto_rewind(
        "doctor",
        "--config",
        guarded.box.config_path,
        "--project",
        str(guarded.e2e.project_dir),
        "--json",
        check=False,
    )
    assert doctor.returncode != 0, doctor.stdout
    report = json.loads(doctor.stdout)
    assert report["ok"] is False
    checks = {c["name"]: c for c in report["checks"]}
    failing = sorted(name for name, c in checks.items() if c["status"] == "fail")
    assert failing == ["hook onFailure"], report
    flagged = checks["hook onFailure"]
    assert flagged["status"] == "fail"
    assert str(guarded.settings_path) in flagged["detail"]
    assert '"onFailure": "block"' in flagged["fix"]
