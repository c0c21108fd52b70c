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
tokens are served as before. The ledger is sans-IO (:class:`Ledger`); the doors are
the ASGI layer :class:`TokenLimits` and the SDK's session manager.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from .proxy import CLIENT_SCOPE_KEY

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ..config.settings import LimitsSettings

__all__ = ["BoundedSessionManager", "Hold", "Ledger", "Refusal", "TokenLimits"]

log = logging.getLogger("zerto_rewind.gateway")

_SESSION_HEADER = b"mcp-session-id"
# The JSON-RPC error code of a refusal for load (the implementation-defined range).
LIMITED = -32029
# _read's answer for a body past gateway.max_body_bytes.
_TOO_LARGE = object()
# One log line per token and cap this often: a flood of refusals is not a flood of lines.
_LOG_EVERY_S = 60.0


@dataclass(frozen=True)
class Refusal:
    """A cap reached: which (its config key), its value, who, and when to try again."""

    key: str
    limit: int
    client: str
    retry_after_s: int
    what: str

    def message(self) -> str:
        return (
            f"zerto-rewind: {self.client} {self.what}, the most this gateway allows "
            f"(gateway.limits.{self.key}: {self.limit}). The request was not run; "
            f"retry after {self.retry_after_s} s."
        )


class _Session:
    __slots__ = ("client", "opened", "used")

    def __init__(self, client: str, opened: float) -> None:
        self.client = client
        self.opened = opened
        self.used = False


class Slot:
    """A session being opened: counted from before the SDK admits it."""

    __slots__ = ("client", "session_id")

    def __init__(self, client: str) -> None:
        self.client = client
        self.session_id: str | None = None


class Hold:
    """What one request in flight holds: its body's bytes, and a call if it is one."""

    __slots__ = ("call", "client", "size")

    def __init__(self, client: str) -> None:
        self.client = client
        self.size = 0
        self.call = False


# The opening request's slot, for the session manager's admission (same task).
_OPENING: contextvars.ContextVar[Slot | None] = contextvars.ContextVar(
    "zerto_rewind_opening", default=None
)


class Ledger:
    """Counts per token and in all; refuses past a cap. No IO: the doors call it."""

    def __init__(
        self,
        caps: LimitsSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.caps = caps
        self.on_refused = on_refused  # the cap's key: a metric counts refusals by cap
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self.session_count: Counter[str] = Counter()  # live and being opened, per token
        self.sessions_total = 0
        self.calls: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self.held_total = 0
        self._logged: dict[tuple[str, str], float] = {}

    # ------------------------------------------------------------------ sessions

    def reserve(self, client: str) -> Slot | Refusal:
        caps = self.caps
        wait = math.ceil(caps.handshake_s)
        if self.session_count[client] >= caps.sessions_per_token:
            what = f"holds {self.session_count[client]} open sessions"
            return self._refused("sessions_per_token", caps.sessions_per_token, client, wait, what)
        if self.sessions_total >= caps.sessions:
            what = f"cannot open a session: {self.sessions_total} are open in all"
            return self._refused("sessions", caps.sessions, client, wait, what)
        self.session_count[client] += 1
        self.sessions_total += 1
        return Slot(client)

    def admitted(self, session_id: str, client: str, slot: Slot | None) -> None:
        """The SDK opened ``session_id``: its count moves from the slot to the session."""
        if slot is None or slot.session_id is not None or slot.client != client:
            self.session_count[client] += 1  # opened without a slot: counted all the same
            self.sessions_total += 1
        else:
            slot.session_id = session_id
        # Its handshake time starts once the opening is answered (settle): an initialize
        # that waits for the upstream is not an abandoned session.
        bound = slot is not None and slot.session_id == session_id
        opened = math.inf if bound else self._clock()
        self._sessions[session_id] = _Session(client, opened)

    def settle(self, slot: Slot) -> None:
        """The opening request ended; a slot the SDK did not use frees its room."""
        if slot.session_id is None:
            self._uncount(slot.client)
            return
        session = self._sessions.get(slot.session_id)
        if session is not None:
            session.opened = self._clock()

    def closed(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._uncount(session.client)

    def used(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.used = True

    def abandoned(self) -> list[str]:
        """Sessions that did nothing past ``initialize`` within ``handshake_s``."""
        cutoff = self._clock() - self.caps.handshake_s
        return [sid for sid, s in self._sessions.items() if not s.used and s.opened <= cutoff]

    def _uncount(self, client: str) -> None:
        self.session_count[client] -= 1
        if self.session_count[client] <= 0:
            del self.session_count[client]
        self.sessions_total -= 1

    # ------------------------------------------------------------------ calls and bytes

    def hold(self, client: str) -> Hold:
        return Hold(client)

    def grow(self, hold: Hold, size: int) -> Refusal | None:
        """``size`` more bytes of ``hold``'s body arrived (or were announced)."""
        caps, client = self.caps, hold.client
        wait = self.caps.retry_after_s
        if self.held[client] + size > caps.argument_bytes_per_token:
            what = f"would hold {self.held[client] + size} bytes of calls in flight"
            key, limit = "argument_bytes_per_token", caps.argument_bytes_per_token
            return self._refused(key, limit, client, wait, what)
        if self.held_total + size > caps.argument_bytes:
            what = f"cannot add {size} bytes: calls in flight hold {self.held_total} in all"
            return self._refused("argument_bytes", caps.argument_bytes, client, wait, what)
        hold.size += size
        self.held[client] += size
        self.held_total += size
        return None

    def call(self, hold: Hold) -> Refusal | None:
        """``hold`` is a call (a JSON-RPC request): one more in flight for its token."""
        client = hold.client
        if self.calls[client] >= self.caps.calls_per_token:
            what = f"has {self.calls[client]} calls in flight"
            key, limit = "calls_per_token", self.caps.calls_per_token
            return self._refused(key, limit, client, self.caps.retry_after_s, what)
        hold.call = True
        self.calls[client] += 1
        return None

    def release(self, hold: Hold) -> None:
        client = hold.client
        if hold.call:
            hold.call = False
            self.calls[client] -= 1
            if self.calls[client] <= 0:
                del self.calls[client]
        if hold.size:
            self.held[client] -= hold.size
            if self.held[client] <= 0:
                del self.held[client]
            self.held_total -= hold.size
            hold.size = 0

    def _refused(self, key: str, limit: int, client: str, wait: int, what: str) -> Refusal:
        if self.on_refused is not None:
            self.on_refused(key)
        now = self._clock()
        if now - self._logged.get((client, key), -_LOG_EVERY_S) >= _LOG_EVERY_S:
            if len(self._logged) > 4096:  # bounded, like everything else here
                self._logged.clear()
            self._logged[(client, key)] = now
            log.warning("refused %s: gateway.limits.%s (%d) reached", client, key, limit)
        return Refusal(key, limit, client, wait, what)


# ---------------------------------------------------------------------- the ASGI door


class TokenLimits:
    """ASGI middleware after authentication: counts each POST of a known client.

    The body is read here (counted as it arrives, at most ``max_body`` bytes) and
    handed on as one chunk, so the SDK's own read takes the same bytes, not a copy.
    """

    def __init__(self, app: ASGIApp, ledger: Ledger, max_body: int) -> None:
        self.app = app
        self.ledger = ledger
        self.max_body = max_body

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
                    await _limited(send, refused, None, scope)
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
        method, request_id = _jsonrpc(box[0], scope)
        session = _header(scope, _SESSION_HEADER)
        replay = _replay(box, receive)
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
        token = _OPENING.set(slot)
        try:
            await self.app(scope, replay, send)
        finally:
            _OPENING.reset(token)
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


def _jsonrpc(body: bytes, scope: Scope) -> tuple[str | None, Any]:
    """(method, id) of a JSON-RPC request; (None, None) for a notification or response.

    ``/v1/decide`` bodies are hook payloads: each is a call. A body that is not JSON
    counts as a call too (the SDK refuses it; it was held meanwhile).
    """
    if not str(scope.get("path", "")).startswith("/mcp"):
        return "decide", None
    try:
        message = json.loads(body)
    except ValueError:
        return "unparsed", None
    if not isinstance(message, dict):
        return "unparsed", None
    method = message.get("method")
    if "id" not in message or not isinstance(method, str):
        return None, None
    return method, message.get("id")


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
            self.ledger.admitted(transport.mcp_session_id, client, _OPENING.get())
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
