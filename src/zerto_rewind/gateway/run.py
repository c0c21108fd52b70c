"""Run the gateway: one upstream over stdio, or every upstream over streamable HTTP.

Beside the MCP and decide endpoints, a gateway may serve the approval channels
(``--approvals-socket``, ``--approvals-listen``): :func:`start_approvals`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import secrets
import socket
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..errors import ConfigError, UsageError
from ..fsutil import atomic_write_text
from .http import build_app, check_bind
from .http_impl import http_impl, listener_options, protocol_base
from .listener import ConnectionGate, process_gate
from .proxy import PEER_USER_KEY, build_proxy
from .service import Gateway
from .socket_reach import check_trust_socket
from .stdio_pipes import event_loop_stdio
from .unix_listen import bind_unix
from .upstream_probe import check_reachable
from .upstream_user import check_upstreams

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

    from ..config.sections import GatewaySettings
    from ..config.settings import Settings

__all__ = ["ApprovalChannels", "serve_http", "serve_stdio"]

log = logging.getLogger("zerto_rewind.gateway")


def _upstream(settings: Settings, name: str) -> None:
    if name not in settings.upstreams:
        known = ", ".join(sorted(settings.upstreams)) or "none"
        msg = f"no upstream named {name!r} in the config (upstreams: {known})"
        raise ConfigError(msg, path=settings.path, key="upstreams")


class ApprovalChannels:
    """Where approvers answer: the approvals socket and the approvals page, if asked for."""

    def __init__(
        self,
        socket_path: str | None = None,
        listen: tuple[str, int] | None = None,
        *,
        socket_mode: int = 0o666,
        ready: dict[str, object] | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.listen = listen
        self.socket_mode = socket_mode
        self.ready = ready if ready is not None else {}
        self.listener: socket.socket | None = None

    def bind_socket(self) -> socket.socket | None:
        """The approvals socket, made on the first call; None when none is asked for.

        Called before any thread runs: the umask set around its bind() then changes no
        other file's mode (and a directory others can change stops the start at once).
        """
        if self.socket_path and self.listener is None:
            self.listener = bind_unix(self.socket_path, self.socket_mode, "--approvals-socket")
        return self.listener


def check_trust(settings: Settings, *, http_with_tokens: bool) -> None:
    """Form answers from the agent's own client never count where agents hold tokens."""
    if settings.approvals.trust_client_answers and http_with_tokens:
        msg = (
            "approvals.trust_client_answers is on, and this gateway listens over HTTP with "
            "client tokens: an agent holding its token could answer its own questions. "
            "Use it only with --stdio for a single user, or turn it off and name approvers "
            "(approvals.approvers)"
        )
        raise ConfigError(msg, path=settings.path, key="approvals.trust_client_answers")


async def start_approvals(
    gateway: Gateway, tg: anyio.abc.TaskGroup, channels: ApprovalChannels | None
) -> None:
    """The notifier, the approvals socket and the approvals page, as configured."""
    service = gateway.approvals
    settings = gateway.settings
    if settings.approvals.notify_url:
        from .notify import make_login_notifier, make_webhook_notifier

        service.notifier = make_webhook_notifier(settings.approvals, service.link)
        service.login_notifier = make_login_notifier(settings.approvals, lambda: service.page_url)
    if channels is None:
        return
    listener = channels.bind_socket()
    if listener is not None and channels.socket_path:
        from .approvals_socket import serve_approvals_socket

        tg.start_soon(serve_approvals_socket, service, listener, channels.socket_path)
        channels.ready["approvals_socket"] = f"unix:{channels.socket_path}"
    if channels.listen is not None:
        url = await _serve_page(gateway, tg, *channels.listen)
        if service.page_url is None:
            service.page_url = url
        channels.ready["approvals_url"] = url


async def _serve_page(gateway: Gateway, tg: anyio.abc.TaskGroup, host: str, port: int) -> str:

    from .approvals_web import build_approvals_app

    g = gateway.settings.gateway
    tls = g.tls_cert is not None
    check_bind(host, tls=tls, allow_insecure=g.allow_insecure_bind)
    if not gateway.settings.approvals.web_approvers:
        msg = (
            "--approvals-listen serves the approvals page, and approvals.web_approvers "
            "lists nobody who could log in: add an approver "
            "(`zerto-rewind approvals hash-password`)"
        )
        raise ConfigError(msg, path=gateway.settings.path, key="approvals.web_approvers")
    app = build_approvals_app(gateway.approvals, secure_cookies=tls, zvms=gateway.guard)
    gate = process_gate(g, gateway.metrics.registry)
    tcp = gate.listening(_tcp_listener(host, port, "--approvals-listen"), tls=tls)
    server = _uvicorn_server(
        app, g, gate, http_impl(g.http_impl, gateway.settings.path), lifespan="off", grace_s=2
    )
    tg.start_soon(lambda: server.serve(sockets=[tcp]))
    while not server.started:
        await anyio.sleep(0.02)
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{tcp.getsockname()[1]}"


def _uvicorn_server(
    app: ASGIApp,
    g: GatewaySettings,
    gate: ConnectionGate,
    impl: str,
    *,
    lifespan: Literal["on", "off"],
    grace_s: int,
    protocol: type | None = None,
) -> uvicorn.Server:
    """A quiet uvicorn server for ``app`` under ``gate``, parsed by ``impl``, with the
    gateway's TLS files."""
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        ssl_certfile=g.tls_cert,
        ssl_keyfile=g.tls_key,
        lifespan=lifespan,
        timeout_graceful_shutdown=grace_s,
        **listener_options(gate, impl, protocol),
    )
    return uvicorn.Server(config)


def _tcp_listener(host: str, port: int, option: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only then (else ~40 ms ACK stalls).
    tcp = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        tcp.bind((host.strip("[]"), port))
    except OSError as exc:
        tcp.close()
        raise _bind_error(option, f"{host}:{port}", exc) from None
    return tcp


def _bind_error(option: str, where: str, exc: OSError) -> UsageError:
    """A listener that cannot bind: one line saying why and what to do, not a traceback."""
    import errno

    why = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        advice = f"stop what listens there (`ss -ltnp` shows it) or give {option} another address"
        return UsageError(f"{option} {where}: already in use ({why}); {advice}")
    if exc.errno == errno.EACCES:
        advice = f"give {option} a port above 1024, or run as a user allowed to bind it"
        return UsageError(f"{option} {where}: permission denied ({why}); {advice}")
    return UsageError(f"{option} {where}: cannot listen there ({why}); check {option}")


async def serve_stdio(
    settings: Settings,
    name: str,
    *,
    approvals: ApprovalChannels | None = None,
    allow_privileged_upstream: bool = False,
) -> None:
    """Serve upstream ``name`` on this process's stdin/stdout until the client hangs up.

    ``allow_privileged_upstream``: start it even as root or as the guard files' owner
    (:func:`.identity.check_upstreams`).
    """
    from mcp.server.stdio import stdio_server

    _upstream(settings, name)
    check_upstreams(settings, [name], allow_privileged=allow_privileged_upstream)
    check_reachable(settings, [name])  # its user can run it: else say why, now
    if approvals is not None:
        approvals.bind_socket()
    gateway = Gateway(settings)
    try:
        async with anyio.create_task_group() as tg:
            await gateway.start(tg, [name])
            await start_approvals(gateway, tg, approvals)
            # One process serves one host connection: its session id, for the log and the tag.
            connection = secrets.token_hex(8)
            server = build_proxy(gateway, gateway.upstreams[name], connection_id=connection)
            async with event_loop_stdio() as pipes:
                stdin, stdout = pipes if pipes is not None else (None, None)
                async with stdio_server(stdin, stdout) as (read, write):
                    await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()
    finally:
        gateway.close()


async def serve_http(
    settings: Settings,
    host: str | None,
    port: int = 0,
    *,
    ready_file: str | None = None,
    unix_socket: str | None = None,
    socket_mode: int = 0o660,
    approvals: ApprovalChannels | None = None,
    allow_privileged_upstream: bool = False,
) -> None:
    """Serve every upstream at ``/mcp/<name>`` and ``/v1/decide`` until SIGINT or SIGTERM.

    ``host`` (TCP, bearer tokens) and ``unix_socket`` (a local socket whose file
    mode decides who may connect) may each be given, or both.
    ``allow_privileged_upstream`` as for :func:`serve_stdio`.
    """

    _check_http(settings, host, unix_socket, allow_privileged_upstream=allow_privileged_upstream)
    g = settings.gateway
    impl = http_impl(g.http_impl, settings.path)  # before anything starts
    if approvals is not None:
        approvals.bind_socket()
    gateway = Gateway(settings)
    app = build_app(gateway, host=host or "127.0.0.1", unix_only=host is None)
    gate = process_gate(g, gateway.metrics.registry)  # raises the descriptor limit
    info: dict[str, object] = {"pid": os.getpid(), "limits": gate.describe(), "http": impl}
    sockets = _listeners(gateway, gate, info, (host, port), (unix_socket, socket_mode))
    server = _uvicorn_server(
        app, g, gate, impl, lifespan="on", grace_s=5, protocol=_peer_protocol(protocol_base(impl))
    )
    try:
        if unix_socket is not None:  # once bound: its group is the file system's to say
            check_trust_socket(settings, unix_socket)
        async with anyio.create_task_group() as tg:
            await gateway.start(tg)
            if approvals is not None:
                approvals.ready = info
            await start_approvals(gateway, tg, approvals)
            tg.start_soon(_announce, server, info, ready_file)
            await server.serve(sockets=sockets)
            tg.cancel_scope.cancel()
    finally:
        gateway.close()
        if unix_socket is not None:
            with contextlib.suppress(OSError):
                os.unlink(unix_socket)


async def _announce(server: Any, info: dict[str, object], ready_file: str | None) -> None:
    """Once uvicorn listens: the ready file, and one line in the log."""
    while not server.started:
        await anyio.sleep(0.02)
    freeze_start_up()
    if ready_file:
        atomic_write_text(ready_file, json.dumps(info) + "\n")
    log.warning("zerto-rewind gateway serving %s", info["url"])


def freeze_start_up() -> None:
    """Take what start-up made out of the garbage collector's sight, for good.

    Modules, the app, the catalog, the SDK's models: ~100,000 objects that live as
    long as the process, and that each full collection walked again, on the event
    loop, while every request waited (47-49 ms a time on this project's 2-core test
    machine, 370 ms once under load beside an abusive token: performance.md §16).
    Frozen, a full collection walks only what requests made since.
    """
    gc.collect()
    gc.freeze()


def _check_http(
    settings: Settings,
    host: str | None,
    unix_socket: str | None,
    *,
    allow_privileged_upstream: bool,
) -> None:
    """Refuse, before anything starts, what :func:`serve_http` must not serve."""
    if host is None and unix_socket is None:
        msg = "nothing to listen on: give --listen HOST:PORT, --socket PATH, or both"
        raise ConfigError(msg)
    g = settings.gateway
    if host is not None:
        if not settings.upstreams and not g.clients:
            msg = "no upstreams and no clients in the config: nothing to serve over TCP"
            raise ConfigError(msg, path=settings.path)
        check_bind(host, tls=g.tls_cert is not None, allow_insecure=g.allow_insecure_bind)
    check_trust(settings, http_with_tokens=host is not None and bool(g.clients))
    check_upstreams(settings, settings.upstreams, allow_privileged=allow_privileged_upstream)
    check_reachable(settings, settings.upstreams)  # each user can run its server: else why, now


def _listeners(
    gateway: Gateway,
    gate: ConnectionGate,
    info: dict[str, object],
    tcp_at: tuple[str | None, int],
    unix_at: tuple[str | None, int],
) -> list[socket.socket]:
    """The TCP and unix listening sockets asked for, counted by ``gate`` from accept();
    where they are goes into ``info`` (the ready file)."""
    tls = gateway.settings.gateway.tls_cert is not None
    sockets = []
    host, port = tcp_at
    if host is not None:
        tcp = gate.listening(_tcp_listener(host, port, "--listen"), tls=tls)
        scheme = "https" if tls else "http"
        shown = f"[{host}]" if ":" in host else host
        url = f"{scheme}://{shown}:{tcp.getsockname()[1]}"
        info["url"] = url
        info["mcp"] = {name: f"{url}/mcp/{name}" for name in gateway.upstreams}
        sockets.append(tcp)
    unix_socket, socket_mode = unix_at
    if unix_socket is not None:
        sockets.append(gate.listening(_unix_listener(unix_socket, socket_mode), tls=tls))
        info["socket"] = f"unix:{unix_socket}"
        info.setdefault("url", f"unix:{unix_socket}")
    return sockets


def _peer_protocol(base: type) -> type:
    """Uvicorn's HTTP protocol ``base``, plus the unix peer's user in each request's scope.

    The decide socket's callers are hooks of agents' users; knowing which user
    asked keeps one user's approval from covering another's call. The kernel
    says who the peer is (``SO_PEERCRED``), so nothing the client sends can.
    """
    import pwd
    import struct

    class PeerProtocol(base):  # type: ignore[misc]
        app: Any  # uvicorn's protocol's, wrapped once connected

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is None or sock.family != socket.AF_UNIX:
                return
            try:
                raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                uid = struct.unpack("3i", raw)[1]
                user = pwd.getpwuid(uid).pw_name
            except (OSError, KeyError, struct.error):
                user = "unknown"
            app = self.app

            async def with_peer(scope: Any, receive: Any, send: Any) -> None:
                scope[PEER_USER_KEY] = user
                await app(scope, receive, send)

            self.app = with_peer

    return PeerProtocol


def _unix_listener(path: str, mode: int) -> socket.socket:
    """A unix socket at ``path`` made with ``mode``, in a directory only root and we can change."""
    return bind_unix(path, mode, "--socket")
