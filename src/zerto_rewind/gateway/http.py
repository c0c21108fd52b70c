"""The gateway over streamable HTTP: ``/mcp/<upstream>``, bearer tokens, metrics and health.

Every request to ``/mcp/…`` needs ``Authorization: Bearer <token>``; the config
lists each client's token as a SHA-256 digest. A missing or unknown token gets
401 and reaches no upstream. ``/healthz`` (for load balancers) and ``/metrics``
(for Prometheus) carry no secret and no argument value; they are open unless
``gateway.clients`` protects them too (see docs/gateway.md).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ConfigError
from .decide import decide_endpoint
from .proxy import CLIENT_SCOPE_KEY, build_proxy

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from .service import Gateway

__all__ = ["build_app", "check_bind", "token_digest"]

log = logging.getLogger("zerto_rewind.gateway")


def token_digest(token: str) -> str:
    """What the config stores for a client token."""
    return hashlib.sha256(token.encode()).hexdigest()


def check_bind(host: str, *, tls: bool, allow_insecure: bool) -> None:
    """Refuse to serve tokens in clear text beyond this machine unless told to."""
    if tls or allow_insecure or _is_loopback(host):
        return
    msg = (
        f"refusing to listen on {host} without TLS: bearer tokens and tool calls would cross "
        "the network in clear text. Set gateway.tls_cert and gateway.tls_key, or "
        "gateway.allow_insecure_bind: true if a TLS proxy in front does it"
    )
    raise ConfigError(msg)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# Paths that need a bearer token (over TCP; the unix socket's file mode is its guard).
_PROTECTED = ("/mcp", "/v1/")


class _BearerAuth:
    """ASGI middleware: ``/mcp`` and ``/v1`` need a known token; the client's name goes in scope."""

    def __init__(self, app: ASGIApp, clients: dict[str, str], max_body: int) -> None:
        self.app = app
        self.digests = [(name, digest) for name, digest in clients.items()]
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(_PROTECTED):
            await self.app(scope, receive, send)
            return
        client = "unix-socket" if _over_unix_socket(scope) else self._client(scope)
        if client is None:
            await _plain(send, 401, "a valid bearer token is required", bearer=True)
            return
        length = _content_length(scope)
        if length is not None and length > self.max_body:
            await _plain(send, 413, f"request body over {self.max_body} bytes")
            return
        scope[CLIENT_SCOPE_KEY] = client
        await self.app(scope, receive, send)

    def _client(self, scope: Scope) -> str | None:
        header = dict(scope.get("headers") or {}).get(b"authorization", b"")
        scheme, _, token = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = token_digest(token.strip())
        found = None
        for name, expected in self.digests:  # compare every digest: no early exit to time
            if hmac.compare_digest(digest, expected):
                found = name
        return found


def _over_unix_socket(scope: Scope) -> bool:
    """Uvicorn reports no TCP peer for a unix-socket connection."""
    server = scope.get("server")
    return scope.get("client") is None and (
        server is None or not isinstance(server[1] if len(server) > 1 else None, int)
    )


def _content_length(scope: Scope) -> int | None:
    raw = dict(scope.get("headers") or {}).get(b"content-length")
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
    security = None
    if _is_loopback(host):
        # Protect a loopback listener from DNS rebinding; beyond loopback the
        # bearer token is what keeps strangers out.
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", f"{host}:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "https://127.0.0.1:*"],
        )
    managers: list[StreamableHTTPSessionManager] = []
    routes: list[Route] = []
    for name, upstream in gateway.upstreams.items():
        manager = StreamableHTTPSessionManager(
            app=build_proxy(gateway, upstream),
            security_settings=security,
            max_request_body_size=settings.max_body_bytes,
        )
        managers.append(manager)
        # A Route, not a Mount: /mcp/<name> itself is the endpoint, with no redirect.
        routes.append(Route(f"/mcp/{name}", endpoint=StreamableHTTPASGIApp(manager)))

    async def healthz(request: Request) -> Response:
        report = await gateway.health()
        return JSONResponse(report, status_code=200 if report["ready"] else 503)

    async def metrics(request: Request) -> Response:
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")

    async def decide(request: Request) -> Response:
        """The decision endpoint for thin hooks: a PreToolUse payload in, the decision out."""
        return await decide_endpoint(gateway, request)

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

    routes += [
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/v1/decide", decide, methods=["POST"]),
        Route("/v1/catalog", catalog, methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            for manager in managers:
                await stack.enter_async_context(manager.run())
            yield {}

    app = Starlette(routes=routes, lifespan=lifespan)
    return _BearerAuth(app, settings.clients, settings.max_body_bytes)
