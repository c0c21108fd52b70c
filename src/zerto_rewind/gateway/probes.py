"""``/healthz`` and ``/metrics``: who may read them, and how much.

Both check ``Host`` on a loopback listener as ``/mcp`` does, so a web page that
rebinds its own name to 127.0.0.1 reads nothing (421). ``/healthz`` tells any
caller ready or not ready; why (each site's ZVM URL and error, the shared state,
each upstream's cause) only a ``gateway.metrics_clients`` token or a unix-socket
caller reads. ``/metrics`` needs such a token once ``gateway.metrics_clients``
names one; without, it stays open (counters only) as before.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse, Response

from ..netutil import is_loopback, token_digest

if TYPE_CHECKING:
    from starlette.requests import Request

    from .service import Gateway

__all__ = ["allowed_hosts", "healthz", "host_refused", "metrics"]


def allowed_hosts(host: str) -> list[str]:
    """The ``Host`` values a loopback listener answers (the SDK's pattern syntax)."""
    return ["127.0.0.1:*", "localhost:*", "[::1]:*", f"{host}:*"]


def _over_unix_socket(request: Request) -> bool:
    """Uvicorn reports no TCP peer for a unix-socket connection (as gateway.http reads it)."""
    server = request.scope.get("server")
    return request.scope.get("client") is None and (
        server is None or not isinstance(server[1] if len(server) > 1 else None, int)
    )


def host_refused(request: Request, listen_host: str) -> Response | None:
    """421 for a ``Host`` a loopback listener does not answer to; None when it may go on."""
    if not is_loopback(listen_host) or _over_unix_socket(request):
        return None  # beyond loopback a rebinding page reads only "ready" (and the token guards)
    given = request.headers.get("host", "")
    for allowed in allowed_hosts(listen_host):
        base = allowed.removesuffix(":*")
        if given == allowed or (allowed.endswith(":*") and given.startswith(base + ":")):
            return None
    return JSONResponse({"error": "Invalid Host header"}, status_code=421)


def may_read_details(request: Request, readers: dict[str, str]) -> bool:
    """A unix-socket caller, or a bearer token whose digest ``gateway.metrics_clients`` lists."""
    if _over_unix_socket(request):
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip() or not readers:
        return False
    digest = token_digest(token.strip())
    found = False
    for expected in readers.values():  # compare every digest: no early exit to time
        found = hmac.compare_digest(digest, expected) or found
    return found


async def healthz(gateway: Gateway, request: Request, listen_host: str) -> Response:
    refused = host_refused(request, listen_host)
    if refused is not None:
        return refused
    report = await gateway.health()
    status = 200 if report["ready"] else 503
    if may_read_details(request, gateway.settings.gateway.metrics_clients):
        return JSONResponse(report, status_code=status)
    return JSONResponse({"ready": report["ready"]}, status_code=status)


async def metrics(gateway: Gateway, request: Request, listen_host: str) -> Response:
    refused = host_refused(request, listen_host)
    if refused is not None:
        return refused
    readers = gateway.settings.gateway.metrics_clients
    if readers and not may_read_details(request, readers):
        return JSONResponse(
            {"error": "a gateway.metrics_clients token is required"},
            status_code=401,
            headers={"www-authenticate": 'Bearer realm="zerto-rewind"'},
        )
    return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")
