"""Run the gateway: one upstream over stdio, or every upstream over streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from typing import TYPE_CHECKING

import anyio

from ..errors import ConfigError
from ..fsutil import atomic_write_text
from .http import build_app, check_bind
from .proxy import build_proxy
from .service import Gateway
from .stdio_pipes import event_loop_stdio

if TYPE_CHECKING:
    from ..config.settings import Settings

__all__ = ["serve_http", "serve_stdio"]

log = logging.getLogger("zerto_rewind.gateway")


def _upstream(settings: Settings, name: str) -> None:
    if name not in settings.upstreams:
        known = ", ".join(sorted(settings.upstreams)) or "none"
        msg = f"no upstream named {name!r} in the config (upstreams: {known})"
        raise ConfigError(msg, path=settings.path, key="upstreams")


async def serve_stdio(settings: Settings, name: str) -> None:
    """Serve upstream ``name`` on this process's stdin/stdout until the client hangs up."""
    from mcp.server.stdio import stdio_server

    _upstream(settings, name)
    gateway = Gateway(settings)
    try:
        async with anyio.create_task_group() as tg:
            await gateway.start(tg, [name])
            server = build_proxy(gateway, gateway.upstreams[name])
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
) -> None:
    """Serve every upstream at ``/mcp/<name>`` and ``/v1/decide`` until SIGINT or SIGTERM.

    ``host`` (TCP, bearer tokens) and ``unix_socket`` (a local socket whose file
    mode decides who may connect) may each be given, or both.
    """
    import uvicorn

    if host is None and unix_socket is None:
        msg = "nothing to listen on: give --listen HOST:PORT, --socket PATH, or both"
        raise ConfigError(msg)
    g = settings.gateway
    tls = g.tls_cert is not None
    if host is not None:
        if not settings.upstreams and not g.clients:
            msg = "no upstreams and no clients in the config: nothing to serve over TCP"
            raise ConfigError(msg, path=settings.path)
        check_bind(host, tls=tls, allow_insecure=g.allow_insecure_bind)
    gateway = Gateway(settings)
    app = build_app(gateway, host=host or "127.0.0.1", unix_only=host is None)
    sockets = []
    info: dict[str, object] = {"pid": os.getpid()}
    if host is not None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only then (else ~40 ms ACK stalls).
        tcp = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((host.strip("[]"), port))
        scheme = "https" if tls else "http"
        shown = f"[{host}]" if ":" in host else host
        url = f"{scheme}://{shown}:{tcp.getsockname()[1]}"
        info["url"] = url
        info["mcp"] = {name: f"{url}/mcp/{name}" for name in gateway.upstreams}
        sockets.append(tcp)
    if unix_socket is not None:
        sockets.append(_unix_listener(unix_socket, socket_mode))
        info["socket"] = f"unix:{unix_socket}"
        info.setdefault("url", f"unix:{unix_socket}")
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        ssl_certfile=g.tls_cert,
        ssl_keyfile=g.tls_key,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg:
            await gateway.start(tg)

            async def announce() -> None:
                while not server.started:
                    await anyio.sleep(0.02)
                if ready_file:
                    atomic_write_text(ready_file, json.dumps(info) + "\n")
                log.warning("zerto-rewind gateway serving %s", info["url"])

            tg.start_soon(announce)
            await server.serve(sockets=sockets)
            tg.cancel_scope.cancel()
    finally:
        gateway.close()
        if unix_socket is not None:
            with contextlib.suppress(OSError):
                os.unlink(unix_socket)


def _unix_listener(path: str, mode: int) -> socket.socket:
    """A unix socket at ``path`` with ``mode``; a stale socket file is replaced."""
    import stat

    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o777 & ~mode)  # never a moment with looser permissions
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, mode)
    return listener
