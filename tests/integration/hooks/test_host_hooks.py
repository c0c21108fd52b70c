"""The Codex, Gemini CLI and Copilot CLI hooks, installed and run as each host runs them.

``install host-hook HOST --user`` writes the hook file into a temporary HOME, against
a real guard service (``zerto-rewind gateway --socket`` on the ZVM simulator); the
installed command then runs through ``/bin/sh -c`` with the host's own stdin, and
its stdout and exit code are read as the host reads them. The service runs as the
test's own user, so install records that uid as ``--service-user``.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.service import served, served_box, served_url  # noqa: F401  (fixtures)
from zerto_rewind.cli import install_host_hook
from zerto_rewind.cli import run_command as cli_edge
from zerto_rewind.hostconfig.install.host_hook import hook_command
from zerto_rewind.testing import Sandbox

GUARD_BUDGET_S = 10.0
HOSTS = ("codex", "gemini", "copilot")


def install(host: str, home: Path, *extra: str) -> Path:
    """``zerto-rewind install host-hook HOST --user`` in ``home``; the file it wrote."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    argv = [host, "--user", *extra]
    assert cli_edge("install host-hook", lambda: install_host_hook.main(argv, env)) == 0
    return {
        "codex": home / ".codex" / "hooks.json",
        "gemini": home / ".gemini" / "settings.json",
        "copilot": home / ".copilot" / "hooks" / "zerto-rewind.json",
    }[host]


def installed_command(host: str, path: Path) -> tuple[str, int]:
    """(the hook's command, the host's timeout in seconds) from the file install wrote."""
    data = json.loads(path.read_text())
    if host == "copilot":
        (entry,) = data["hooks"]["preToolUse"]
        return entry["bash"], entry["timeoutSec"]
    event = "PreToolUse" if host == "codex" else "BeforeTool"
    (entry,) = data["hooks"][event]
    handler = entry["hooks"][0]
    return handler["command"], handler["timeout"] // (1000 if host == "gemini" else 1)


def stdin_for(host: str, tool: str, args: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """The host's own pre-tool payload for ``tool`` (a catalog name or a host tool)."""
    if tool.startswith("mcp__"):
        _, server, name = tool.split("__", 2)
        tool = {"codex": tool, "gemini": f"mcp_{server}_{name}", "copilot": f"{server}-{name}"}[
            host
        ]
    if host == "codex":
        return {
            "session_id": "cx-1",
            "turn_id": "t1",
            "hook_event_name": "PreToolUse",
            "model": "scripted",
            "tool_name": tool,
            "tool_input": args,
            "tool_use_id": "call_1",
            "cwd": str(cwd),
            "permission_mode": "bypassPermissions",
        }
    if host == "gemini":
        body = {
            "session_id": "gm-1",
            "hook_event_name": "BeforeTool",
            "tool_name": tool,
            "tool_input": args,
            "cwd": str(cwd),
            "timestamp": "2026-12-02T06:00:00Z",
        }
        if tool.startswith("mcp_"):
            server, name = tool[4:].split("_", 1)
            body["mcp_context"] = {"server_name": server, "tool_name": name}
        return body
    return {
        "sessionId": "cp-1",
        "timestamp": 1796191200000,
        "cwd": str(cwd),
        "toolName": tool,
        "toolArgs": json.dumps(args),
    }


def run_hook(
    host: str, command: str, tool: str, args: dict[str, Any], cwd: Path, home: Path
) -> tuple[str, str, float]:
    """Run the command as the host does; (decision, its text, seconds).

    decision: ``none`` (nothing on stdout, exit 0), ``context``, ``deny`` or ``ask``.
    """
    started = time.monotonic()
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(stdin_for(host, tool, args, cwd)),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        cwd=cwd,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    if not proc.stdout.strip():
        return "none", "", elapsed
    out = json.loads(proc.stdout)
    if host == "codex":
        specific = out["hookSpecificOutput"]
        if "permissionDecision" in specific:
            return specific["permissionDecision"], specific["permissionDecisionReason"], elapsed
        return "context", specific["additionalContext"], elapsed
    if host == "gemini":
        if "decision" in out:
            return out["decision"], out["reason"], elapsed
        return "context", out["hookSpecificOutput"]["additionalContext"], elapsed
    if "permissionDecision" in out:
        return out["permissionDecision"], out["permissionDecisionReason"], elapsed
    return "context", out["additionalContext"], elapsed


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.mark.parametrize("host", HOSTS)
def test_the_service_decides_each_row_in_the_hosts_own_form(
    host: str, service: str, box: Sandbox, home: Path, tmp_path: Path
) -> None:
    """Confirmed → runs, with the checkpoint as context; paused → deny;
    unknown VM → deny on Codex and Copilot, ask on Gemini; read-only → nothing."""
    command, _ = installed_command(host, install(host, home, "--service", service))
    before = box.tag_requests("jp-local")
    decision, text, _ = run_hook(
        host, command, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"}, tmp_path, home
    )
    assert box.tag_requests("jp-local") == before + 1
    assert decision == "context"
    assert "a Zerto checkpoint protects" in text
    decision, text, _ = run_hook(
        host, command, "mcp__vsphere__power_off_vm", {"name": "sql-paused-1"}, tmp_path, home
    )
    assert decision == "deny"
    assert "paused-vpg" in text
    decision, text, _ = run_hook(
        host, command, "mcp__vsphere__power_off_vm", {"name": "ghost-vm"}, tmp_path, home
    )
    assert decision == ("ask" if host == "gemini" else "deny")
    assert "ghost-vm" in text
    assert run_hook(host, command, "mcp__vsphere__list_vms", {}, tmp_path, home)[0] == "none"


def test_gemini_prompt_as_deny_for_unattended_runs(
    service: str, home: Path, tmp_path: Path
) -> None:
    command, _ = installed_command(
        "gemini", install("gemini", home, "--service", service, "--prompt-as", "deny")
    )
    decision, text, _ = run_hook(
        "gemini", command, "mcp__vsphere__power_off_vm", {"name": "ghost-vm"}, tmp_path, home
    )
    assert decision == "deny"
    assert "an unattended Gemini run cannot ask" in text


FILE_WRITES = {
    "codex": (
        "apply_patch",
        lambda p: {
            "command": f"*** Begin Patch\n*** Update File: {p}\n@@\n-a\n+b\n*** End Patch\n"
        },
    ),
    "gemini": ("write_file", lambda p: {"file_path": p, "content": "{}"}),
    "copilot": ("create", lambda p: {"path": p, "file_text": "{}"}),
}
SHELLS = {"codex": "Bash", "gemini": "run_shell_command", "copilot": "bash"}


@pytest.mark.parametrize("host", HOSTS)
def test_writes_to_the_guards_files_are_denied_through_each_hosts_tools(
    host: str, service: str, box: Sandbox, home: Path, tmp_path: Path
) -> None:
    """The guard's config (``--protect``) and the hook file itself, by file tool and by shell."""
    hook_path = install(host, home, "--service", service, "--protect", box.config_path)
    command, _ = installed_command(host, hook_path)
    tool, args = FILE_WRITES[host]
    for target in (box.config_path, str(hook_path)):
        decision, text, _ = run_hook(host, command, tool, args(target), tmp_path, home)
        assert decision == "deny", target
        assert "The guard's own files are not changed from an agent session" in text
    shell = f"echo '{{}}' > {shlex.quote(str(hook_path))}"
    decision, text, _ = run_hook(host, command, SHELLS[host], {"command": shell}, tmp_path, home)
    assert decision == "deny"
    assert "the host settings that hold the guard's hook" in text
    # Other work goes on: a file of the project, a harmless command.
    other = str(tmp_path / "notes.txt")
    assert run_hook(host, command, tool, args(other), tmp_path, home)[0] == "none"
    assert run_hook(host, command, SHELLS[host], {"command": "ls -la"}, tmp_path, home)[0] == (
        "none"
    )


def direct_command(host: str, service: str, service_user: str | None, budget: int = 15) -> str:
    """The hook's command as install builds it, for a service install could not reach."""
    opts = {"service": service, **({"service_user": service_user} if service_user else {})}
    return hook_command(
        sys.executable, host, opts, budget_s=budget, servers=["vsphere"], prompt_as=None, protect=[]
    )


@pytest.mark.parametrize("host", HOSTS)
def test_a_service_that_is_down_is_a_deny(host: str, home: Path, tmp_path: Path) -> None:
    service = f"unix:{tmp_path / 'absent.sock'}"
    command = direct_command(host, service, str(os.geteuid()))
    decision, text, _ = run_hook(
        host, command, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"}, tmp_path, home
    )
    assert decision == "deny"
    assert "could not decide" in text
    assert "absent.sock" in text


@pytest.mark.parametrize("host", HOSTS)
def test_a_socket_served_by_another_user_gets_nothing(
    host: str, service: str, home: Path, tmp_path: Path
) -> None:
    command = direct_command(host, service, "65534")
    decision, text, _ = run_hook(
        host, command, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"}, tmp_path, home
    )
    assert decision == "deny"
    assert f"is served by uid {os.geteuid()}" in text
    assert "not by the guard service's user" in text


@pytest.mark.parametrize("host", HOSTS)
def test_a_service_that_never_answers_is_a_deny_before_the_budget(
    host: str, home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "mute.sock"
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(path))
    mute.listen(4)
    try:
        command = direct_command(host, f"unix:{path}", str(os.geteuid()), budget=2)
        decision, text, elapsed = run_hook(
            host, command, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"}, tmp_path, home
        )
    finally:
        mute.close()
    assert decision == "deny"
    assert elapsed < 2.0 + 1.0  # interpreter start-up is the slack
    assert "within" in text


@pytest.mark.parametrize("host", HOSTS)
def test_the_host_timeout_is_above_the_budget(host: str, service: str, home: Path) -> None:
    """Each host lets the call run when its own timeout fires first."""
    command, timeout = installed_command(host, install(host, home, "--service", service))
    words = shlex.split(command)
    budget = float(words[words.index("--budget") + 1])
    assert budget > GUARD_BUDGET_S
    assert timeout > budget


def test_a_hook_without_a_service_identity_sends_nothing(
    service: str, home: Path, tmp_path: Path
) -> None:
    """No --service-user: deny before a byte is sent, saying how the hook is reinstalled."""
    command = direct_command("codex", service, None)
    decision, text, _ = run_hook(
        "codex", command, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"}, tmp_path, home
    )
    assert decision == "deny"
    assert "no service identity (--service-user)" in text
    assert f"zerto-rewind install host-hook codex --service {service}" in text
