"""HTTP plumbing: the threaded (optionally TLS) server and the request dispatcher."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from zerto_rewind.sim import control, handlers
from zerto_rewind.sim.auth import BAD_CLIENT
from zerto_rewind.sim.errors import SimError, not_found
from zerto_rewind.sim.faults import Fault
from zerto_rewind.sim.handlers import Context, Handler, Request, Response
from zerto_rewind.sim.routes import ROUTES, Route, resolve

# Built from the route table, so a route without a handler fails at import time.
HANDLERS: dict[str, Handler] = {
    route.handler: getattr(control if route.kind == "control" else handlers, route.handler)
    for route in ROUTES
}
_MALFORMED = b'{"VpgIdentifier": "3f1c2a9e-0b7d-4c55-9d2e-8f6a1b0c4d3e", "VpgName": "jp-lo'


class SimHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with per-connection TLS and a record of open connections."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        ctx: Context,
        tls: ssl.SSLContext | None,
        wrong_tls: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.ctx = ctx
        self.tls = tls
        self.wrong_tls = wrong_tls  # a certificate the client's CA did not sign
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, SimRequestHandler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup, which can stall for seconds."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Handshake in the connection's own thread, so a slow client blocks nobody."""
        sock: socket.socket = request
        connection_fault = self.ctx.faults.connection
        if connection_fault == "down":  # accepted just before the listener closed
            return
        if self.tls is not None:
            tls = self.tls
            if connection_fault == "wrong_cert" and self.wrong_tls is not None:
                tls = self.wrong_tls()
            sock.settimeout(10)
            try:
                sock = tls.wrap_socket(sock, server_side=True)
            except (ssl.SSLError, OSError):
                return
            sock.settimeout(None)
        with self.connections_lock:
            self.connections.add(sock)
        try:
            SimRequestHandler(sock, client_address, self)
        finally:
            with self.connections_lock:
                self.connections.discard(sock)
            # wrap_socket detached the accepted socket, so socketserver's own close
            # no longer reaches the file descriptor: close the TLS socket here.
            if sock is not request:
                with contextlib.suppress(OSError):
                    sock.close()

    def close_connections(self) -> None:
        """Cut every open connection (used on stop)."""
        with self.connections_lock:
            open_now = list(self.connections)
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class SimRequestHandler(BaseHTTPRequestHandler):
    """Routes one request: faults, then auth, then the handler, under the backend lock."""

    # Headers and body go out in separate sends; without TCP_NODELAY every
    # response waits for the client's delayed ACK (~40 ms on Linux).
    disable_nagle_algorithm = True

    protocol_version = "HTTP/1.1"
    server_version = "Kestrel"
    sys_version = ""
    timeout = 300
    server: SimHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet; ``/_sim/stats`` counts requests instead."""

    def do_GET(self) -> None:
        """Dispatch a GET."""
        self._dispatch()

    def do_POST(self) -> None:
        """Dispatch a POST."""
        self._dispatch()

    def do_DELETE(self) -> None:
        """Dispatch a DELETE."""
        self._dispatch()

    def do_PUT(self) -> None:
        """Dispatch a PUT (only ever 404/405 here)."""
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        path = unquote(split.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        resolved = resolve(self.command, path)
        if resolved.route is None:
            headers = {"Allow": ", ".join(resolved.allow)} if resolved.allow else {}
            self._send(Response(resolved.status, headers=headers, raw=b""))
            return
        route, ctx = resolved.route, self.server.ctx
        with ctx.backend.lock:
            ctx.backend.stats.requests[f"{self.command} {route.name}"] += 1
        if route.kind != "control":
            fault = ctx.faults.take(route.name, self.command, path)
            if fault is not None and self._fault(fault, route):
                return
        query = {k.lower(): v for k, v in parse_qsl(split.query, keep_blank_values=True)}
        request = Request(self.command, path, query, body, resolved.params, self._base_url())
        request.via = ctx.name
        if route.kind == "control" and "site" in query:
            # The control plane of any ZVM addresses another with ?site=NAME.
            target = ctx.sites.get(query["site"].lower())
            if target is None:
                known = ", ".join(sorted(c.name for c in ctx.sites.values()))
                msg = f"no simulated ZVM site named {query['site']!r} (sites: {known})"
                self._send(handlers.error_response(not_found(msg)))
                return
            ctx = target
        self._send(self._run(ctx, route, request))

    def _run(self, ctx: Context, route: Route, request: Request) -> Response:
        with ctx.backend.lock:
            if route.kind == "api" and not ctx.backend.tokens.user_of(
                self.headers.get("Authorization")
            ):
                ctx.backend.stats.unauthorized += 1
                return Response(401, headers={"WWW-Authenticate": "Bearer"}, raw=b"")
            try:
                return HANDLERS[route.handler](ctx, request)
            except SimError as exc:
                return handlers.error_response(exc)

    def _fault(self, fault: Fault, route: Route) -> bool:
        """Apply a fault; True when it answered (or refused to answer) the request."""
        faults = self.server.ctx.faults
        if fault.kind in ("delay", "hang"):
            # A hang lasts until the faults are cleared (then the request is served
            # late) or the server stops (then the connection is cut).
            faults.wait(fault.delay_s if fault.kind == "delay" else None)
            if not faults.stopping:
                return False
        if fault.kind == "status":
            self._send(Response(fault.status, {"Message": "Simulated fault"}))
        elif fault.kind == "unauthorized" and route.kind == "auth":
            self._send(Response(401, dict(BAD_CLIENT)))  # as if the secret had been rotated
        elif fault.kind == "unauthorized":
            self._send(Response(401, headers={"WWW-Authenticate": "Bearer"}, raw=b""))
        elif fault.kind == "malformed":
            self._send(Response(200, raw=_MALFORMED))
        else:
            self._drop()
        return True

    def _drop(self) -> None:
        # Close without a byte of response: the client sees a disconnect.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _base_url(self) -> str:
        scheme = "https" if self.server.tls is not None else "http"
        host = self.headers.get("Host") or f"{self.server.server_name}:{self.server.server_port}"
        return f"{scheme}://{host}"

    def _send(self, response: Response) -> None:
        if response.raw is not None:
            payload = response.raw
        else:
            payload = json.dumps(response.body, separators=(",", ":")).encode()
        try:
            self.send_response(response.status)
            if payload:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True
