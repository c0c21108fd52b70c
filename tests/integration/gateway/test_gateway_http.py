"""The gateway as a process over streamable HTTP, driven by the SDK's own client."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    GatewayProcess,
    actions,
    client,
    decisions,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


async def test_tools_are_presented_unchanged(gw: GatewayProcess) -> None:
    """tools/list through the gateway equals the upstream's own list (names, schemas, hints)."""
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        tools = (await c.list_tools()).tools
    names = {t.name for t in tools}
    assert {"list_vms", "get_vm", "power_off_vm", "mystery_tool"} <= names
    power_off = next(t for t in tools if t.name == "power_off_vm")
    assert power_off.input_schema["properties"]["name"]["type"] == "string"


async def test_read_only_is_forwarded_and_confirmed_names_the_checkpoint(
    gw: GatewayProcess, box: Sandbox, actions_log: Path
) -> None:
    """list_vms runs untouched; power_off_vm runs after a landed tag, and says which one."""
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        listed = await c.call_tool("list_vms", {})
        assert not listed.is_error
        result = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert not result.is_error, text_of(result)
    assert "a Zerto checkpoint protects this mcp__vsphere__power_off_vm call" in text_of(result)
    (cp,) = (result.meta or {})["zerto-rewind/checkpoints"]
    assert (cp["vm"], cp["vpg"]) == ("jp-ubuntu", "jp-local")
    assert cp["checkpoint_id"]
    assert box.tag_requests("jp-local") == 1
    assert [a["tool"] for a in actions(actions_log)] == ["power_off_vm"]
    logged = [d for d in decisions(box) if d["tool"] == "mcp__vsphere__power_off_vm"]
    last = logged[-1]
    assert (last["row"], last["client"], last["origin"]) == ("confirmed", "agent-a", "gateway")


async def test_failed_and_unlisted_are_not_forwarded(gw: GatewayProcess, actions_log: Path) -> None:
    """A paused VPG fails; an unlisted tool without elicitation is refused; neither runs."""
    async with client(gw.endpoint(), TOKENS["agent-b"]) as c:
        failed = await c.call_tool("power_off_vm", {"name": "sql-paused-1"})
        unlisted = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert failed.is_error
    assert "paused-vpg" in text_of(failed)
    assert unlisted.is_error
    assert "no approver configured" in text_of(unlisted)
    assert actions(actions_log) == []


async def test_a_bad_or_missing_token_gets_401_and_reaches_no_upstream(
    gw: GatewayProcess, actions_log: Path
) -> None:
    """No token, a wrong token, a wrong scheme: 401 before any MCP handling."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "power_off_vm", "arguments": {"name": "jp-ubuntu"}},
    }
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": f"Basic {TOKENS['agent-a']}"},
    ):
        response = httpx.post(gw.endpoint(), json=body, headers=headers, timeout=10)
        assert response.status_code == 401
    assert actions(actions_log) == []


async def test_metrics_and_health(gw: GatewayProcess) -> None:
    """/healthz is ready with a live ZVM and upstream; /metrics counts decisions by row."""
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        await c.call_tool("list_vms", {})
    health = httpx.get(f"{gw.url}/healthz", headers=METRICS_HEADERS, timeout=10)
    assert health.status_code == 200, health.text
    assert health.json()["upstreams"] == {"vsphere": "connected"}
    metrics = httpx.get(f"{gw.url}/metrics", headers=METRICS_HEADERS, timeout=10).text
    assert 'zerto_rewind_decisions_total{outcome="none",row="read_only"} 1.0' in metrics
