"""``doctor --as-user``: a managed install with a service passes; a single-user install fails.

The agent is a real unprivileged user (useradd). The managed installation is made
by the installer itself into a temporary root, with the guard service running on a
unix socket and its config root's; the single-user one is the standalone hook with
every file in the agent's hands, as a user would set it up alone.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.users import reachable_dir, unix_user
from zerto_rewind.cli.doctor import Check, main, run_checks
from zerto_rewind.cli.doctor.access import User, lookup_user
from zerto_rewind.cli.install_claude_code import main as install_main
from zerto_rewind.hooks.thin import LAUNCH_CODE
from zerto_rewind.hostconfig.install.managed import managed_config_path
from zerto_rewind.hostconfig.install.settings_file import managed_settings_file
from zerto_rewind.testing import SECRET_ENV, Sandbox


@pytest.fixture(scope="module")
def agent() -> Iterator[User]:
    """A real user that plays the agent; removed afterwards."""
    with unix_user("zr-doc-as-") as entry:
        yield lookup_user(entry.pw_name)


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A root-owned 0755 directory straight under /tmp: the agent may search it, not write it.

    Not under pytest's own temporary root, whose 0700 mode another pytest run may
    restore at any moment (the agent could then reach nothing, and pass falsely).
    """
    with reachable_dir("zr-as-user-") as path:
        yield path


@pytest.fixture(scope="module")
def box(base: Path) -> Iterator[Sandbox]:
    guard = base / "guard"  # the service's own directory: root's, 0700
    guard.mkdir(mode=0o700)
    with Sandbox(str(guard / "box"), guard={"timeout_s": 10}) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def service(box: Sandbox, base: Path) -> Iterator[str]:
    """The guard service on a socket in a root-owned 0755 directory."""
    secret = Path(box.root) / "zvm-secret"
    secret.write_text(box.sim.credentials["client_secret"])
    secret.chmod(0o600)
    zvm = {**box.config()["zvm"], "client_secret_file": str(secret)}
    del zvm["client_secret_env"]
    box.write_config(zvm=zvm, state_dir=box.state_dir, log=box.log_path)
    run = base / "run"
    run.mkdir(mode=0o755)
    sock, ready = run / "guard.sock", run / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zerto_rewind", "gateway", "--socket", str(sock),
         "--ready-file", str(ready)],
        env=box.env(),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield f"unix:{sock}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def access(checks: list[Check]) -> dict[str, str]:
    return {c.name: c.status for c in checks if c.name.startswith(("guard file:", "credential:"))}


def agent_home(base: Path, name: str, agent: User) -> Path:
    home = base / name
    home.mkdir()
    os.chown(home, agent.uid, -1)
    return home


def test_a_managed_install_with_a_service_passes_for_the_agent(
    service: str, box: Sandbox, base: Path, agent: User
) -> None:
    """Root's managed settings and config, the service's socket: nothing for the agent."""
    root = base / "root"
    root.mkdir(mode=0o755)
    argv = ["claude-code", "--managed", "--root", str(root), "--service", service,
            "--config", box.config_path]  # fmt: skip
    assert install_main(argv, box.env()) == 0
    home = agent_home(base, "home-managed", agent)
    # The agent's own MCP config reaches the VMs only through... nothing: no VM server.
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {}}))
    env = {"HOME": str(home), SECRET_ENV: "unused"}
    checks = run_checks(
        config=managed_config_path(str(root)),
        settings_files=[],
        managed_files=[managed_settings_file(str(root))],
        env=env,
        as_user=agent,
    )
    named = {c.name: c for c in checks}
    assert named["guard service"].status == "pass", named["guard service"]
    assert named["hook command"].status == "pass", named["hook command"]
    assert named["hook matcher"].status == "pass", named["hook matcher"]
    assert named["service identity"].status == "pass", named["service identity"]
    assert "belongs to the hook's --service-user root (uid 0)" in named["service identity"].detail
    statuses = access(checks)
    failed = {n: s for n, s in statuses.items() if s == "fail"}
    assert failed == {}, [c for c in checks if c.status == "fail"]
    for name in ("guard file: config", "guard file: state dir",
                 "credential: ZVM secret file"):  # fmt: skip
        assert statuses[name] == "pass"
    assert any(n.startswith("guard file: hook settings") for n in statuses)
    assert any(n.startswith("guard file: service socket directory") for n in statuses)
    assert any(n.startswith("guard file: venv") for n in statuses)


def test_a_single_user_install_fails_for_what_the_agent_owns(
    box: Sandbox, base: Path, agent: User, capsys: pytest.CaptureFixture[str]
) -> None:
    """Config, settings, state and secret in the agent's hands: each one is a failure."""
    home = agent_home(base, "home-single", agent)
    project = home / "project"
    project.mkdir()
    config = home / "zerto-rewind.json"
    secret = home / "zvm-secret"
    secret.write_text(box.sim.credentials["client_secret"])
    secret.chmod(0o600)
    state = home / "state"
    (state / "tokens").mkdir(parents=True)
    data = box.config(state_dir=str(state), log=str(home / "decisions.log"))
    data["zvm"] = {**data["zvm"], "client_secret_file": str(secret)}
    del data["zvm"]["client_secret_env"]
    config.write_text(json.dumps(data))
    config.chmod(0o600)
    vcenter = {"command": "mcvsphere", "env": {"VCENTER_HOST": "vc", "VCENTER_PASSWORD": "pw"}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"vsphere": vcenter}}))
    env = {"HOME": str(home)}
    assert install_main(["claude-code", "--project", str(project), "--config", str(config)],
                        env) == 0  # fmt: skip
    for directory, dirs, files in os.walk(home):
        for name in [directory, *(os.path.join(directory, n) for n in dirs + files)]:
            os.chown(name, agent.uid, -1)
    settings = project / ".claude" / "settings.json"
    checks = run_checks(
        config=str(config),
        settings_files=[str(settings)],
        env=env,
        project_dirs=[str(project)],
        as_user=agent,
    )
    statuses = access(checks)
    assert statuses["guard file: config"] == "fail"
    assert statuses[f"guard file: hook settings {settings}"] == "fail"
    assert statuses["guard file: state dir"] == "fail"
    assert statuses["credential: ZVM secret file"] == "fail"
    assert statuses["credential: token cache"] == "fail"
    assert statuses["credential: VM server in an MCP config"] == "fail"
    fixes = [c.fix for c in checks if c.status == "fail" and c.name.startswith("guard file")]
    assert all("another user" in fix for fix in fixes)
    # The command: --as-user NAME, exit 1, the failures printed with what to do.
    capsys.readouterr()
    code = main(["--config", str(config), "--settings", str(settings), "--as-user", agent.name,
                 "--json"], env)  # fmt: skip
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    names = {c["name"] for c in report["checks"] if c["status"] == "fail"}
    assert "credential: ZVM secret file" in names


# ------------------------------------------------------------------ the socket's identity


def thin_settings(path: Path, sock: Path, *extra: str) -> Path:
    """A settings file holding a thin hook for ``sock``, written by hand (install would
    refuse these sockets), root's and 0644."""
    command = shlex.join([sys.executable, "-c", LAUNCH_CODE, "hook", "--service",
                          f"unix:{sock}", "--budget", "20", *extra])  # fmt: skip
    hook = {"type": "command", "command": command, "timeout": 180, "onFailure": "block"}
    settings = {"hooks": {"PreToolUse": [{"matcher": "mcp__vsphere__.*", "hooks": [hook]}]}}
    path.write_text(json.dumps(settings))
    path.chmod(0o644)
    return path


def test_doctor_fails_a_socket_directory_the_agent_can_write_and_a_hook_without_identity(
    base: Path, agent: User, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack's setup: the socket's directory is the agent's, the hook checks no uid."""
    run = base / "agent-run"
    run.mkdir(mode=0o755)
    os.chown(run, agent.uid, -1)
    sock = run / "guard.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(sock))  # not listening: the catalog request is refused at once
    try:
        settings = thin_settings(base / "thin-no-identity.json", sock)
        home = agent_home(base, "home-thin", agent)
        checks = run_checks(settings_files=[str(settings)], env={"HOME": str(home)},
                            as_user=agent)  # fmt: skip
        capsys.readouterr()
        code = main(["--settings", str(settings), "--as-user", agent.name, "--json"],
                    {"HOME": str(home)})  # fmt: skip
    finally:
        bound.close()
    named = {c.name: c for c in checks}
    directory = named[f"guard file: service socket directory (unix:{sock})"]
    assert directory.status == "fail"
    assert f"{run} belongs to {agent.name}" in directory.detail
    assert "only root or the service's user can write" in directory.fix
    identity = named["service identity"]
    assert identity.status == "fail"
    assert "names no --service-user" in identity.detail
    assert "denies every call" in identity.detail
    # The command prints both failures.
    assert code == 1
    failed = {c["name"] for c in json.loads(capsys.readouterr().out)["checks"]
              if c["status"] == "fail"}  # fmt: skip
    assert {"service identity", f"guard file: service socket directory (unix:{sock})"} <= failed


def test_doctor_fails_a_socket_owned_by_another_user_than_the_hooks_service_user(
    service: str, base: Path, agent: User
) -> None:
    """The hook expects the agent's uid (as if install had trusted the agent's socket); the
    socket is the real service's, root's: both the owner and the listener are reported."""
    sock = Path(service[5:])
    settings = thin_settings(base / "thin-other-owner.json", sock, "--service-user", agent.name)
    home = agent_home(base, "home-owner", agent)
    checks = run_checks(settings_files=[str(settings)], env={"HOME": str(home)}, as_user=agent)
    named = {c.name: c for c in checks}
    identity = named["service identity"]
    assert identity.status == "fail"
    assert (
        f"{sock} belongs to root (uid 0), not to the hook's --service-user {agent.name} "
        f"(uid {agent.uid})"
    ) in identity.detail
    assert named["guard service"].status == "fail"
    assert "is served by uid 0 (root, pid " in named["guard service"].detail
    assert named[f"guard file: service socket directory ({service})"].status == "pass"
