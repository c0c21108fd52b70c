"""A stdio upstream's transport: the SDK's ``stdio_client``, with a tap for the read-only fast lane.

The process, its pipes, the framing and parsing and the shutdown are the SDK's
own public ``mcp.client.stdio.stdio_client``, unchanged. Between it and the
SDK's ``ClientSession`` sit two memory streams of ours and one forwarding task
each way:

- inbound, every message the server sends goes on to the session unchanged,
  except a response whose id is a fast-lane id (``zr-lane-N``, a string; the
  SDK's dispatcher mints integers), which goes to the fast-lane call waiting
  for it;
- outbound, every message the session sends goes on to the server unchanged;
  the tap notes the ``_meta`` envelope of the session's latest request (on a
  2026-07-28 server: protocol version, client info, capabilities, log level),
  so the fast lane's requests carry the same envelope without reading the
  SDK's private state.

The fast lane's own request (:meth:`LaneTap.request`) is a ``SessionMessage``
built from the fast lane's one strict parse and written to the transport's
write stream, which serializes it as it does the SDK's. It costs the SDK's
parse of the answer into a model (a few tens of microseconds) and one hop
through the inbound task; it saves the SDK client's request path (dispatcher,
request models, its tasks), about 0.4 ms of CPU per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import anyio
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
)

from ..errors import ZertoRewindError

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client.stdio import StdioServerParameters

    Inbound = SessionMessage | Exception
    Streams = tuple[MemoryObjectReceiveStream[Inbound], MemoryObjectSendStream[SessionMessage]]

__all__ = ["LaneClosedError", "LaneTap", "Sender", "interpose", "tapped_stdio_client"]


class Sender(Protocol):
    """The transport's write stream, as the tap uses it."""

    async def send(self, item: SessionMessage, /) -> None: ...


_ID_PREFIX = "zr-lane-"
_ENVELOPE_KEYS = (
    PROTOCOL_VERSION_META_KEY,
    CLIENT_INFO_META_KEY,
    CLIENT_CAPABILITIES_META_KEY,
    LOG_LEVEL_META_KEY,
)
_NEGOTIATION = ("initialize", "server/discover")  # sent before the era's envelope exists


class LaneClosedError(ZertoRewindError):
    """The server's pipes closed (or were never open) while a fast-lane call waited.

    Never shown as is: the upstream turns it into its own UpstreamError (the full
    path's words), after checking the connection.
    """


class LaneTap:
    """The fast lane's own requests on a stdio server's pipes, correlated by id."""

    def __init__(self) -> None:
        self._write: Sender | None = None
        self._pending: dict[str, asyncio.Future[JSONRPCResponse | JSONRPCError]] = {}
        self._next = 0
        self._envelope: dict[str, Any] | None = None

    @property
    def open(self) -> bool:
        return self._write is not None

    @property
    def envelope(self) -> dict[str, Any] | None:
        """The ``_meta`` envelope of the SDK session's latest request on these pipes
        (empty before 2026-07-28); None until the session has sent one."""
        return self._envelope

    async def request(
        self, method: str, params: dict[str, Any], timeout_s: float
    ) -> JSONRPCResponse | JSONRPCError:
        """Send one request and return the server's answer; TimeoutError past ``timeout_s``,
        LaneClosedError when the pipes are (or become) closed."""
        write = self._write
        if write is None:
            msg = "the server's pipes are closed"
            raise LaneClosedError(msg)
        self._next += 1
        request_id = f"{_ID_PREFIX}{self._next}"
        message = JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[JSONRPCResponse | JSONRPCError] = loop.create_future()
        # A timer on the future, not a cancel scope: the same bound for less work per call.
        expiry = loop.call_later(timeout_s, _expire, answer)
        self._pending[request_id] = answer
        try:
            await _hand_over(write, SessionMessage(message))
            return await answer
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            msg = "the server's pipes closed"
            raise LaneClosedError(msg) from exc
        finally:
            expiry.cancel()
            self._pending.pop(request_id, None)

    def claim(self, item: SessionMessage | Exception) -> bool:
        """Take ``item`` if it answers a fast-lane request; else leave it for the session.

        An answer to a fast-lane id that no call waits for any more (it timed out) is
        dropped too: the session never sent that id and would only log it as unknown.
        """
        if not isinstance(item, SessionMessage):
            return False
        message = item.message
        if not isinstance(message, JSONRPCResponse | JSONRPCError):
            return False
        request_id = message.id
        if not isinstance(request_id, str) or not request_id.startswith(_ID_PREFIX):
            return False
        answer = self._pending.get(request_id)
        if answer is not None and not answer.done():
            answer.set_result(message)
        return True

    def note(self, item: SessionMessage) -> None:
        """Remember the era's envelope from a request the SDK session sends."""
        message = item.message
        if not isinstance(message, JSONRPCRequest) or message.method in _NEGOTIATION:
            return
        meta = (message.params or {}).get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        self._envelope = {key: meta[key] for key in _ENVELOPE_KEYS if key in meta}

    def attach(self, write: Sender) -> None:
        self._write = write
        self._envelope = None  # a new connection: its session states its own era

    def detach(self) -> None:
        """The pipes are closing: no new request, and every waiting one fails."""
        self._write = None
        pending, self._pending = self._pending, {}
        for answer in pending.values():
            if not answer.done():
                answer.set_exception(LaneClosedError("the server's pipes closed"))


async def _hand_over(write: Sender, item: SessionMessage) -> None:
    """``write.send(item)``; to the SDK's writer task at once when it waits for it (it does,
    between requests), without the loop's turn that ``send``'s checkpoint takes first."""
    send_nowait = getattr(write, "send_nowait", None)  # the SDK's is a memory stream
    if send_nowait is not None:
        try:
            send_nowait(item)
        except anyio.WouldBlock:
            pass
        else:
            return
    await write.send(item)


def _expire(answer: asyncio.Future[Any]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())


@asynccontextmanager
async def tapped_stdio_client(
    server: StdioServerParameters, errlog: TextIO, tap: LaneTap
) -> AsyncGenerator[Streams, None]:
    """``mcp.client.stdio.stdio_client(server, errlog)``, with ``tap`` before the session."""
    async with (
        stdio_client(server, errlog) as (transport_read, transport_write),
        interpose(transport_read, transport_write, tap) as streams,
    ):
        yield streams


@asynccontextmanager
async def interpose(
    transport_read: AsyncIterable[SessionMessage | Exception],
    transport_write: Sender,
    tap: LaneTap,
) -> AsyncGenerator[Streams, None]:
    """The session's pair of streams over a transport's, with ``tap`` on the way."""
    to_session, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    tap.attach(transport_write)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_inbound, transport_read, to_session, tap)
            tg.start_soon(_outbound, from_session, transport_write, tap)
            try:
                yield session_read, session_write
            finally:
                tg.cancel_scope.cancel()
    finally:
        tap.detach()
        for stream in (to_session, session_read, session_write, from_session):
            stream.close()


async def _inbound(
    source: AsyncIterable[SessionMessage | Exception],
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    tap: LaneTap,
) -> None:
    """The server's messages: the fast lane's answers to it, the rest to the session.
    When the server's side ends, so does the session's, and waiting lane calls fail."""
    try:
        async with sink:
            async for item in source:
                if tap.claim(item):
                    continue
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the session or the transport closed first; the shutdown follows
    finally:
        tap.detach()


async def _outbound(
    source: MemoryObjectReceiveStream[SessionMessage],
    sink: Sender,
    tap: LaneTap,
) -> None:
    """The session's messages to the server, unchanged; the envelope noted on the way."""
    try:
        async with source:
            async for item in source:
                tap.note(item)
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        tap.detach()  # the server's stdin is gone: no fast-lane request either
