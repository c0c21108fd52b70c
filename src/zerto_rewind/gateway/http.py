"""The gateway over streamable HTTP: ``/mcp/<upstream>``, bearer tokens, metrics and health.

Every request to ``/mcp/…`` needs ``Authorization: Bearer <token>``; the config
lists each client's token as a SHA-256 digest. A missing or unknown token gets
401 and reaches no upstream. ``/healthz`` (for load balancers) and ``/metrics``
(for Prometheus) carry no secret and no argument value; who reads how much of
them is :mod:`.probes`' to say.

A handshake-era session (``Mcp-Session-Id``) is bound to the client that opened
it: another client presenting its id gets 404, as if it did not exist, and never
reaches the SDK (:class:`SessionBindings`).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import (
    DEFAULT_MAX_SESSIONS,
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ConfigError
from ..netutil import is_loopback, token_digest
from . import probes
from .decide import decide_endpoint, result_endpoint
from .fastlane import FastLane
from .limits import BoundedSessionManager, Ledger, TokenLimits
from .proxy import CLIENT_SCOPE_KEY, PEER_USER_KEY, build_proxy

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .service import Gateway
    from .upstream import Upstream

__all__ = ["build_app", "check_bind", "token_digest"]

log = logging.getLogger("zerto_rewind.gateway")


def check_bind(host: str, *, tls: bool, allow_insecure: bool) -> None:
    """Refuse to serve tokens in clear text beyond this machine unless told to."""
    if tls or allow_insecure or is_loopback(host):
        return
    msg = (
        f"refusing to listen on {host} without TLS: bearer tokens and tool calls would cross "
        "the network in clear text. Set gateway.tls_cert and gateway.tls_key, or "
        "gateway.allow_insecure_bind: true if a TLS proxy in front does it"
    )
    raise ConfigError(msg)


# Paths that need a bearer token (over TCP; the unix socket's file mode is its guard).
_PROTECTED = ("/mcp", "/v1/")
_SESSION_HEADER = b"mcp-session-id"
# How long past the SDK's own idle deadline a binding is kept before it counts as dead.
_IDLE_MARGIN_S = 60.0
# Front entries looked at per new binding when expiring idle ones: O(1) per request.
_SWEEP_STEPS = 4


class _Binding:
    __slots__ = ("in_flight", "last", "owner")

    def __init__(self, owner: str, in_flight: int, last: float) -> None:
        self.owner = owner
        self.in_flight = in_flight
        self.last = last


class SessionBindings:
    """Which client opened each streamable-HTTP session: session id → client name.

    Memory is bounded two ways, and neither may let a stranger into a live session:

    * **Idle expiry, exact.** The SDK ends a session once no request of it has been
      in flight for its ``session_idle_timeout`` (30 min), and every request of the
      session passes through here. So the binding counts the session's requests in
      flight and the end of the last one; with none in flight for the SDK's timeout
      plus a margin, the SDK has already discarded the session and its id answers
      404 to anyone: the binding is dropped outright, nothing is lost.
    * **Capacity, fail closed.** Beyond ``capacity`` live bindings (a flood of
      sessions, or ``idle_s`` None) the least recently used binding is dropped, but
      its session may still be open in the SDK. Forgetting it would let anyone's
      token through to that session, so its id moves to a bounded *retired* set
      that refuses it to everyone, its owner included (who opens a new session).
      Retired ids expire like live ones (the SDK has ended them by then); only if
      the retired set itself overflows is an id forgotten early, and then the SDK's
      own owner check (``scope["user"]``, set by :class:`_BearerAuth`) still
      refuses any other client.
    """

    def __init__(
        self,
        capacity: int = DEFAULT_MAX_SESSIONS,
        *,
        idle_s: float | None = None,
        retired_capacity: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity <= 0:
            msg = "capacity must be positive"
            raise ValueError(msg)
        self.capacity = capacity
        self.retired_capacity = capacity if retired_capacity is None else retired_capacity
        self.expire_after = None if idle_s is None else idle_s + _IDLE_MARGIN_S
        self._clock = clock
        # Both least recently active first.
        self._live: OrderedDict[str, _Binding] = OrderedDict()
        self._retired: OrderedDict[str, _Binding] = OrderedDict()

    def __len__(self) -> int:
        return len(self._live)

    def owner(self, session_id: str) -> str | None:
        """The client a live binding names, or None."""
        binding = self._live.get(session_id)
        return binding.owner if binding is not None else None

    def retired_owner(self, session_id: str) -> str | None:
        """The client a binding dropped for room named: its id is refused to everyone."""
        binding = self._retired.get(session_id)
        return binding.owner if binding is not None else None

    def bind(self, session_id: str, owner: str, *, in_flight: int = 1) -> bool:
        """Record a new session (its opening request in flight); never rebinds a known id."""
        if session_id in self._live or session_id in self._retired:
            return False
        now = self._clock()
        self._live[session_id] = _Binding(owner, in_flight, now)
        self._sweep(self._live, now)
        self._sweep(self._retired, now)
        while len(self._live) > self.capacity:
            old_id, old = self._live.popitem(last=False)
            self._retired[old_id] = old
        while len(self._retired) > self.retired_capacity:
            self._retired.popitem(last=False)
        return True

    def begin(self, session_id: str) -> None:
        """A request of a live session starts (the owner's: checked before)."""
        binding = self._live[session_id]
        binding.in_flight += 1
        binding.last = self._clock()
        self._live.move_to_end(session_id)

    def end(self, session_id: str) -> None:
        """A request ends; its binding may since have been forgotten, or retired."""
        table = self._live if session_id in self._live else self._retired
        binding = table.get(session_id)
        if binding is not None:
            binding.in_flight -= 1
            binding.last = self._clock()
            if table is self._live:
                table.move_to_end(session_id)

    def forget(self, session_id: str) -> None:
        """The owner ended the session (DELETE): the SDK has discarded it."""
        self._live.pop(session_id, None)

    def _sweep(self, table: OrderedDict[str, _Binding], now: float) -> None:
        """Drop bindings of sessions the SDK has certainly ended by idling out."""
        if self.expire_after is None:
            return
        for _ in range(_SWEEP_STEPS):
            if not table:
                return
            session_id, binding = next(iter(table.items()))
            if binding.in_flight > 0:  # open (a GET stream, a long call): active now
                binding.last = now
                table.move_to_end(session_id)
            elif now - binding.last > self.expire_after:
                del table[session_id]
            else:
                return


def _unix_client(scope: Scope) -> str:
    """A unix-socket caller: its user as the kernel reported it (``run``'s protocol), if known."""
    user = scope.get(PEER_USER_KEY)
    return f"unix:{user}" if isinstance(user, str) else "unix-socket"


def _user(name: str) -> AuthenticatedUser:
    """The principal as the SDK knows one: its session manager binds sessions to it too."""
    return AuthenticatedUser(AccessToken(token="", client_id=name, scopes=[]))


class _BearerAuth:
    """ASGI middleware: ``/mcp`` and ``/v1`` need a known token; the client's name goes in scope.

    It also binds each session to the client that opened it (:class:`SessionBindings`).
    """

    def __init__(
        self,
        app: ASGIApp,
        clients: dict[str, str],
        max_body: int,
        sessions: SessionBindings | None = None,
    ) -> None:
        self.app = app
        self.digests = [(name, digest) for name, digest in clients.items()]
        self.max_body = max_body
        self.sessions = SessionBindings() if sessions is None else sessions
        self.users = {name: _user(name) for name in [*clients, "unix-socket"]}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(_PROTECTED):
            await self.app(scope, receive, send)
            return
        authorization = b""
        length: bytes | None = None
        session: bytes | None = None
        sessions_seen = 0
        for key, value in scope.get("headers") or ():
            if key == b"authorization":
                authorization = value
            elif key == b"content-length":
                length = value
            elif key == _SESSION_HEADER:
                session = session if sessions_seen else value  # the first, as Starlette reads it
                sessions_seen += 1
        client = _unix_client(scope) if _over_unix_socket(scope) else self._client(authorization)
        if client is None:
            await _plain(send, 401, "a valid bearer token is required", bearer=True)
            return
        size = _content_length(length)
        if size is not None and size > self.max_body:
            await _plain(send, 413, f"request body over {self.max_body} bytes")
            return
        if sessions_seen > 1:
            await _plain(send, 400, "one Mcp-Session-Id header at most")
            return
        scope[CLIENT_SCOPE_KEY] = client
        scope["user"] = self.users.get(client) or _user(client)
        if session is None:
            if scope.get("method") == "POST":
                await self._opening(scope, receive, send, client)
            else:
                await self.app(scope, receive, send)
            return
        await self._in_session(scope, receive, send, client, session.decode("latin-1"))

    async def _opening(self, scope: Scope, receive: Receive, send: Send, client: str) -> None:
        """A request without a session: if the SDK opens one (initialize), bind it to ``client``.

        The binding is made before the response leaves, so the id is never usable unbound.
        """
        opened: str | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = _header(message.get("headers"), _SESSION_HEADER)
                if session_id and self.sessions.bind(session_id, client):
                    opened = session_id
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if opened is not None:
                self.sessions.end(opened)

    async def _in_session(
        self, scope: Scope, receive: Receive, send: Send, client: str, session_id: str
    ) -> None:
        sessions = self.sessions
        owner = sessions.owner(session_id)
        if owner is None:
            former = sessions.retired_owner(session_id)
            if former is None:  # unknown here: the SDK answers (404 for an unknown session)
                await self.app(scope, receive, send)
                return
            log.warning(
                "refused %s a session of %s: its binding was dropped to bound memory",
                client,
                former,
            )
            await _plain(send, 404, "session not found")
            return
        if owner != client:
            log.warning("refused %s a session opened by %s", client, owner)
            await _plain(send, 404, "session not found")
            return
        status: int | None = None

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        deleting = scope.get("method") == "DELETE"
        sessions.begin(session_id)
        try:
            await self.app(scope, receive, watch if deleting else send)
        finally:
            sessions.end(session_id)
        if deleting and status is not None and 200 <= status < 300:
            sessions.forget(session_id)

    def _client(self, header: bytes) -> str | None:
        scheme, _, token = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = token_digest(token.strip())
        found = None
        for name, expected in self.digests:  # compare every digest: no early exit to time
            if hmac.compare_digest(digest, expected):
                found = name
        return found


def _header(headers: Any, name: bytes) -> str | None:
    for key, value in headers or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _over_unix_socket(scope: Scope) -> bool:
    """Uvicorn reports no TCP peer for a unix-socket connection."""
    server = scope.get("server")
    return scope.get("client") is None and (
        server is None or not isinstance(server[1] if len(server) > 1 else None, int)
    )


def _content_length(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


async def _plain(send: Send, status: int, text: str, *, bearer: bool = False) -> None:
    body = json.dumps({"error": text}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="zerto-rewind"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(gateway: Gateway, *, host: str, unix_only: bool = False) -> ASGIApp:
    """The ASGI app: one streamable-HTTP endpoint per upstream, plus metrics and health."""
    settings = gateway.settings.gateway
    if not settings.clients and not unix_only:
        msg = (
            "gateway.clients lists no client: every request would be refused. Add each "
            "agent's token digest (`zerto-rewind gateway --hash-token`)"
        )
        raise ConfigError(msg)
    security = _security(host)
    managers: list[StreamableHTTPSessionManager] = []
    routes: list[Route] = []
    lanes: dict[str, tuple[Upstream, StreamableHTTPSessionManager]] = {}
    # One for every upstream: a token's caps span them all.
    ledger = Ledger(settings.limits, on_refused=gateway.metrics.limited_by)
    gateway.metrics.track_limits(lambda: ledger.sessions_total, lambda: ledger.held_total)
    for name, upstream in gateway.upstreams.items():
        manager = BoundedSessionManager(
            app=build_proxy(gateway, upstream),
            security_settings=security,
            max_request_body_size=settings.max_body_bytes,
            session_idle_timeout=settings.limits.idle_s,
            max_sessions=settings.limits.sessions,
            ledger=ledger,
        )
        managers.append(manager)
        # A Route, not a Mount: /mcp/<name> itself is the endpoint, with no redirect.
        routes.append(Route(f"/mcp/{name}", endpoint=StreamableHTTPASGIApp(manager)))
        lanes[f"/mcp/{name}"] = (upstream, manager)
    routes += _service_routes(gateway, host)
    app = Starlette(routes=routes, lifespan=_lifespan(gateway, managers))
    # Read-only calls take the fast lane, behind every gate before it (auth, caps), unless
    # gateway.fast_lane is false.
    lane = FastLane(app, gateway, lanes, security) if settings.fast_lane else app
    limited = TokenLimits(lane, ledger, settings.max_body_bytes, strict_calls=settings.fast_lane)
    return _BearerAuth(limited, settings.clients, settings.max_body_bytes, _bindings_for(managers))


def _security(host: str) -> TransportSecuritySettings | None:
    """The SDK's transport security for a listener on ``host``."""
    if not is_loopback(host):
        return None  # beyond loopback the bearer token is what keeps strangers out
    # Protect a loopback listener from DNS rebinding.
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=probes.allowed_hosts(host),
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "https://127.0.0.1:*"],
    )


def _service_routes(gateway: Gateway, host: str) -> list[Route]:
    """Health, metrics, and the service's endpoints for hooks and installers."""

    async def healthz(request: Request) -> Response:
        return await probes.healthz(gateway, request, host)

    async def metrics(request: Request) -> Response:
        return await probes.metrics(gateway, request, host)

    async def decide(request: Request) -> Response:
        """The decision endpoint for thin hooks: a PreToolUse payload in, the decision out."""
        return await decide_endpoint(gateway, request)

    async def result(request: Request) -> Response:
        """After the call: a thin hook records the result of a change decided by /v1/decide."""
        return await result_endpoint(gateway, request)

    async def catalog(request: Request) -> Response:
        """Which tools the catalog names (no vm_arg, no secrets): `install --service` compiles
        the hook matcher from it, so the hook starts for every call the service guards."""
        cat = gateway.settings.catalog
        return JSONResponse(
            {
                "read_only_tools": list(cat.read_only),
                "tools": sorted(cat.tools),
                "unknown_tools": cat.unknown,
                # the thin hook's budget and the host's timeout are planned above it
                "guard_timeout_s": gateway.settings.guard.timeout_s,
            }
        )

    return [
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/v1/decide", decide, methods=["POST"]),
        Route("/v1/result", result, methods=["POST"]),
        Route("/v1/catalog", catalog, methods=["GET"]),
    ]


def _lifespan(
    gateway: Gateway, managers: list[StreamableHTTPSessionManager]
) -> Callable[[Starlette], AbstractAsyncContextManager[dict[str, Any]]]:
    """The app's lifespan: every session manager running, the log witness closed last."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            # Last out, after every session closed: uvicorn re-raises SIGTERM once the
            # lifespan ends, so the gateway's own close() never runs on a SIGTERM.
            stack.callback(gateway.log_witness.close)
            for manager in managers:
                await stack.enter_async_context(manager.run())
            yield {}

    return lifespan


def _bindings_for(managers: list[StreamableHTTPSessionManager]) -> SessionBindings:
    """Room for every session the managers can hold open, expiring as they expire theirs."""
    capacity = sum(m.max_sessions or DEFAULT_MAX_SESSIONS for m in managers) or DEFAULT_MAX_SESSIONS
    timeouts = [m.session_idle_timeout for m in managers]
    idle: float | None = None  # a manager that never idles sessions out: bindings never expire
    if timeouts and None not in timeouts:
        idle = max(t for t in timeouts if t is not None)
    return SessionBindings(capacity, idle_s=idle)
