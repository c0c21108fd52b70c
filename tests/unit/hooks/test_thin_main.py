"""The hook's entry in-process: options, blocking errors, and the check of its own files.

Shell and file calls never reach the service (the URL here names no socket: asking
it would be a deny naming it), so each case below is decided by the hook alone.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.hooks.thin import main

NO_SERVICE = "unix:/nonexistent/guard.sock"


def run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    payload: Any,
    env: dict[str, str],
) -> tuple[int, str, str]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code = main(argv, env)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def hook(host: str, *extra: str) -> list[str]:
    return ["hook", "--host", host, "--service", NO_SERVICE, "--service-user", "0", *extra]


@pytest.mark.parametrize(
    ("host", "payload"),
    [
        (
            "codex",
            {"tool_name": "Bash", "tool_input": {"command": "echo {} > ~/.codex/hooks.json"}},
        ),
        (
            "codex",
            {
                "tool_name": "apply_patch",
                "tool_input": {
                    "command": "*** Begin Patch\n*** Update File: .codex/config.toml\n*** End Patch"
                },
            },
        ),
        (
            "gemini",
            {
                "tool_name": "write_file",
                "tool_input": {"file_path": "PROJECT/.gemini/settings.json"},
            },
        ),
        (
            "gemini",
            {
                "tool_name": "run_shell_command",
                "tool_input": {"command": "sed -i s/x/y/ ~/.gemini/settings.json"},
            },
        ),
        (
            "copilot",
            {"toolName": "create", "toolArgs": {"path": "HOME/.copilot/hooks/off.json"}},
        ),
        ("copilot", {"toolName": "bash", "toolArgs": {"command": "rm -rf ~/.copilot/hooks"}}),
        (
            "copilot",
            {"toolName": "edit", "toolArgs": {"path": "PROJECT/.claude/settings.json"}},
        ),
    ],
    ids=[
        "codex-bash",
        "codex-apply_patch",
        "gemini-write_file",
        "gemini-shell",
        "copilot-create",
        "copilot-bash",
        "copilot-claude-settings",
    ],
)
def test_a_write_to_the_hooks_own_files_is_denied_without_asking_the_service(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    home: Path,
    host: str,
    payload: dict[str, Any],
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    text = json.dumps(payload).replace("PROJECT", str(project)).replace("HOME", str(home))
    body = json.loads(text)
    body["cwd"] = str(project)
    code, out, _ = run(monkeypatch, capsys, hook(host), body, {"HOME": str(home)})
    assert code == 0
    answer = json.loads(out)
    answer = answer.get("hookSpecificOutput", answer)  # Codex nests it
    assert (answer.get("permissionDecision") or answer.get("decision")) == "deny"
    reason = answer.get("permissionDecisionReason") or answer.get("reason")
    assert "the host settings that hold the guard's hook" in reason
    assert NO_SERVICE[5:] not in reason  # decided here; the service was never asked


@pytest.mark.parametrize(
    ("host", "payload"),
    [
        ("codex", {"tool_name": "Bash", "tool_input": {"command": "ls -la ~/.codex"}}),
        ("gemini", {"tool_name": "write_file", "tool_input": {"file_path": "notes.txt"}}),
        ("copilot", {"toolName": "bash", "toolArgs": {"command": "cat ~/.copilot/hooks/z.json"}}),
    ],
)
def test_other_shell_and_file_calls_pass_silently(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    home: Path,
    tmp_path: Path,
    host: str,
    payload: dict[str, Any],
) -> None:
    payload["cwd"] = str(tmp_path)
    assert run(monkeypatch, capsys, hook(host), payload, {"HOME": str(home)}) == (0, "", "")


def test_a_protect_path_from_the_install_is_denied(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    home: Path,
    tmp_path: Path,
) -> None:
    gateway = tmp_path / "gateway.json"
    gateway.write_text("{}")
    payload = {"tool_name": "Bash", "tool_input": {"command": f"cp /tmp/x {gateway}"}}
    _, out, _ = run(
        monkeypatch, capsys, hook("codex", "--protect", str(gateway)), payload, {"HOME": str(home)}
    )
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "a file the guard's install protects" in reason


def test_an_mcp_call_asks_the_service_and_its_absence_is_a_deny(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    home: Path,
) -> None:
    payload = {"toolName": "vsphere-power_off_vm", "toolArgs": {"name": "jp"}}
    code, out, _ = run(
        monkeypatch, capsys, hook("copilot", "--servers", "vsphere"), payload, {"HOME": str(home)}
    )
    answer = json.loads(out)
    assert (code, answer["permissionDecision"]) == (0, "deny")
    assert "could not decide" in answer["permissionDecisionReason"]
    assert NO_SERVICE[5:] in answer["permissionDecisionReason"]


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["--host", "codex"], "--service URL is required"),
        (["--host", "vim", "--service", NO_SERVICE], "--host must be one of"),
        (
            ["--host", "codex", "--service", NO_SERVICE, "--prompt-as", "ask"],
            "--prompt-as for codex",
        ),
        (
            ["--host", "copilot", "--service", NO_SERVICE, "--prompt-as", "ask"],
            "--prompt-as for copilot",
        ),
        (["--host", "gemini", "--service", NO_SERVICE, "--budget", "0"], "--budget must be"),
        (["--host", "gemini", "--service", NO_SERVICE, "--bogus", "1"], "unexpected arguments"),
    ],
)
def test_bad_options_block_the_call(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expect: str,
) -> None:
    code, out, err = run(monkeypatch, capsys, argv, {"tool_name": "x"}, {})
    assert code == 2
    assert expect in err
    if "gemini" in argv:
        assert json.loads(out)["decision"] == "deny"


@pytest.mark.parametrize("host", ["codex", "gemini", "copilot"])
def test_bad_stdin_blocks_in_the_hosts_form(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    code, out, err = run(monkeypatch, capsys, hook(host), b"{not json", {})
    assert code == 2
    assert "not valid JSON" in err
    if host != "codex":
        answer = json.loads(out)
        assert (answer.get("decision") or answer.get("permissionDecision")) == "deny"


# ------------------------------------------------------------ Claude Code, the same runner


def test_without_host_it_is_claude_codes_thin_hook(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command `install claude-code --service` writes has no --host: Claude Code's form,
    and its MCP call, every tool alike, is asked of the service (here: none, so a deny)."""
    payload = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}
    argv = ["hook", "--service", NO_SERVICE, "--service-user", "0", "--budget", "20"]
    code, out, _ = run(monkeypatch, capsys, argv, payload, {})
    answer = json.loads(out)["hookSpecificOutput"]
    assert (code, answer["permissionDecision"]) == (0, "deny")
    assert answer["permissionDecisionReason"].startswith("zerto-rewind denied Bash: the guard")


def test_claude_codes_bad_stdin_and_options_block_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Claude Code's blocking form: exit 2, the reason on stderr, nothing on stdout."""
    code, out, err = run(monkeypatch, capsys, ["hook", "--service", NO_SERVICE], b"[]", {})
    assert (code, out) == (2, "")
    assert "must be a JSON object" in err
    code, out, err = run(monkeypatch, capsys, ["hook", "--config", "/c"], {"tool_name": "x"}, {})
    assert (code, out) == (2, "")
    assert "unexpected arguments ['--config']" in err


def test_a_post_event_the_service_cannot_record_blocks_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the call, a service that cannot be reached: nothing on stdout, stderr says the
    result was not recorded, and the exit code is the host's non-blocking one."""
    payload = {"hook_event_name": "PostToolUse", "tool_name": "mcp__v__power_off", "tool_input": {}}
    code, out, err = run(monkeypatch, capsys, ["hook", "--service", NO_SERVICE], payload, {})
    assert (code, out) == (1, "")
    assert "the result of mcp__v__power_off was not recorded" in err
    copilot = {"toolName": "v-power_off", "toolArgs": {}, "toolResult": {"resultType": "success"}}
    code, out, err = run(monkeypatch, capsys, hook("copilot", "--servers", "v"), copilot, {})
    assert (code, out) == (0, "")  # Copilot: what a post hook's non-zero exit does is unknown
    assert "not recorded" in err
