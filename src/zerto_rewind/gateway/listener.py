"""The HTTP listener's own bounds: time per connection, connections per source and in all.

Uvicorn bounds the time between requests (keep-alive) and the size of a request's
head (h11), but not the time a client takes to send that head or its body, and not
how many connections one address holds: 1,100 half-sent request heads pinned a
gateway at its descriptor limit, and other clients' calls timed out. Here:

* **Header time.** A connection has ``gateway.header_timeout_s`` from its first
  byte (or from being accepted) to a complete request head; else it is closed
  with 408. A slowloris gains nothing by dripping bytes: the deadline is total.
* **Body time.** From a request's head to its last body byte,
  ``gateway.body_timeout_s`` in all; else the connection is closed.
* **Idle time.** Between requests, ``gateway.idle_timeout_s`` (uvicorn's keep-alive).
* **Connections.** At most ``gateway.max_connections_per_source`` from one address
  (an IPv6 client by its /64; a unix-socket client by its user) and
  ``gateway.max_connections`` in all, the latter sized below the process's
  descriptor limit, which is first raised to its hard limit. A connection counts
  from ``accept()``, before any TLS handshake (:meth:`ConnectionGate.listening`).
  Past either cap it is closed at once, holding nothing (in the clear, with a 503
  naming the cap).
* **Handshake time.** From ``accept()`` to a finished TLS handshake,
  ``gateway.handshake_timeout_s``; else the connection is closed.
* **Smuggling.** A request with both ``Content-Length`` and ``Transfer-Encoding``
  gets 400 and its connection is closed: nothing sent after it on that connection
  is read (:func:`_refuse_ambiguous_framing`).

One :class:`ConnectionGate` per process (the descriptor limit is the process's): the
MCP listener and the approvals page count against the same caps.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import json
import logging
import resource
import socket
import struct
from typing import TYPE_CHECKING, Any

import h11
from prometheus_client import CollectorRegistry, Counter, Gauge

if TYPE_CHECKING:
    from ..config.settings import GatewaySettings

__all__ = [
    "ConnectionGate",
    "Guarded",
    "guarded_protocol",
    "process_gate",
    "raise_fd_limit",
    "raw_response",
    "source_of",
]

log = logging.getLogger("zerto_rewind.gateway")

# Descriptors kept out of the connection cap: upstream pipes, Redis and ZVM pools,
# the log, the approvals socket, the process's own files.
FD_RESERVE = 256
# Largest request head h11 buffers before answering 400 (uvicorn's default, stated here).
MAX_HEAD_BYTES = 16 * 1024


def raise_fd_limit() -> int:
    """Raise this process's soft descriptor limit to its hard limit; the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError) as exc:  # a container may refuse: keep the soft one
            log.warning("could not raise the descriptor limit from %d to %d: %s", soft, hard, exc)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_room(fd_limit: int) -> int:
    """How many connections fit below ``fd_limit`` with the gateway's own reserve kept."""
    return fd_limit - FD_RESERVE if fd_limit > 2 * FD_RESERVE else max(fd_limit // 2, 1)


def source_of(transport: asyncio.BaseTransport) -> str:
    """Whom a connection counts against: its IPv4 address, its IPv6 /64, or its unix user."""
    return source_of_peer(transport.get_extra_info("socket"), transport.get_extra_info("peername"))


def source_of_peer(sock: Any, peer: Any) -> str:
    """:func:`source_of` for a socket and the peer address ``accept()`` gave."""
    if isinstance(peer, tuple) and len(peer) == 2:
        return str(peer[0])  # IPv4 (host, port): the kernel's dotted quad, nothing to parse
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            return f"unix:{struct.unpack('3i', raw)[1]}"
        except (OSError, struct.error):
            return "unix:?"
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        # One host holds a whole /64: counting addresses would let it open 2^64 of them.
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class ConnectionGate:
    """Counts open connections per source and in all; admits one only below both caps."""

    def __init__(
        self,
        *,
        max_total: int,
        max_per_source: int,
        header_timeout_s: float,
        body_timeout_s: float,
        idle_timeout_s: float,
        handshake_timeout_s: float = 10.0,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.max_total = max_total
        self.max_per_source = max_per_source
        self.handshake_timeout_s = handshake_timeout_s
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.total = 0
        self.by_source: dict[str, int] = {}
        # Accepted connections the HTTP protocol has not seen yet (a TLS handshake in
        # progress), by descriptor: each one's handshake deadline.
        self.handshaking: dict[int, asyncio.TimerHandle] = {}
        registry = registry if registry is not None else CollectorRegistry()
        self.open_gauge = Gauge(
            "zerto_rewind_connections", "HTTP connections open now.", registry=registry
        )
        self.refused = Counter(
            "zerto_rewind_connections_refused",
            "HTTP connections closed by a listener bound, by cap: source, total; "
            "or timeout: handshake, header, body.",
            ["cap"],
            registry=registry,
        )
        # Bound once: a flood is refused at a label lookup's cost less each time.
        self._refused_source = self.refused.labels("source")
        self._refused_total = self.refused.labels("total")

    @classmethod
    def from_settings(
        cls, settings: GatewaySettings, registry: CollectorRegistry | None = None
    ) -> ConnectionGate:
        """The caps as configured, the total one sized below the (raised) descriptor limit."""
        fd_limit = raise_fd_limit()
        room = connection_room(fd_limit)
        total = min(settings.max_connections, room)
        if total < settings.max_connections:
            log.warning(
                "gateway.max_connections %d lowered to %d: the descriptor limit is %d "
                "(raise LimitNOFILE)",
                settings.max_connections,
                total,
                fd_limit,
            )
        return cls(
            max_total=total,
            max_per_source=min(settings.max_connections_per_source, total),
            header_timeout_s=settings.header_timeout_s,
            body_timeout_s=settings.body_timeout_s,
            idle_timeout_s=settings.idle_timeout_s,
            handshake_timeout_s=settings.handshake_timeout_s,
            registry=registry,
        )

    def admit(self, source: str) -> str | None:
        """Count a new connection from ``source``; or why not (the cap it would pass)."""
        held = self.by_source.get(source, 0)
        if held >= self.max_per_source:
            self._refused_source.inc()
            return f"this address holds {held} connections (gateway.max_connections_per_source)"
        if self.total >= self.max_total:
            self._refused_total.inc()
            return f"the gateway holds {self.total} connections (gateway.max_connections)"
        self.by_source[source] = held + 1
        self.total += 1
        self.open_gauge.set(self.total)
        return None

    def release(self, source: str) -> None:
        held = self.by_source.get(source, 0) - 1
        if held > 0:
            self.by_source[source] = held
        else:
            self.by_source.pop(source, None)
        self.total = max(self.total - 1, 0)
        self.open_gauge.set(self.total)

    def listening(self, sock: socket.socket, *, tls: bool) -> socket.socket:
        """``sock`` (bound, not yet listening) as a listener whose ``accept()`` counts.

        The caps apply from ``accept()``, before a TLS handshake starts (asyncio runs it
        before uvicorn's protocol sees the connection): a flood of connections that never
        send a ClientHello is refused at once like any other, and a handshake has
        ``handshake_timeout_s``. Over TLS a refused connection is just closed (nothing
        can be said before the handshake); in the clear it gets 503 naming the cap.
        """
        gated = _GatedListener(sock.family, sock.type, sock.proto, fileno=sock.detach())
        gated.gate, gated.tls = self, tls
        return gated

    def started(self, transport: asyncio.BaseTransport) -> None:
        """The HTTP protocol sees the connection (its handshake, if any, is done)."""
        sock = transport.get_extra_info("socket")
        if sock is not None:
            deadline = self.handshaking.pop(sock.fileno(), None)
            if deadline is not None:
                deadline.cancel()

    def describe(self) -> dict[str, float]:
        """The bounds in force, for the ready file and the start-up log."""
        return {
            "max_connections": self.max_total,
            "max_connections_per_source": self.max_per_source,
            "handshake_timeout_s": self.handshake_timeout_s,
            "header_timeout_s": self.header_timeout_s,
            "body_timeout_s": self.body_timeout_s,
            "idle_timeout_s": self.idle_timeout_s,
        }


_PROCESS_GATE: list[ConnectionGate] = []


def process_gate(settings: GatewaySettings, registry: CollectorRegistry) -> ConnectionGate:
    """This process's gate, made on first use: every listener of the process shares it."""
    if not _PROCESS_GATE:
        _PROCESS_GATE.append(ConnectionGate.from_settings(settings, registry))
    return _PROCESS_GATE[0]


# At most this many refused connections per accept() call, and so per turn of the event
# loop (asyncio stops accepting at the BlockingIOError): the loop runs other clients'
# work in between, and the listener stays readable for the rest. 64 held the loop for
# 3-10 ms at a time under a flood (performance.md §16).
_REFUSALS_PER_ACCEPT = 16


class _GatedListener(socket.socket):
    """A listening socket whose ``accept()`` admits a connection only below the caps."""

    gate: ConnectionGate
    tls: bool

    def accept(self) -> tuple[socket.socket, Any]:
        refused = 0
        while True:
            fd, peer = self._accept()  # type: ignore[attr-defined]  # BlockingIOError: none left
            conn = _Admitted(self.family, self.type, self.proto, fileno=fd)
            source = source_of_peer(conn, peer)
            why = self.gate.admit(source)
            if why is None:
                conn.admitted(self.gate, source)
                return conn, peer
            self._refuse(conn, why)
            refused += 1
            if refused >= _REFUSALS_PER_ACCEPT:
                raise BlockingIOError  # asyncio comes back on the next turn of the loop

    def _refuse(self, conn: socket.socket, why: str) -> None:
        try:
            if not self.tls:
                conn.setblocking(False)
                conn.send(raw_response(503, "Service Unavailable", f"refused: {why}"))
        except OSError:
            pass  # the client is gone or its buffer full: closing says enough
        finally:
            conn.close()


class _Admitted(socket.socket):
    """An accepted connection that gives its place back when closed (or collected)."""

    _gate: ConnectionGate | None = None
    _source = ""

    def admitted(self, gate: ConnectionGate, source: str) -> None:
        self._gate, self._source = gate, source
        fd = self.fileno()
        loop = asyncio.get_running_loop()
        gate.handshaking[fd] = loop.call_later(gate.handshake_timeout_s, self._expired, fd)

    def _expired(self, fd: int) -> None:
        """Still in its handshake: shut it down, and asyncio closes it as the peer's EOF."""
        gate = self._gate
        if gate is None or gate.handshaking.pop(fd, None) is None:
            return
        gate.refused.labels("handshake").inc()
        with contextlib.suppress(OSError):  # already gone
            self.shutdown(socket.SHUT_RDWR)

    def _release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            deadline = gate.handshaking.pop(self.fileno(), None)
            if deadline is not None:
                deadline.cancel()
            gate.release(self._source)

    def close(self) -> None:
        self._release()
        super().close()

    def detach(self) -> int:
        self._release()
        return super().detach()

    def __del__(self) -> None:  # a connection dropped without close() still frees its place
        self._release()


@functools.lru_cache(maxsize=32)  # a flood's refusals say the same few things
def raw_response(status: int, reason: str, text: str) -> bytes:
    body = json.dumps({"error": text}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n"
    )
    if status == 503:
        head += "retry-after: 5\r\n"
    return head.encode() + b"\r\n" + body


def _refuse_ambiguous_framing(app: Any) -> Any:
    """An ASGI wrapper: both ``Content-Length`` and ``Transfer-Encoding`` get 400, then close.

    h11 frames such a request by ``Transfer-Encoding``, a proxy in front may frame it by
    ``Content-Length``: the two would read a different request after it (smuggling).
    ``connection: close`` makes uvicorn close once the 400 is sent; h11 has not parsed
    anything pipelined after the request, so it is never served.
    """

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            names = {name for name, _ in scope.get("headers") or ()}
            if b"content-length" in names and b"transfer-encoding" in names:
                body = b'{"error": "both Content-Length and Transfer-Encoding: refused"}'
                headers = [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ]
                await send({"type": "http.response.start", "status": 400, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


# Uvicorn's protocol class is chosen at run time (the gateway's adds the unix peer's user).
_ProtocolBase: Any = object


class Guarded(_ProtocolBase):  # type: ignore[misc]
    """The caps and deadlines, mixed in before uvicorn's h11 protocol (:func:`guarded_protocol`)."""

    gate: ConnectionGate
    app: Any  # uvicorn's protocol's, wrapped once connected
    _deadline: asyncio.TimerHandle | None = None
    _phase = ""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        # Counted and admitted at accept() (:meth:`ConnectionGate.listening`); the
        # handshake is over, the request head's time starts.
        self.gate.started(transport)
        self.app = _refuse_ambiguous_framing(self.app)
        self._arm("header", self.gate.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm("header", self.gate.header_timeout_s)  # a next request begins
        super().data_received(data)
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()

    def _track(self) -> None:
        """Move the deadline along as the request head and body arrive."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self.gate.body_timeout_s)
        elif state is not h11.IDLE or self._phase == "body":
            self._disarm()  # the request is in: the app and keep-alive take over

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = ""

    def _nothing_answered(self) -> bool:
        """No response has begun on this connection's current request (a 408 may be sent)."""
        return self.conn.our_state is h11.IDLE

    def _expired(self) -> None:
        phase, self._deadline = self._phase, None
        if self.transport is None or self.transport.is_closing():
            return
        self.gate.refused.labels(phase).inc()
        if phase == "header" and self._nothing_answered():
            text = f"no complete request head within {self.gate.header_timeout_s:g} s"
            self.transport.write(raw_response(408, "Request Timeout", text))
        self.transport.close()


def guarded_protocol(gate: ConnectionGate, base: type | None = None) -> type:
    """``base`` (uvicorn's h11 protocol by default) with the gate's caps and deadlines."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    parent = base if base is not None else H11Protocol
    return type("GuardedProtocol", (Guarded, parent), {"gate": gate})
