"""``zerto-rewind doctor`` with the Codex, Gemini CLI and Copilot CLI hooks installed.

The hooks are written by ``install host-hook`` into a temporary HOME and asked
about by the doctor, against a real guard service (``gateway --socket`` on the
ZVM simulator). With no Claude Code hook, the Claude Code hook checks must not
run; each host hook's service, identity and timeout are checked instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.service import served, served_url  # noqa: F401  (fixtures)
from zerto_rewind.cli import install_host_hook
from zerto_rewind.cli import run_command as cli_edge
from zerto_rewind.cli.doctor import Check, run_checks

GUARD_BUDGET_S = 10.0
CLAUDE_HOOK_CHECKS = ("hook installed", "host settings", "mcp servers")


def install(argv: list[str], home: Path) -> None:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    assert cli_edge("install host-hook", lambda: install_host_hook.main(argv, env)) == 0


def doctor(home: Path, host: str | None = None) -> list[Check]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    return run_checks(settings_files=[], env=env, project_dirs=[], host=host)


def named(checks: list[Check], name: str) -> list[Check]:
    return [c for c in checks if c.name == name]


def test_every_host_hook_is_checked_and_no_claude_hook_check_runs(
    service: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    for host in ("codex", "gemini", "copilot"):
        install([host, "--user", "--service", service], home)
    checks = doctor(home)
    assert not [c for c in checks if c.name in CLAUDE_HOOK_CHECKS], checks
    for host in ("codex", "gemini", "copilot"):
        (found,) = named(checks, f"{host} hook")
        assert found.status == "pass", found
    assert [c.status for c in named(checks, "guard service")] == ["pass"] * 3
    assert [c.status for c in named(checks, "hook timeout")] == ["pass"] * 3
    assert [c.status for c in named(checks, "service identity")] == ["pass"] * 3
    assert [c.status for c in named(checks, "hook results")] == ["pass"] * 3
    (setup,) = named(checks, "gateway setup")
    assert setup.status == "pass"
    assert "Copilot CLI" in setup.detail
    # --host narrows to that host's hook.
    narrowed = doctor(home, host="gemini")
    assert [c.name for c in narrowed if c.name.endswith(" hook")] == ["gemini hook"]


def test_a_host_timeout_at_the_budget_and_a_dead_service_fail(service: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    install(["copilot", "--user", "--service", service], home)
    path = home / ".copilot" / "hooks" / "zerto-rewind.json"
    data = json.loads(path.read_text())
    (entry,) = data["hooks"]["preToolUse"]
    entry["timeoutSec"] = 5  # below the hook's budget: Copilot would let the call run
    entry["bash"] = entry["bash"].replace(service, f"unix:{tmp_path / 'no-such.sock'}")
    path.write_text(json.dumps(data))
    checks = doctor(home, host="copilot")
    (timeout,) = named(checks, "hook timeout")
    assert timeout.status == "fail"
    assert "lets the call run" in timeout.detail
    (reach,) = named(checks, "guard service")
    assert reach.status == "fail"
    assert "gateway --socket" in reach.fix
    assert "no-such.sock" in reach.detail


def test_a_hook_not_registered_after_the_call_is_a_results_warning(
    service: str, tmp_path: Path
) -> None:
    """Copilot's file without the post events (as installed before results were recorded):
    "hook results" warns, naming the events and the reinstall."""
    home = tmp_path / "home"
    install(["copilot", "--user", "--service", service], home)
    path = home / ".copilot" / "hooks" / "zerto-rewind.json"
    data = json.loads(path.read_text())
    del data["hooks"]["postToolUseFailure"]
    path.write_text(json.dumps(data))
    (results,) = named(doctor(home, host="copilot"), "hook results")
    assert results.status == "warn"
    assert "postToolUseFailure" in results.detail
    assert "not recorded" in results.detail
    assert "install host-hook copilot" in results.fix


def test_an_unreadable_hook_file_fails_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "hooks.json").write_text("{not json")
    checks = doctor(home, host="codex")
    (bad,) = named(checks, "codex hook")
    assert bad.status == "fail"
    assert "hooks.json" in bad.detail


@pytest.mark.parametrize("host", ["codex", "gemini", "copilot"])
def test_a_host_with_neither_hook_nor_gateway_fails_the_setup(host: str, tmp_path: Path) -> None:
    checks = doctor(tmp_path / "home", host=host)
    (setup,) = named(checks, "gateway setup")
    assert setup.status == "fail"
