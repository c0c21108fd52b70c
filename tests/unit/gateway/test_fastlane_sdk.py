"""The fast lane's reading of the SDK's HTTP sessions (gateway/fastlane_sdk.py): the one
SDK private name it relies on is checked at start-up, and without it the lane is off."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from zerto_rewind.gateway.fastlane import FastLane
from zerto_rewind.gateway.fastlane_sdk import in_flight, sessions_readable
from zerto_rewind.gateway.fastlane_wire import STRICT_MESSAGE_KEY


def _manager() -> StreamableHTTPSessionManager:
    return StreamableHTTPSessionManager(app=Server("upstream"), session_idle_timeout=60.0)


def test_the_sdks_session_manager_has_what_the_lane_reads(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.gateway"):
        assert sessions_readable([_manager(), _manager()])
    assert caplog.records == []


class _Upstream:
    raw_calls = True  # would take the lane, if the lane were on
    name = "esxi"


def test_without_the_session_tables_the_lane_is_off_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another SDK's manager (no session tables): one warning, and every call, read-only or
    not, goes to the full path untouched."""
    other_sdk: Any = SimpleNamespace(session_idle_timeout=60.0)
    reached: list[dict[str, Any]] = []

    async def full_path(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope)

    with caplog.at_level(logging.WARNING, logger="zerto_rewind.gateway"):
        routes: Any = {"/mcp/esxi": (_Upstream(), other_sdk), "/mcp/b": (_Upstream(), other_sdk)}
        lane = FastLane(full_path, gateway=None, routes=routes, security=None)  # type: ignore[arg-type]
    [warning] = caplog.records
    assert "fast lane is off" in warning.getMessage()
    assert "_server_instances or _session_owners" in warning.getMessage()

    async def receive() -> dict[str, Any]:
        raise AssertionError("the lane read the body: it is not off")

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_vm"}}
    scope = {"type": "http", "method": "POST", "path": "/mcp/esxi", "headers": []}
    scope[STRICT_MESSAGE_KEY] = call  # TokenLimits' parse of a read-only call
    anyio.run(lane, scope, receive, None)
    assert reached == [scope]


def test_a_lane_call_holds_the_session_and_counts_as_activity() -> None:
    async def main() -> None:
        transport = SimpleNamespace(idle_scope=anyio.CancelScope())
        idle = transport.idle_scope
        idle.deadline = anyio.current_time() + 5.0  # about to idle out
        with in_flight(transport, 60.0, 30.0):
            assert idle.deadline >= anyio.current_time() + 89.0  # held past the call's bound
        assert anyio.current_time() + 59.0 <= idle.deadline <= anyio.current_time() + 60.0
        # The SDK's own request or GET stream in flight holds it: left alone.
        idle.deadline = math.inf
        with in_flight(transport, 60.0, 30.0):
            pass
        assert idle.deadline == math.inf
        # A later deadline set meanwhile (another call's) is not shortened.
        idle.deadline = anyio.current_time() + 500.0
        with in_flight(transport, 60.0, 30.0):
            pass
        assert idle.deadline >= anyio.current_time() + 499.0
        # A 2026-07-28 call has no session; a manager without idle timeout, none either.
        with in_flight(None, 60.0, 30.0), in_flight(transport, None, 30.0):
            pass

    anyio.run(main)
