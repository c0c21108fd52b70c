"""An upstream that cannot start says why: at the gateway's start, on its stderr, in /healthz.

Real processes and real users: the gateway runs as root and starts its upstream
through the launcher as a fresh ``useradd`` user. The way to the server's
interpreter is laid out as a venv's is on a newcomer's machine: ``venv/bin/python``
is a symbolic link into a directory only root may search (root's home).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    gateway_config,
    gateway_process,
)
from support.users import reachable_command, reachable_dir, unix_user
from zerto_rewind.cli import run_command
from zerto_rewind.cli.doctor.gateway_health import gateway_health_checks
from zerto_rewind.cli.doctor.upstreams import upstream_start_checks
from zerto_rewind.cli.install_mcp_host import main as install_mcp_host
from zerto_rewind.config.loader import load_config
from zerto_rewind.hostconfig.specs import HOSTS, HostFile
from zerto_rewind.netutil import token_digest
from zerto_rewind.testing import Sandbox

PROBE = Path(__file__).with_name("confined_server.py")


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user may enter (pytest's own tmp is root's, 0700)."""
    with reachable_dir("zr-startup-") as root:
        yield root


@pytest.fixture
def hidden_python(base: Path) -> tuple[Path, Path]:
    """``base/venv/bin/python`` -> ``base/home/python`` -> this Python; ``base/home`` is 0700.

    Returns the venv's python and the directory its user cannot search.
    """
    home = base / "home"
    home.mkdir(mode=0o700)
    (home / "python").symlink_to(os.path.realpath(sys.executable))
    bin_dir = base / "venv" / "bin"
    bin_dir.mkdir(parents=True, mode=0o755)
    (bin_dir / "python").symlink_to(home / "python")
    return bin_dir / "python", home


def test_a_confined_upstream_its_user_cannot_reach_stops_the_gateway_at_start(
    box: Sandbox, hidden_python: tuple[Path, Path]
) -> None:
    """The gateway refuses to start, naming the interpreter, the user, the directory it
    cannot search and the link that leads there; it never writes a ready file."""
    python, home = hidden_python
    with unix_user("zr-start-") as user:
        gateway_config(box, upstream={"command": [str(python), str(PROBE)], "user": user.pw_name})
        Path(box.log_path).touch()
        done = subprocess.run(
            [sys.executable, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0"],
            env=box.env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode != 0
    assert "upstream 'vsphere' cannot start: cannot run " + str(python) in done.stderr
    assert f"(as user {user.pw_name}: {home} is not searchable" in done.stderr
    assert f"{python} -> {home / 'python'}" in done.stderr
    assert "serving" not in done.stderr


def test_doctor_tries_the_upstream_as_its_user_and_names_the_path(
    box: Sandbox, base: Path, hidden_python: tuple[Path, Path]
) -> None:
    """doctor's trial start as the upstream's user fails with the first path it cannot pass;
    once that directory is searchable (and this checkout's Python reachable), `doctor`
    starts the same server as that user and it answers initialize."""
    python, home = hidden_python
    # Not a venv itself: the probe finds the SDK on this venv's site-packages.
    env = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PYTHONDONTWRITEBYTECODE": "1"}
    with unix_user("zr-start-") as user:
        upstream = {"command": [str(python), str(PROBE)], "user": user.pw_name, "env": env}
        gateway_config(box, upstream=upstream)
        Path(box.log_path).touch()
        (check,) = upstream_start_checks(load_config(box.env()), timeout_s=10)
        assert check.status == "fail"
        assert f"as {user.pw_name} (uid {user.pw_uid}), it exited (126)" in check.detail
        assert f"{home} is not searchable" in check.detail
        assert "chmod o+x" in check.fix
        home.chmod(0o755)
        stage = base / "stage"
        stage.mkdir(mode=0o755)
        doctor = [sys.executable, "-m", "zerto_rewind", "doctor", "--json",
                  "--config", box.config_path]  # fmt: skip
        done = subprocess.run(
            reachable_command(doctor, stage=stage),
            env=box.env(), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    started = checks["upstream vsphere: start"]
    assert started["status"] == "pass", started
    assert started["detail"] == (
        f"started as {user.pw_name} (uid {user.pw_uid}) and answered initialize (confined)"
    )


def test_install_tries_the_upstream_as_its_user_and_names_the_path(
    box: Sandbox,
    tmp_path: Path,
    hidden_python: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`install mcp-host --upstream-user` moves a server whose interpreter its user cannot
    reach: the install's trial start as that user names the directory and the link, on
    stdout and stderr, before anyone starts the gateway."""
    python, home = hidden_python
    box.write_config(state_dir=box.state_dir, log=box.log_path)
    cursor = tmp_path / "home" / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    entry = {"command": str(python), "args": [str(PROBE)]}
    cursor.write_text(json.dumps({"mcpServers": {"vsphere": entry}}))
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", ""), "USER": "alice"}
    with unix_user("zr-start-") as user:
        argv = ["cursor", "--server", "vsphere", "--user", "--gateway-config", box.config_path,
                "--upstream-user", user.pw_name]  # fmt: skip
        code = run_command("install mcp-host", lambda: install_mcp_host(argv, env))
    out, err = capsys.readouterr()
    assert code == 0, err
    (warning,) = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert warning.startswith(
        f"WARNING:     the VM server cannot start: as {user.pw_name} (uid {user.pw_uid}), "
        f"it exited (126): cannot run {python}"
    )
    assert f"{home} is not searchable, on the way through {python} -> {home / 'python'}" in warning
    assert warning in err


def wait_for(condition: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_an_upstream_that_fails_says_why_once_and_healthz_names_it_and_its_log(
    box: Sandbox, tmp_path: Path, base: Path
) -> None:
    """A server whose interpreter is missing: the gateway still serves, retries, and says
    on its stderr once (not per retry) what failed and where the server's log is;
    /healthz says the same to a gateway.metrics_clients token, and doctor reports the
    gateway not ready: and why with a host token that may read it, else where to look."""
    server = base / "mcvsphere"
    server.write_text("#!/nonexistent/venv/bin/python\n")
    server.chmod(0o755)
    readers = {"doctor": token_digest(TOKENS["agent-a"])}
    upstream = {"command": [str(server)], "timeout_s": 2}
    gateway_config(box, upstream=upstream, gateway={"metrics_clients": readers})
    upstream_log = Path(box.state_dir) / "upstreams" / "vsphere.log"
    with gateway_process(box, tmp_path) as gw:
        wait_for(
            lambda: upstream_log.exists() and upstream_log.read_text().count("cannot run") >= 3
        )
        health = httpx.get(f"{gw.url}/healthz", headers=header_of("agent-a"), timeout=10)
        bare = httpx.get(f"{gw.url}/healthz", timeout=10)
        host_file = tmp_path / "mcp.json"
        checks = []
        for name in ("agent-a", "agent-b"):
            entry = {"url": gw.endpoint(), "headers": header_of(name)}
            host_file.write_text(json.dumps({"mcpServers": {"vsphere": entry}}))
            checks += gateway_health_checks([HostFile(HOSTS["cursor"], str(host_file))])
        stderr = gw.stderr.read_text()
    check, unread = checks
    assert (bare.status_code, bare.json()) == (503, {"ready": False})
    assert unread.status == "fail"
    assert "not ready" in unread.detail
    assert "gateway.metrics_clients" in unread.detail + unread.fix
    assert "cannot run" not in unread.detail
    assert health.status_code == 503
    status = health.json()["upstreams"]["vsphere"]
    cause = (
        f"cannot run {server}: No such file or directory (as user root: the interpreter of "
        f"{server}, /nonexistent/venv/bin/python: /nonexistent: No such file or directory)"
    )
    assert status == f"not connected ({cause}; its log: {upstream_log})"
    assert stderr.count(f"upstream vsphere is down: {cause}; its log: {upstream_log}") == 1
    assert "ExceptionGroup" not in stderr
    assert "connection lost" not in stderr
    assert check.status == "fail"
    assert f"upstream vsphere: not connected ({cause}" in check.detail
    assert TOKENS["agent-a"] not in check.detail + check.fix


def header_of(client: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[client]}"}


def test_doctor_asks_the_gateway_with_the_hosts_token(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """Ready with the host's token; the token refused (401) with another; nothing listening
    once the gateway is gone. The token is never in what doctor prints."""
    from integration.gateway.gateway_helpers import stand_in_upstream

    gateway_config(box, upstream=stand_in_upstream(box, actions_log))
    host_file = tmp_path / "mcp.json"
    file = HostFile(HOSTS["cursor"], str(host_file))

    def entry(token: str, url: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        host_file.write_text(
            json.dumps({"mcpServers": {"vsphere": {"url": url, "headers": headers}}})
        )

    with gateway_process(box, tmp_path) as gw:
        wait_for(
            lambda: (
                httpx.get(f"{gw.url}/healthz", headers=METRICS_HEADERS, timeout=10).status_code
                == 200
            )
        )
        entry(TOKENS["agent-a"], gw.endpoint())
        (ready,) = gateway_health_checks([file])
        entry("not-a-token-of-this-gateway", gw.endpoint())
        (refused,) = gateway_health_checks([file])
    (down,) = gateway_health_checks([file])
    assert ready.status == "pass", ready.detail
    assert "token in" in ready.detail
    assert "gateway is ready" in ready.detail
    assert refused.status == "fail"
    assert "holds a token the gateway refused (401" in refused.detail
    assert down.status == "fail"
    assert "connection refused" in down.detail
    for check in (ready, refused, down):
        assert TOKENS["agent-a"] not in check.detail + check.fix
        assert "not-a-token" not in check.detail + check.fix
