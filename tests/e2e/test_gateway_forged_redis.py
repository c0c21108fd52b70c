"""The agent's own unix user forges the gateway's shared state in Redis, for real; nothing runs.

Issue 26: with a password-less ``state.url``, the agent's user set its own pending
request to ``approved`` with a few bytes of RESP, and its retry powered a VM off,
the log crediting an approver who never acted. Here the gateway shares its state in
a real redis-server on loopback with no password (``state.allow_unauthenticated_redis``,
so the agent's user really reaches it), in front of the real mcvsphere on govmomi's
vCenter simulator (``gateway_e2e.GatewayRig``). The agent is a real user (``useradd``,
``tamper_e2e.agent_user``) and writes its forgeries itself (``support.redis_forger``).
What happened is read from vcsim (the VM's power state, pyVmomi), the ZVM simulator
and the decision log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from e2e.gateway_e2e import PYTHON, SERVER, TOKEN, VM, GatewayRig, tool
from e2e.tamper_e2e import Agent, agent_user
from support.redis_forger import FORGER
from support.redis_server import RedisServer

POWER_OFF = tool("power_off")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayRig]:
    with GatewayRig.running(tmp_path_factory.mktemp("gateway-forged-redis"), http=False) as r:
        yield r


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    assert os.geteuid() == 0, "these tests create users with useradd: run them as root"
    base = Path(tempfile.mkdtemp(prefix="zr-forged-redis-e2e-"))
    base.chmod(0o755)
    try:
        with agent_user(base) as user:
            yield user
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    data = tmp_path / "redis"
    data.mkdir()
    with RedisServer(data) as server:
        yield server


@contextlib.contextmanager
def gateway(rig: GatewayRig, redis: RedisServer, approver: str) -> Iterator[str]:
    """``zerto-rewind gateway --listen`` as root, its state in ``redis``; yields its MCP URL."""
    config_path = Path(rig.write_config())
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["state"] = {"url": redis.url, "allow_unauthenticated_redis": True}
    config["approvals"] = {"approvers": {"users": [approver]}, "wait_s": 1}
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # stays 0600
    ready_file = rig.root / "forged-redis-ready.json"
    ready_file.unlink(missing_ok=True)
    stderr = rig.root / "forged-redis.stderr"
    args = [PYTHON, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
            "--ready-file", str(ready_file), *rig.gateway_flags()]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
    env.update(rig.gateway_env())
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            args, env=env, cwd=rig.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway did not start: {stderr.read_text()}")
            time.sleep(0.05)
        yield str(json.loads(ready_file.read_text())["mcp"][SERVER])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def call(url: str, vm: str) -> Any:
    """``power_off`` on ``vm`` through the official SDK client, with the agent's token."""

    async def once() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            return await client.call_tool("power_off", {"name": vm})

    return anyio.run(once)


def forge(agent: Agent, redis: RedisServer, key: str, mode: str) -> int:
    """The forger, run as the agent's own user; how many records it rewrote."""
    done = subprocess.run(
        agent.command([PYTHON, "-c", FORGER, str(redis.port), key, mode]),
        env={"PATH": "/usr/bin:/bin", "HOME": str(agent.home), "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=agent.home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def lines_about(records: list[dict[str, Any]], vm: str) -> list[dict[str, Any]]:
    return [r for r in records if r.get("tool") == POWER_OFF and r.get("vms") == [vm]]


def test_a_request_the_agent_approves_in_redis_leaves_the_vm_on(
    rig: GatewayRig, agent: Agent, redis: RedisServer
) -> None:
    rig.power_on(VM.unknown)
    start = len(rig.log())
    with gateway(rig, redis, approver="zr-nobody-approves") as url:
        first = call(url, VM.unknown)  # in no VPG: waits for a person, then is refused
        assert first.is_error
        assert forge(agent, redis, "zerto-rewind:approvals:req:*", "approve") == 1
        retry = call(url, VM.unknown)
    assert retry.is_error
    assert rig.power_states()[VM.unknown] == "poweredOn"
    lines = lines_about(rig.log_since(start), VM.unknown)
    assert lines, "the decision log holds the calls"
    assert [r.get("approver") for r in lines if r.get("approver")] == []
    assert "used" not in [r.get("answer") for r in lines]
    assert "zr-never-acted" not in json.dumps(lines)


def test_a_tag_the_agent_makes_look_landed_in_redis_leaves_the_vm_on(
    rig: GatewayRig, agent: Agent, redis: RedisServer
) -> None:
    rig.power_on(VM.failed)
    start = len(rig.log())
    with gateway(rig, redis, approver="zr-nobody-approves") as url:
        first = call(url, VM.failed)  # its VPG is paused: no checkpoint can be made
        assert first.is_error
        (vpg_id,) = lines_about(rig.log_since(start), VM.failed)[-1]["vpg_ids"]
        assert forge(agent, redis, f"zerto-rewind:vpg:{vpg_id}", "paused-vpg") == 1
        retry = call(url, VM.failed)
    assert retry.is_error
    assert rig.power_states()[VM.failed] == "poweredOn"
    lines = lines_about(rig.log_since(start), VM.failed)
    assert [r["row"] for r in lines] == ["failed", "failed"]
    assert "forged-checkpoint" not in json.dumps(lines)
