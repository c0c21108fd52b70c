"""A stdio upstream runs confined: its own user, a private directory, and never past the gateway.

The probe (``confined_server.py``) reports who it is and tries the guard's files
itself. The guard's files sit in a directory any user may enter (0755), as in a
real deployment, so what stops the probe is the files' own owners and modes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from integration.gateway.gateway_helpers import (
    TOKENS,
    client,
    gateway_config,
    gateway_process,
    text_of,
)
from support.users import reachable_command, reachable_dir, unix_user
from zerto_rewind.testing import SECRET_ENV, Sandbox

pytestmark = pytest.mark.anyio
PROBE = Path(__file__).with_name("confined_server.py")


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user may enter (pytest's own tmp is root's, 0700)."""
    with reachable_dir("zr-confine-") as root:
        yield root


@pytest.fixture
def box(base: Path) -> Iterator[Sandbox]:
    with Sandbox(str(base / "box"), guard={"timeout_s": 10}) as sandbox:
        for path in (base / "box", *Path(base / "box").iterdir()):
            if path.is_dir():
                path.chmod(0o755)
        yield sandbox


def configure(box: Sandbox, base: Path, **upstream: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "command": [sys.executable, str(PROBE)],
        "env": {"CONFINED_STUCK": str(base / "stuck.pid"), "PYTHONDONTWRITEBYTECODE": "1"},
        "timeout_s": 10,
        **upstream,
    }
    gateway_config(box, upstream=spec)
    Path(box.log_path).touch()
    return spec


def stdio_gateway(box: Sandbox, base: Path, *flags: str) -> Client:
    gateway = [sys.executable, "-m", "zerto_rewind", "gateway", "--stdio", "--upstream",
               "vsphere", *flags]  # fmt: skip
    stage = base / "stage"
    stage.mkdir(mode=0o755, exist_ok=True)
    command, *args = reachable_command(gateway, stage=stage)
    return Client(StdioServerParameters(command=command, args=args, env=box.env()), cache=None)


def test_a_root_upstream_is_refused_without_the_allowance(box: Sandbox, base: Path) -> None:
    """No user configured, gateway as root: it does not start, and says what to do."""
    if os.geteuid() != 0:
        pytest.skip("judges a root gateway; CI runs as root")
    configure(box, base)
    done = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "gateway", "--stdio", "--upstream", "vsphere"],
        env=box.env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "will not start upstream 'vsphere'" in done.stderr
    assert "would run as root" in done.stderr
    assert "upstreams.vsphere.user" in done.stderr
    assert "--allow-privileged-upstream" in done.stderr
    assert not (base / "stuck.pid").exists()


def test_an_upstream_as_the_owner_of_the_guard_files_is_refused(box: Sandbox, base: Path) -> None:
    """The configured user owns the config: refused, naming the file."""
    with unix_user("zr-own-") as user:
        configure(box, base, user=user.pw_name)
        os.chown(box.config_path, user.pw_uid, -1)
        done = subprocess.run(
            [sys.executable, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0"],
            env=box.env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"who owns the guard's config {box.config_path}" in done.stderr
    assert "--allow-privileged-upstream" in done.stderr


async def test_the_upstream_runs_as_its_user_and_cannot_touch_the_guard(
    box: Sandbox, base: Path
) -> None:
    """Its own uid and gid, no groups, a private 0700 home; config, secret, state, log refused."""
    secret = base / "zvm-secret"
    secret.write_text(box.sim.credentials["client_secret"])
    secret.chmod(0o600)
    with unix_user("zr-up-") as user:
        configure(box, base, user=user.pw_name)
        guarded = {p: Path(p).read_bytes() for p in (box.config_path, box.log_path, secret)}
        async with stdio_gateway(box, base) as c:
            who = json.loads(text_of(await c.call_tool("get_identity", {})))
            reads = {
                str(p): text_of(await c.call_tool("get_file", {"path": str(p)}))
                for p in (box.config_path, secret)
            }
            writes = {
                str(p): text_of(await c.call_tool("get_written", {"path": str(p)}))
                for p in (box.log_path, Path(box.state_dir) / "planted", box.config_path)
            }
        uid, gid = user.pw_uid, user.pw_gid
    assert (who["uid"], who["euid"], who["gid"], who["egid"]) == (uid, uid, gid, gid)
    assert who["groups"] == []
    assert who["cwd"] == who["home"] == who["tmpdir"]
    assert (who["cwd_uid"], who["cwd_mode"]) == (uid, 0o700)
    assert who["pgid"] == who["pid"]
    assert who["pdeathsig"] == signal.SIGKILL
    # Its own env and the few inherited variables: nothing else of the gateway's.
    assert SECRET_ENV not in who["env"]
    assert not [k for k in who["env"] if k.startswith("ZERTO_")]
    # (SHELL and TERM: the SDK's own defaults; LC_CTYPE: Python's locale coercion.)
    assert set(who["env"]) <= {"PATH", "LANG", "LC_ALL", "SSL_CERT_FILE", "SSL_CERT_DIR",
                               "HOME", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM",
                               "CONFINED_STUCK", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE"}  # fmt: skip
    assert (who["user"], who["logname"]) == (user.pw_name, user.pw_name)
    assert set(reads.values()) == {"PermissionError"}, reads
    assert set(writes.values()) == {"PermissionError"}, writes
    assert {p: Path(p).read_bytes() for p in guarded} == guarded
    assert not (Path(box.state_dir) / "planted").exists()
    assert not os.path.exists(who["home"])  # the private directory went with the upstream


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def test_an_upstream_does_not_outlive_a_sigkilled_gateway(box: Sandbox, base: Path) -> None:
    """The gateway is SIGKILLed while its upstream is stuck in a call: the upstream dies too."""
    configure(box, base)
    stuck = base / "stuck.pid"
    with gateway_process(box, base) as gw:
        async with anyio.create_task_group() as tg:

            async def call_stuck() -> None:
                # The gateway is killed under this call: its connection dropping (whatever
                # the client raises for it, and whenever) is the expected end.
                with contextlib.suppress(Exception):
                    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
                        await c.call_tool("get_stuck", {})

            tg.start_soon(call_stuck)
            with anyio.fail_after(20):
                while not stuck.exists() or not stuck.read_text():
                    await anyio.sleep(0.05)
            upstream = int(stuck.read_text())
            assert _alive(upstream)
            gw.proc.send_signal(signal.SIGKILL)
            gw.proc.wait(timeout=10)
            deadline = time.monotonic() + 3
            while _alive(upstream) and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert not _alive(upstream), "the upstream outlived its SIGKILLed gateway"
