"""The fast lane's tap between a stdio transport's streams and the SDK session
(gateway/stdio_tap.py), on memory streams standing in for the SDK's transport:
the lane's requests go out as SessionMessages under ids of its own, their answers
come back to the lane only, and everything else passes through unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import (
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from zerto_rewind.errors import ZertoRewindError
from zerto_rewind.gateway.stdio_tap import LaneClosedError, LaneTap, interpose

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Wire:
    """The transport's side: what reaches the server, and the server's messages."""

    def __init__(self) -> None:
        inbound = anyio.create_memory_object_stream[SessionMessage | Exception](8)
        self.from_server, self.read = inbound
        self.write, self.to_server = anyio.create_memory_object_stream[SessionMessage](8)


@asynccontextmanager
async def tapped(tap: LaneTap) -> AsyncIterator[tuple[Wire, Any, Any]]:
    wire = Wire()
    try:
        async with interpose(wire.read, wire.write, tap) as (session_read, session_write):
            yield wire, session_read, session_write
    finally:
        for stream in (wire.from_server, wire.read, wire.write, wire.to_server):
            stream.close()


def _answer(request_id: str | int, **result: Any) -> SessionMessage:
    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))


async def test_a_request_is_answered_by_its_own_id_only() -> None:
    tap = LaneTap()
    got: list[Any] = []
    params = {"name": "get_vm", "arguments": {"vm": "web-01"}}
    async with tapped(tap) as (wire, session_read, _session_write):

        async def ask() -> None:
            got.append(await tap.request("tools/call", params, 5.0))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            sent = (await wire.to_server.receive()).message
            assert isinstance(sent, JSONRPCRequest)
            assert isinstance(sent.id, str)
            assert sent.id.startswith("zr-lane-")
            assert (sent.method, sent.params) == ("tools/call", params)
            # The SDK's own answer, a notification, and a parse error reach the session.
            await wire.from_server.send(_answer(1, text=f'"id":"{sent.id}"'))
            assert (await session_read.receive()).message.id == 1
            note = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/x"))
            await wire.from_server.send(note)
            assert (await session_read.receive()) is note
            bad = ValueError("not JSON")
            await wire.from_server.send(bad)
            assert (await session_read.receive()) is bad
            await wire.from_server.send(_answer(sent.id, content=[]))
        assert [a.result for a in got] == [{"content": []}]
        # A late copy of a lane answer is the lane's: the session never sent that id.
        await wire.from_server.send(_answer(sent.id, content=[]))
        await wire.from_server.send(_answer(2))
        assert (await session_read.receive()).message.id == 2


async def test_an_error_answer_is_returned_as_is() -> None:
    tap = LaneTap()
    async with tapped(tap) as (wire, _read, _write):
        got: list[Any] = []

        async def ask() -> None:
            got.append(await tap.request("tools/call", {"name": "x"}, 5.0))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            sent = (await wire.to_server.receive()).message
            no = ErrorData(code=-32602, message="no")
            error = JSONRPCError(jsonrpc="2.0", id=sent.id, error=no)
            await wire.from_server.send(SessionMessage(error))
    assert got == [error]


async def test_the_envelope_is_the_sessions_latest_request() -> None:
    tap = LaneTap()
    async with tapped(tap) as (wire, _read, session_write):
        assert tap.envelope is None  # nothing sent yet: the fast lane waits for it
        meta = {PROTOCOL_VERSION_META_KEY: "2026-07-28", "traceparent": "00-ab-cd-01"}
        params = {"_meta": meta}
        discover = JSONRPCRequest(jsonrpc="2.0", id=1, method="server/discover", params=params)
        await session_write.send(SessionMessage(discover))
        assert (await wire.to_server.receive()).message is discover
        assert tap.envelope is None, "a negotiation request states no era yet"
        listing = JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/list", params=params)
        await session_write.send(SessionMessage(listing))
        assert (await wire.to_server.receive()).message is listing
        assert tap.envelope == {PROTOCOL_VERSION_META_KEY: "2026-07-28"}  # no trace context
        ping = JSONRPCRequest(jsonrpc="2.0", id=3, method="ping")
        await session_write.send(SessionMessage(ping))
        await wire.to_server.receive()
        assert tap.envelope == {}, "a handshake-era request carries no envelope"


async def test_a_request_times_out_and_fails_when_the_pipes_close() -> None:
    tap = LaneTap()
    with pytest.raises(LaneClosedError) as closed:
        await tap.request("tools/call", {}, 5.0)
    assert isinstance(closed.value, ZertoRewindError)
    failed: list[BaseException] = []
    async with tapped(tap) as (wire, session_read, _write):
        with pytest.raises(TimeoutError):
            await tap.request("tools/call", {}, 0.05)
        await wire.to_server.receive()

        async def ask() -> None:
            try:
                await tap.request("tools/call", {}, 5.0)
            except LaneClosedError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await wire.to_server.receive()
            wire.from_server.close()  # the server exited: its stdout ends
        with pytest.raises(anyio.EndOfStream):
            await session_read.receive()  # the session hears the end too
    assert len(failed) == 1
    assert not tap.open


@pytest.mark.parametrize("writer_waits", [True, False])
async def test_a_request_reaches_a_waiting_or_a_busy_writer(writer_waits: bool) -> None:
    """The SDK's writer stream holds nothing (size 0): a writer waiting takes the request at
    once; one busy writing (nobody receiving yet) gets it when it comes back for it."""
    tap = LaneTap()
    write, to_server = anyio.create_memory_object_stream[SessionMessage](0)
    tap.attach(write)
    got: list[Any] = []

    async def server() -> None:
        if not writer_waits:
            await anyio.sleep(0.05)  # writing something else meanwhile
        sent = (await to_server.receive()).message
        got.append(sent)
        assert tap.claim(_answer(sent.id, content=[]))

    with write, to_server:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server)
            await anyio.sleep(0.01)
            answer = await tap.request("tools/call", {"name": "get_vm"}, 5.0)
    assert isinstance(answer, JSONRPCResponse)
    assert [m.method for m in got] == ["tools/call"]
