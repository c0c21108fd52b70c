"""The agent's own unix user forges the gateway's state in Redis; nothing it forged runs.

A real redis-server on loopback with no password (``state.allow_unauthenticated_redis``,
so the agent's user reaches it, as in issue 26), a real gateway process with the
stand-in VM server, and a real user made by ``useradd`` for the agent, which writes
its forgeries in raw RESP over its own socket. The outcome is read where it happens:
the VM server's record of the calls that reached it, and the decision log.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    StartGateway,
    actions,
    client,
    decisions,
    text_of,
)
from support.redis_forger import FORGER
from support.redis_server import RedisServer
from support.users import as_user, unix_user
from zerto_rewind.core.record_mac import RecordMac
from zerto_rewind.core.state_redis import RedisGuardState
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

FORGED_APPROVER = "unix:zr-never-acted"


@pytest.fixture(scope="module")
def agent_user() -> Iterator[str]:
    with unix_user("zr-forge-") as user:
        yield user.pw_name


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    data = tmp_path / "redis-data"
    data.mkdir()
    with RedisServer(data) as server:
        yield server


@pytest.fixture
def gw(start_gateway: StartGateway, redis: RedisServer) -> GatewayProcess:
    return start_gateway(
        state={"url": redis.url, "allow_unauthenticated_redis": True},
        approvals={"approvers": {"users": ["zr-forge-approver"]}, "wait_s": 0.5},
    )


def forge(agent: str, redis: RedisServer, pattern: str, mode: str) -> int:
    """Run the forger as the agent's user; how many records it rewrote."""
    done = as_user(agent, [sys.executable, "-c", FORGER, str(redis.port), pattern, mode])
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def approvers_credited(box: Sandbox) -> list[Any]:
    return [d.get("approver") for d in decisions(box) if d.get("approver")]


async def test_a_request_the_agent_sets_to_approved_in_redis_does_not_run(
    gw: GatewayProcess, box: Sandbox, actions_log: Path, redis: RedisServer, agent_user: str
) -> None:
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        first = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert first.is_error
    assert "waiting for an approver" in text_of(first)
    assert forge(agent_user, redis, "zerto-rewind:approvals:req:*", "approve") == 1
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        retry = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert retry.is_error
    assert actions(actions_log) == [], "the forged approval ran the call"
    assert FORGED_APPROVER not in text_of(retry)
    assert approvers_credited(box) == []
    assert "used" not in [d.get("answer") for d in decisions(box)]


async def test_a_tag_the_agent_makes_look_landed_in_redis_allows_nothing(
    gw: GatewayProcess, box: Sandbox, actions_log: Path, redis: RedisServer, agent_user: str
) -> None:
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        first = await c.call_tool("power_off_vm", {"name": "sql-paused-1"})
    assert first.is_error  # its VPG is paused: no checkpoint can be made
    (vpg_id,) = decisions(box)[-1]["vpg_ids"]  # not a secret: any Zerto reader sees it
    assert forge(agent_user, redis, f"zerto-rewind:vpg:{vpg_id}", "paused-vpg") == 1
    # the gateway's own reading of that record (its key, its state directory): absent
    guards_view = RedisGuardState(redis.url, mac=RecordMac.for_state_dir(box.state_dir))
    assert guards_view.peek_vpg(vpg_id).tag is None
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        retry = await c.call_tool("power_off_vm", {"name": "sql-paused-1"})
    assert retry.is_error
    assert actions(actions_log) == [], "the forged tag let the call run"
    assert "forged-checkpoint" not in text_of(retry)
    assert "forged-checkpoint" not in json.dumps(decisions(box))
    assert [d["row"] for d in decisions(box)][-1] == "failed"
