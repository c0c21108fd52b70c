"""What one token, and all of them, may hold in the gateway: sessions, calls, argument bytes.

Issue 28's abuse: one token opening 10,000 sessions shut every other token out
until they idled out (30 min), and 300 waiting calls of 1 MB each held a gigabyte.
So, per token and in all (``gateway.limits``):

* **Sessions.** A token holds at most ``sessions_per_token`` handshake-era
  sessions, the gateway ``sessions``. A session that does nothing past its
  ``initialize`` within ``handshake_s`` is ended (:class:`BoundedSessionManager`),
  so an abandoned one frees its room within a minute.
* **Calls in flight.** A token has at most ``calls_per_token`` JSON-RPC requests
  (and ``/v1/decide`` calls) being answered at once: a call waiting for an
  approver is one.
* **Argument bytes.** The request bodies a token's calls in flight hold: at most
  ``argument_bytes_per_token``, and ``argument_bytes`` for all tokens. A body is
  the bound of the arguments it carries; it is counted as it arrives.

Past a cap the request gets 429 with ``Retry-After`` and a JSON-RPC error naming the
cap (:class:`Refusal`); it reaches neither the guard nor the upstream, and other
tokens are served as before. The ledger is sans-IO (:class:`Ledger`, :mod:`.ledger`); the doors are
the ASGI layer :class:`TokenLimits` and the SDK's session manager.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .fastlane_wire import CALL_MARKER, STRICT_MESSAGE_KEY, strict_json
from .ledger import LIMITED, OPENING, Hold, Ledger, Refusal
from .proxy import CLIENT_SCOPE_KEY

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BoundedSessionManager", "Hold", "Ledger", "Refusal", "TokenLimits"]

log = logging.getLogger("zerto_rewind.gateway")

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"
# A handshake-era request without a session can only be an initialize: a few hundred
# bytes. One announcing more is refused before its body is read, and its connection
# closed: it does not follow the protocol, and reading a body only to drop it costs more.
_OPENING_MAX_BYTES = 64 * 1024
# _read's answer for a body past gateway.max_body_bytes.
_TOO_LARGE = object()


# ---------------------------------------------------------------------- the ASGI door


class TokenLimits:
    """ASGI middleware after authentication: counts each POST of a known client.

    The body is read here (counted as it arrives, at most ``max_body`` bytes) and
    handed on as one chunk, so the SDK's own read takes the same bytes, not a copy.
    With ``strict_calls`` (the fast lane on), a ``tools/call`` body is parsed here
    strictly, once, and the parse left in the scope for the lane (``STRICT_MESSAGE_KEY``).
    """

    def __init__(
        self, app: ASGIApp, ledger: Ledger, max_body: int, *, strict_calls: bool = False
    ) -> None:
        self.app = app
        self.ledger = ledger
        self.max_body = max_body
        self.strict_calls = strict_calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get(CLIENT_SCOPE_KEY)
        if scope["type"] != "http" or scope.get("method") != "POST" or not isinstance(client, str):
            await self.app(scope, receive, send)
            return
        ledger = self.ledger
        hold = ledger.hold(client)
        try:
            # A body whose length is announced is counted before it is read: refused at
            # once, a large one costs the gateway its headers, not its bytes.
            announced = _length(_header(scope, b"content-length"))
            if announced is not None and announced <= self.max_body:
                refused = ledger.grow(hold, announced)
                if refused is not None:
                    # Kept alive: uvicorn reads the body and drops it (measured cheaper
                    # than a new connection per refusal), and the client reads its 429.
                    await _limited(send, refused, None, scope)
                    return
                if announced > _OPENING_MAX_BYTES and _handshake_opening(scope):
                    await _not_an_opening(send, f"over {_OPENING_MAX_BYTES} bytes", close=True)
                    return
            body = await self._read(receive, hold, counted=announced is not None)
            if isinstance(body, Refusal):
                await _limited(send, body, None, scope)
            elif body is _TOO_LARGE:
                await _too_large(send, self.max_body)
            elif isinstance(body, bytes):
                # Handed over in a box this frame lets go of: while the call waits, the
                # SDK's read of the body is the only copy held.
                box, body = [body], None
                await self._dispatch(scope, receive, send, hold, box)
            # else the client went away before its body was whole: nothing to answer
        finally:
            ledger.release(hold)

    async def _dispatch(
        self, scope: Scope, receive: Receive, send: Send, hold: Hold, box: list[bytes]
    ) -> None:
        method, request_id = _jsonrpc(box[0], scope, strict=self.strict_calls)
        session = _header(scope, _SESSION_HEADER)
        replay = _replay(box, receive)
        if session is None and method != "initialize" and _handshake_opening(scope):
            # The SDK would open a session (its task, its streams), parse the body, then
            # refuse it: refused here at once, with the SDK's own words.
            await _not_an_opening(send, "not an initialize request" if method else "")
            return
        if method is None:  # a notification or a response: answered at once, not a call
            await self.app(scope, replay, send)
            return
        refused = self.ledger.call(hold)
        if refused is not None:
            await _limited(send, refused, request_id, scope)
            return
        if session is not None:
            if method != "initialize":
                self.ledger.used(session)
            await self.app(scope, replay, send)
            return
        if method != "initialize":
            await self.app(scope, replay, send)
            return
        slot = self.ledger.reserve(hold.client)
        if isinstance(slot, Refusal):
            await _limited(send, slot, request_id, scope)
            return
        token = OPENING.set(slot)
        try:
            await self.app(scope, replay, send)
        finally:
            OPENING.reset(token)
            self.ledger.settle(slot)

    async def _read(
        self, receive: Receive, hold: Hold, *, counted: bool
    ) -> bytes | Refusal | object | None:
        """The whole body, counted against the caps as it arrives (unless its announced
        length was); None if the client left."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > self.max_body:  # no Content-Length said so first
                    return _TOO_LARGE
                if not counted:
                    refused = self.ledger.grow(hold, len(chunk))
                    if refused is not None:
                        return refused
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(box: list[bytes], receive: Receive) -> Receive:
    """A ``receive`` that gives the boxed body once (keeping no reference to it), then
    what the connection says (disconnect)."""

    async def replay() -> Message:
        if box:
            return {"type": "http.request", "body": box.pop(), "more_body": False}
        return await receive()

    return replay


def _jsonrpc(body: bytes, scope: Scope, *, strict: bool = False) -> tuple[str | None, Any]:
    """(method, id) of a JSON-RPC request; (None, None) for a notification or response.

    ``/v1/decide`` bodies are hook payloads: each is a call. A body that is not JSON
    counts as a call too (the SDK refuses it; it was held meanwhile). Parsed as the SDK
    parses it (``pydantic_core.from_json``): the same reading of the same bytes, and on
    the event loop a 900 kB argument takes 0.07 ms instead of ``json.loads``' 0.96 ms
    (5.6 ms instead of 8.1 for 855 kB of small objects).

    ``strict``: a body that may be a ``tools/call`` is parsed strictly instead, once, and
    the parse left in the scope for the fast lane, which parsed it a second time before
    (without duplicated keys or NaN the two readings agree; with them, the SDK's reading).
    """
    if not str(scope.get("path", "")).startswith("/mcp"):
        return "decide", None
    try:
        message = _strict_call(body, scope) if strict and CALL_MARKER in body else None
        if message is None:
            message = pydantic_core.from_json(body)
    except ValueError:
        return "unparsed", None
    if not isinstance(message, dict):
        return "unparsed", None
    method = message.get("method")
    if "id" not in message or not isinstance(method, str):
        return None, None
    return method, message.get("id")


def _strict_call(body: bytes, scope: Scope) -> Any:
    """The body parsed strictly and left in ``scope`` for the fast lane; None when the
    strict parse refuses it (the lane then declines it too)."""
    try:
        message = strict_json(body)
    except ValueError:
        return None
    scope[STRICT_MESSAGE_KEY] = message
    return message


def _handshake_opening(scope: Scope) -> bool:
    """A POST to ``/mcp`` the SDK serves as a handshake-era opening: no session, and a
    handshake-era protocol version (or none). Only an ``initialize`` may open one."""
    return (
        str(scope.get("path", "")).startswith("/mcp")
        and _header(scope, _SESSION_HEADER) is None
        and _header(scope, _VERSION_HEADER) in (None, *HANDSHAKE_PROTOCOL_VERSIONS)
    )


def _length(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _limited(send: Send, refusal: Refusal, request_id: Any, scope: Scope) -> None:
    """429: a JSON-RPC error on ``/mcp``; on ``/v1/decide`` the service's own error shape,
    which the thin hook shows in its refusal."""
    cap = {"cap": f"gateway.limits.{refusal.key}", "limit": refusal.limit}
    if str(scope.get("path", "")).startswith("/mcp"):
        error = {"code": LIMITED, "message": refusal.message(), "data": cap}
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "error": error}
    else:
        answer = {"error": refusal.message(), **cap}
    body = json.dumps(answer).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(refusal.retry_after_s).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _not_an_opening(send: Send, why: str, *, close: bool = False) -> None:
    """400 as the SDK answers a request without a session that is not an ``initialize``;
    ``close``: and the connection is closed (``connection: close``), its body unread."""
    text = "Bad Request: Missing session ID" + (f" ({why})" if why else "")
    answer = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": text}}
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _too_large(send: Send, max_body: int) -> None:
    body = json.dumps({"error": f"request body over {max_body} bytes"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------- the SDK's door


class BoundedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, telling the ledger when a session opens and ends,
    and ending sessions that were abandoned after their handshake.

    It overrides the manager's two points of a session's birth and death
    (``_admit_session``, ``_discard_session``): every session passes both, however
    it ends (DELETE, idle timeout, crash, shutdown).
    """

    def __init__(self, *args: Any, ledger: Ledger, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ledger = ledger

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            client = requestor["client_id"] if requestor is not None else "unix-socket"
            self.ledger.admitted(transport.mcp_session_id, client, OPENING.get())
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self.ledger.closed(session_id)
        await super()._discard_session(session_id, transport)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with super().run(), anyio.create_task_group() as tg:
            tg.start_soon(self._reap)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def _reap(self) -> None:
        """End abandoned sessions: a quarter of ``handshake_s`` late at most."""
        every = max(0.05, self.ledger.caps.handshake_s / 4)
        while True:
            await anyio.sleep(every)
            await self.reap()

    async def reap(self) -> int:
        ended = 0
        for session_id in self.ledger.abandoned():
            transport = self._server_instances.get(session_id)
            if transport is not None:
                await self._discard_session(session_id, transport)
                ended += 1
        if ended:
            log.info("ended %d session(s) that did nothing after initialize", ended)
        return ended
