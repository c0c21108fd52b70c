"""The gateway's faults: each one ends in a tool or protocol error, never an unguarded call."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    StartGateway,
    client,
    decisions,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio
FLAKY = Path(__file__).with_name("flaky_server.py")
BUDGET_S = 4.0


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    # A short landing allowance keeps a vCenter tag (2 s cadence) inside the 4 s budget.
    guard = {"timeout_s": BUDGET_S, "landing_allowance_s": 0.5}
    with Sandbox(str(tmp_path / "box"), guard=guard) as sandbox:
        yield sandbox


@pytest.fixture
def control(tmp_path: Path) -> Path:
    return tmp_path / "flaky-control"


@pytest.fixture
def flaky_actions(tmp_path: Path) -> Path:
    return tmp_path / "flaky-actions.jsonl"


@pytest.fixture
def gw(start_gateway: StartGateway, control: Path, flaky_actions: Path) -> GatewayProcess:
    upstream: dict[str, Any] = {
        "command": [sys.executable, str(FLAKY)],
        "env": {"FLAKY_CONTROL": str(control), "FLAKY_ACTIONS": str(flaky_actions)},
        "timeout_s": BUDGET_S,
    }
    return start_gateway(upstream=upstream, gateway={"max_body_bytes": 64_000})


def ran(flaky_actions: Path) -> int:
    return len(flaky_actions.read_text().splitlines()) if flaky_actions.exists() else 0


async def test_a_crashed_upstream_is_a_tool_error_then_it_is_restarted(
    gw: GatewayProcess, control: Path, flaky_actions: Path
) -> None:
    """The server dies mid-call: the caller gets a tool error in time; the next call works."""
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        control.write_text("crash")
        started = time.monotonic()
        crashed = await c.call_tool("list_vms", {})
        assert crashed.is_error
        assert time.monotonic() - started < BUDGET_S + 1
        assert "'vsphere'" in text_of(crashed)
        control.write_text("")
        with anyio.fail_after(20):
            while True:
                again = await c.call_tool("list_vms", {})
                if not again.is_error:
                    break
                await anyio.sleep(0.2)
    assert "jp-ubuntu" in text_of(again)


async def test_a_hung_upstream_is_a_tool_error_within_the_budget(
    gw: GatewayProcess, control: Path
) -> None:
    """The server never answers: the caller hears so within the upstream timeout, plus slack."""
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        control.write_text("hang")
        started = time.monotonic()
        hung = await c.call_tool("list_vms", {})
    assert hung.is_error
    assert "did not answer list_vms" in text_of(hung)
    assert time.monotonic() - started < BUDGET_S + 4  # + the ping that finds it hung


async def test_a_zvm_that_is_down_denies_mutating_calls_and_passes_read_only(
    gw: GatewayProcess, box: Sandbox, flaky_actions: Path
) -> None:
    """ZVM unreachable: power_off_vm is refused with the reason and never reaches the server."""
    box.control("POST", "/_sim/faults", {"route": "/v1/.*", "kind": "status", "status": 503})
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        listed = await c.call_tool("list_vms", {})
        refused = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert not listed.is_error
    assert refused.is_error
    assert ran(flaky_actions) == 0
    assert decisions(box)[-1]["decision"] == "deny"


async def test_malformed_and_oversized_requests_get_protocol_errors_and_serving_goes_on(
    gw: GatewayProcess,
) -> None:
    """Bad JSON, a non-JSON-RPC body and a body over the limit are refused; others still work."""
    headers = {
        "Authorization": f"Bearer {TOKENS['agent-a']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    url = gw.endpoint()
    bad_json = httpx.post(url, content=b"{not json", headers=headers, timeout=10)
    assert 400 <= bad_json.status_code < 500
    not_rpc = httpx.post(url, json={"hello": "world"}, headers=headers, timeout=10)
    assert 400 <= not_rpc.status_code < 500
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "' + b"a" * 100_000 + b'"}'
    oversized = httpx.post(url, content=huge, headers=headers, timeout=10)
    assert oversized.status_code == 413
    async with client(gw.endpoint(), TOKENS["agent-b"]) as c:
        assert not (await c.call_tool("list_vms", {})).is_error


async def test_a_client_that_disconnects_mid_wait_leaves_no_half_state(
    gw: GatewayProcess, box: Sandbox, flaky_actions: Path
) -> None:
    """Hang up while the guard waits for a tag: nothing runs, and the next call is served."""
    with anyio.move_on_after(0.3):
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    # The abandoned call may still be decided; it must never reach the server.
    await anyio.sleep(BUDGET_S + 1)
    assert ran(flaky_actions) == 0
    async with client(gw.endpoint(), TOKENS["agent-b"]) as c:
        result = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert not result.is_error, text_of(result)
    assert ran(flaky_actions) == 1
    # The abandoned call's tag was requested and then reused: one tag for one change.
    assert box.tag_requests("jp-local") == 1
