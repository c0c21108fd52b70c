"""``install claude-code --service`` and ``--managed`` against a real guard service on a socket."""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from support.service import served, served_box, served_url  # noqa: F401  (fixtures)
from support.users import reachable_dir, unix_user
from zerto_rewind.cli import install_claude_code
from zerto_rewind.cli import run_command as cli_edge
from zerto_rewind.cli.doctor import run_checks
from zerto_rewind.errors import ConfigError
from zerto_rewind.hooks.thin import LAUNCH_CODE
from zerto_rewind.hostconfig.hook_command import HookCommand
from zerto_rewind.hostconfig.install.catalog_client import fetch_catalog, service_options
from zerto_rewind.hostconfig.install.managed import managed_config_path
from zerto_rewind.hostconfig.install.matcher import compile_matcher
from zerto_rewind.hostconfig.install.settings_file import (
    MANAGED_SETTINGS,
    is_thin_hook,
    managed_settings_file,
)
from zerto_rewind.testing import Sandbox


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    """``install claude-code`` behind the CLI's error edge, as ``zerto-rewind install`` runs it."""
    return cli_edge("install claude-code", lambda: install_claude_code.main(argv, env))


GUARD_BUDGET_S = 12.0


def only_hook(path: Path) -> dict[str, Any]:
    (entry,) = json.loads(path.read_text())["hooks"]["PreToolUse"]
    return dict(entry)


def run_command(command: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any] | None:
    """Run an installed hook command through the shell, as Claude Code does."""
    payload = {"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": tool,
               "tool_input": tool_input, "tool_use_id": "toolu_1"}  # fmt: skip
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hookSpecificOutput"] if proc.stdout.strip() else None


def test_the_catalog_endpoint_gives_the_services_budget(service: str) -> None:
    with pytest.raises(ConfigError, match="no service identity"):
        fetch_catalog(service_options(service))  # install and doctor check the socket too
    remote = fetch_catalog(service_options(service, service_user=str(os.geteuid())))
    assert remote.guard_timeout_s == GUARD_BUDGET_S
    assert remote.catalog.tools  # names only: no vm_arg crosses


def test_install_service_writes_a_thin_hook_matched_on_the_services_catalog(
    service: str, box: Sandbox, tmp_path: Path
) -> None:
    """No config, no secret on this side; the matcher is the service's; the hook asks it."""
    project = tmp_path / "project"
    project.mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}  # no ZERTO_* at all
    argv = ["claude-code", "--project", str(project), "--service", service, "--force"]
    assert main(argv, env) == 0
    settings = project / ".claude" / "settings.json"
    entry = only_hook(settings)
    handler = entry["hooks"][0]
    assert is_thin_hook(handler)
    assert entry["matcher"] == compile_matcher(box.settings().catalog)
    words = shlex.split(handler["command"])
    assert words[:4] == [os.path.abspath(sys.executable), "-P", "-c", LAUNCH_CODE]
    assert words[words.index("--service") + 1] == service
    # The service's uid, as its socket's owner: the service runs as this test's user here.
    assert words[words.index("--service-user") + 1] == str(os.stat(service[5:]).st_uid)
    assert words[words.index("--service-user") + 1] == str(os.geteuid())
    budget = float(words[words.index("--budget") + 1])
    assert budget > GUARD_BUDGET_S  # the service answers before the hook gives up
    assert handler["timeout"] >= budget + 10  # and the host waits for the hook
    assert handler["onFailure"] == "block"
    assert "--config" not in words
    # The installed command, run as Claude Code runs it, gets the service's decision.
    decided = run_command(handler["command"], "mcp__vsphere__power_off_vm", {"name": "nope"})
    assert decided is not None
    assert decided["permissionDecision"] in ("ask", "deny")
    assert run_command(handler["command"], "mcp__vsphere__list_vms", {}) is None
    # After the call, the same command records the result (the catalog's mutating tools).
    hooks = json.loads(settings.read_text())["hooks"]
    for event in ("PostToolUse", "PostToolUseFailure"):
        (post,) = hooks[event]
        assert (post["matcher"], post["hooks"][0]["command"]) == (
            entry["matcher"], handler["command"])  # fmt: skip
        assert "onFailure" not in post["hooks"][0]
    checks = run_checks(settings_files=[str(settings)], env=env, project_dirs=[])
    (results,) = [c for c in checks if c.name == "hook results"]
    assert results.status == "pass", results
    # Twice changes nothing.
    before = settings.read_text()
    assert main(argv, env) == 0
    assert settings.read_text() == before


def test_an_unreachable_service_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    argv = ["claude-code", "--project", str(project), "--service", f"unix:{tmp_path}/no.sock"]
    assert main(argv, {"HOME": str(tmp_path)}) == 1
    assert not (project / ".claude").exists()


def test_plain_http_and_a_relative_socket_are_refused(tmp_path: Path) -> None:
    for url in ("http://127.0.0.1:8750", "unix:guard.sock"):
        assert main(["claude-code", "--user", "--service", url], {"HOME": str(tmp_path)}) == 1


def test_managed_service_install_writes_root_owned_policy_and_config(
    service: str, box: Sandbox, tmp_path: Path
) -> None:
    """--managed --service --config: managed settings 0644 root, the service's config 0600 root."""
    root = tmp_path / "root"
    managed = Path(managed_settings_file(str(root)))
    managed.parent.mkdir(parents=True)
    managed.write_text(json.dumps({"env": {"KEEP": "1"}}))
    argv = ["claude-code", "--managed", "--root", str(root), "--service", service,
            "--config", box.config_path, "--allow-managed-hooks-only"]  # fmt: skip
    assert main(argv, box.env()) == 0
    data = json.loads(managed.read_text())
    assert data["allowManagedHooksOnly"] is True
    assert data["env"] == {"KEEP": "1"}  # other keys kept
    handler = data["hooks"]["PreToolUse"][0]["hooks"][0]
    assert is_thin_hook(handler)
    assert "--service-user 0" in handler["command"]  # the service is root's here
    st = managed.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
    assert stat.S_IMODE(managed.parent.stat().st_mode) == 0o755
    backups = list(managed.parent.glob("managed-settings.json.bak-*"))
    assert len(backups) == 1  # what it replaced
    config = Path(managed_config_path(str(root)))
    assert config.read_bytes() == Path(box.config_path).read_bytes()
    cst = config.stat()
    assert (cst.st_uid, cst.st_gid, stat.S_IMODE(cst.st_mode)) == (0, 0, 0o600)


def test_managed_standalone_install_points_the_pinned_hook_at_the_root_copy(
    box: Sandbox, tmp_path: Path
) -> None:
    """--managed --config without a service: the hook names /etc/zerto-rewind/config.json."""
    root = tmp_path / "root"
    argv = ["claude-code", "--managed", "--root", str(root), "--config", box.config_path]
    assert main(argv, box.env()) == 0
    config = managed_config_path(str(root))
    handler = only_hook(Path(managed_settings_file(str(root))))["hooks"][0]
    words = shlex.split(handler["command"])
    assert words[words.index("--config") + 1] == config
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o644  # the hook reads it as the agent
    assert os.stat(config).st_uid == 0


def test_managed_standalone_refuses_a_config_holding_a_secret(box: Sandbox, tmp_path: Path) -> None:
    """The agent's hook must read it, so the agent could read the secret: refused."""
    cfg = tmp_path / "inline.json"
    data = box.config()
    data["zvm"] = {**data["zvm"], "client_secret": "s3cret"}
    del data["zvm"]["client_secret_env"]
    cfg.write_text(json.dumps(data))
    cfg.chmod(0o600)
    root = tmp_path / "root"
    argv = ["claude-code", "--managed", "--root", str(root), "--config", str(cfg)]
    assert main(argv, box.env()) == 1
    assert not Path(managed_settings_file(str(root))).exists()


def test_managed_refuses_without_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    argv = ["claude-code", "--managed", "--root", str(tmp_path), "--service", "unix:/x.sock"]
    assert main(argv, {"HOME": str(tmp_path)}) == 1
    assert "must run as root" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_default_paths_are_the_ones_the_docs_name() -> None:
    """Claude Code 2.1.328 reads /etc/claude-code/managed-settings.json on Linux."""
    assert managed_settings_file() == MANAGED_SETTINGS == "/etc/claude-code/managed-settings.json"
    assert managed_config_path() == "/etc/zerto-rewind/config.json"
    docs = (Path(__file__).resolve().parents[3] / "docs" / "install.md").read_text()
    assert MANAGED_SETTINGS in docs
    assert re.search(r"/etc/zerto-rewind/config\.json", docs)


# ------------------------------------------------------------------ whose socket


@pytest.fixture(scope="module")
def agent() -> Iterator[pwd.struct_passwd]:
    """A real unprivileged user that plays the agent."""
    with unix_user("zrinst") as user:
        yield user


@pytest.fixture
def base() -> Iterator[Path]:
    """A root-owned 0755 directory straight under /tmp, which the agent can search."""
    with reachable_dir("zr-install-socket-") as path:
        yield path


def listening(path: Path, owner: int = 0) -> socket.socket:
    """A socket at ``path`` (install refuses it before it would ask it anything)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1)
    os.chown(path, owner, -1)
    return sock


def refused(argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run install, which must refuse; its stderr."""
    capsys.readouterr()
    assert main(argv, env) == 1
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.parametrize("named", [True, False], ids=["--agent-user", "as root, by default"])
def test_a_socket_in_a_directory_the_agent_can_write_is_refused_even_with_force(
    base: Path, agent: pwd.struct_passwd, capsys: pytest.CaptureFixture[str], named: bool
) -> None:
    """The attack's directory: the agent could put its own socket there and answer allow."""
    run = base / "run"
    run.mkdir(mode=0o755)
    os.chown(run, agent.pw_uid, agent.pw_gid)
    project = base / "project"
    project.mkdir()
    sock = listening(run / "guard.sock")
    try:
        argv = ["claude-code", "--project", str(project), "--service", f"unix:{run}/guard.sock",
                "--force"] + (["--agent-user", agent.pw_name] if named else [])  # fmt: skip
        err = refused(argv, {"HOME": str(base)}, capsys)
    finally:
        sock.close()
    assert f"the socket {run}/guard.sock is in a directory that {agent.pw_name}" in err
    assert f"{run} belongs to {agent.pw_name}" in err
    assert "--force does not override this" in err
    assert "Not installed." in err
    assert not (project / ".claude").exists()


def test_a_socket_in_a_sticky_world_writable_directory_is_refused(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A root socket in a /tmp-like 1777 directory: the agent could have made the path first."""
    shared = base / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    project = base / "project"
    project.mkdir()
    sock = listening(shared / "guard.sock")
    try:
        argv = ["claude-code", "--project", str(project), "--service",
                f"unix:{shared}/guard.sock"]  # fmt: skip
        err = refused(argv, {"HOME": str(base)}, capsys)
    finally:
        sock.close()
    assert f"{shared} is writable by" in err
    assert "a sticky directory such as /tmp does not help" in err
    assert not (project / ".claude").exists()


def test_a_socket_the_agent_serves_is_refused(
    base: Path, agent: pwd.struct_passwd, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a root directory, but the agent's own socket: a guard it runs is no guard."""
    run = base / "run"
    run.mkdir(mode=0o755)
    project = base / "project"
    project.mkdir()
    sock = listening(run / "guard.sock", owner=agent.pw_uid)
    try:
        service = f"unix:{run}/guard.sock"
        argv = ["claude-code", "--project", str(project), "--service", service, "--force"]
        named = refused([*argv, "--agent-user", agent.pw_name], {"HOME": str(base)}, capsys)
        unnamed = refused(argv, {"HOME": str(base)}, capsys)
    finally:
        sock.close()
    who = f"{agent.pw_name} (uid {agent.pw_uid})"
    assert f"is served by {who}, the agent's own user" in named
    assert "Run the guard service as another user" in named
    # As root with no user named: a socket that is not root's must be confirmed.
    assert f"belongs to {who}, not root" in unnamed
    assert f"--service-user {agent.pw_name}" in unnamed
    assert not (project / ".claude").exists()


def test_a_service_user_that_does_not_serve_the_socket_is_refused(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--service-user names the service's user; the real service (root's here) is not it."""
    project = tmp_path / "project"
    project.mkdir()
    nobody = pwd.getpwnam("nobody")
    argv = ["claude-code", "--project", str(project), "--service", service,
            "--service-user", "nobody", "--force"]  # fmt: skip
    err = refused(argv, {"HOME": str(tmp_path)}, capsys)
    assert f"is served by uid {os.geteuid()} (" in err
    assert f"not by the guard service's user nobody (uid {nobody.pw_uid})" in err
    assert not (project / ".claude").exists()


def test_install_for_a_named_agent_user_records_the_services_uid(
    service: str, tmp_path: Path, agent: pwd.struct_passwd, capsys: pytest.CaptureFixture[str]
) -> None:
    """A socket the agent cannot touch: installed, the summary says whose it must be."""
    project = tmp_path / "project"
    project.mkdir()
    argv = ["claude-code", "--project", str(project), "--service", service, "--force",
            "--agent-user", agent.pw_name]  # fmt: skip
    capsys.readouterr()
    assert main(argv, {"HOME": str(tmp_path)}) == 0
    out = capsys.readouterr().out
    uid = os.geteuid()
    assert f"identity: {service[5:]} must be served by root (uid {uid})" in out
    assert f"changed by {agent.pw_name}" in out
    command = only_hook(project / ".claude" / "settings.json")["hooks"][0]["command"]
    assert HookCommand.parse(command).service_user == str(uid)


def test_service_user_and_agent_user_go_with_service_only(tmp_path: Path) -> None:
    for flag in ("--service-user", "--agent-user"):
        with pytest.raises(SystemExit):
            main(["claude-code", "--user", "--config", "/x.json", flag, "root"],
                 {"HOME": str(tmp_path)})  # fmt: skip
