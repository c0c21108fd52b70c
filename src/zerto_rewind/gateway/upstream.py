"""One VM MCP server behind the gateway, reached with the official SDK's client.

A supervisor task owns the connection (the SDK's client must be entered and
left in one task), reconnects with a short back-off when the server dies, and
hands the live client to callers. A call that fails checks the connection with
a ping; a dead connection is dropped, so the next call starts a new server.

The tool list is cached per connection. A new connection, or the server's
``notifications/tools/list_changed`` (sent spontaneously by 2025-era servers,
through ``subscriptions/listen`` on 2026-07-28 sessions), drops the cache and
calls ``on_stale``; every fresh list goes to ``on_listed``. The gateway compares
those lists with the reviewed pins (``catalog.pins``).

A stdio server's stderr goes to its own log file, redacted (:mod:`.upstream_log`),
never to the gateway's stderr. Why a server is down goes there instead: the
cause inside the SDK's exception groups, or the launcher's own refusal (which
path the server's user cannot reach), with the log's path; once per change,
not on every retry.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import ZertoRewindError
from ..fsutil import atomic_write_text
from .stdio_tap import LaneTap, tapped_stdio_client
from .upstream_log import UpstreamLog, secret_values
from .upstream_user import confined_argv, private_dir, stdio_env, upstream_identity

if TYPE_CHECKING:
    from ..config.settings import UpstreamSettings

__all__ = ["EraMemo", "Upstream", "UpstreamError"]

log = logging.getLogger("zerto_rewind.gateway")

_T = TypeVar("_T")
_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)
_PING_TIMEOUT_S = 3.0


class UpstreamError(ZertoRewindError):
    """The VM MCP server could not be reached, or did not answer in time.

    ``result``: what became of a call it ended (``core.call_result``): ``failed`` when the
    call was never sent or the server answered with a JSON-RPC error, ``unknown`` when it
    was sent and no answer came back (it may have run).
    """

    def __init__(self, message: str, *, result: str = "unknown") -> None:
        super().__init__(message)
        self.result = result


class EraMemo:
    """Whether an upstream is known to speak the handshake era only (no ``server/discover``).

    Kept in memory and in ``path`` (``<state_dir>/upstreams/NAME.era``), so a stdio
    gateway, one process per host session, probes a server once rather than on every
    session. The file decides nothing about safety: a wrong entry costs one failed
    handshake (then it is forgotten) or one probe.
    """

    _HANDSHAKE = "handshake"

    def __init__(self, name: str, path: str | None) -> None:
        self.name = name
        self.path = path
        self._known: bool | None = None

    def handshake_only(self) -> bool:
        if self._known is None:
            self._known = self._read() == self._HANDSHAKE
        return self._known

    def remember_handshake(self, version: str | None) -> None:
        first = self._known is not True
        self._known = True
        if first:  # once: the probe's traces in the upstream's log are explained here
            log.warning(
                "upstream %s: a handshake-era server (protocol %s): it refused the SDK's "
                "server/discover probe, and any warnings about it in its log are harmless; "
                "later connections go straight to initialize",
                self.name,
                version,
            )
        if self.path is None or self._read() == self._HANDSHAKE:
            return
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            atomic_write_text(self.path, self._HANDSHAKE + "\n", mode=0o600)
        except OSError as exc:  # memory still serves this process
            log.info("upstream %s: era not saved (%s)", self.name, exc.strerror)

    def forget(self) -> None:
        self._known = False
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def _read(self) -> str:
        if self.path is None:
            return ""
        try:
            with open(self.path, encoding="utf-8") as fh:
                return fh.read(64).strip()
        except (OSError, UnicodeDecodeError):
            return ""


class Upstream:
    """A supervised connection to one upstream MCP server."""

    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self.name = settings.name
        self._client: Client | None = None
        self._connected = anyio.Event()
        self._drop = anyio.Event()
        self._closing = False
        self.last_error: str | None = None
        self._tools: list[types.Tool] | None = None
        self._schemas: dict[str, dict[str, Any]] = {}
        self._outputs: dict[str, dict[str, Any] | None] = {}
        # Set when the cached list went stale (new connection, list_changed); replaced
        # by whoever re-lists. The gateway's pin watcher waits on it.
        self.tools_changed = anyio.Event()
        self._generation = 0  # bumped when the list goes stale: a list read across it is old
        self.on_stale: Callable[[], None] | None = None
        self.on_listed: Callable[[list[types.Tool]], None] | None = None
        self.log_path: str | None = None  # where a stdio server's stderr goes
        self._launcher_said: str | None = None  # the launcher's refusal in the last attempt
        self._reported: str | None = None  # the cause last logged: repeats are not logged
        self.era = EraMemo(self.name, None)  # the gateway gives it a file in its state dir
        self._tap = LaneTap()  # the read-only fast lane's requests on a stdio server's pipes

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep a connection open until :meth:`close`; restart it whenever it dies."""
        task_status.started()
        attempt = 0
        while not self.stopping():
            try:
                async with self._open() as client:
                    self._client = client
                    self._tools_stale()  # a new connection may be a new server version
                    self._recovered()
                    attempt = 0
                    self._connected.set()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._listen_for_changes, client)
                        await self._drop.wait()
                        tg.cancel_scope.cancel()
            except Exception as exc:  # the server died or never started: try again
                self._failed(exc)
            finally:
                self._client = None
                self._connected = anyio.Event()
                self._drop = anyio.Event()
            if self.stopping():
                return
            await anyio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    def _failed(self, exc: BaseException) -> None:
        """Keep why the server is down; log it when it differs from what was logged last."""
        self.last_error = self._launcher_said or _describe(exc)
        if self.last_error == self._reported:
            log.debug("upstream %s: still down (%s)", self.name, self.last_error)
            return
        self._reported = self.last_error
        where = f"; its log: {self.log_path}" if self.settings.command and self.log_path else ""
        log.error("upstream %s is down: %s%s", self.name, self.last_error, where)

    def _recovered(self) -> None:
        if self._reported is not None:
            log.warning("upstream %s: connected again", self.name)
        self.last_error = self._reported = None

    def health(self) -> str:
        """``connected``, or why not and where its log is (for ``/healthz``)."""
        if self.connected:
            return "connected"
        where = f"; its log: {self.log_path}" if self.settings.command and self.log_path else ""
        return f"not connected ({self.last_error or 'starting'}{where})"

    def close(self) -> None:
        """Stop the supervisor after the current connection."""
        self._closing = True
        self._drop.set()

    def stopping(self) -> bool:
        """True once :meth:`close` was called (a method: it changes while ``run`` awaits)."""
        return self._closing

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def listed(self) -> bool:
        """True while this connection's tool list is cached (see :meth:`input_schema`)."""
        return self._tools is not None and self.connected

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A listed tool's input schema, from the cached list; None for a tool not listed."""
        return self._schemas.get(name)

    def output_schema(self, name: str) -> dict[str, Any] | None:
        """A listed tool's output schema (None: it declares none, or is not listed)."""
        return self._outputs.get(name)

    # ------------------------------------------------------------------ tool list changes

    def _tools_stale(self) -> None:
        self._generation += 1
        self._tools = None
        self._schemas = {}
        self._outputs = {}
        if self.on_stale is not None:
            self.on_stale()
        self.tools_changed.set()

    async def _on_message(self, message: Any) -> None:
        """The SDK client's message handler: a 2025-era server's spontaneous list_changed."""
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            log.info("upstream %s: its tool list changed", self.name)
            self._tools_stale()

    async def _listen_for_changes(self, client: Client) -> None:
        """On a 2026-07-28 session, list_changed arrives only on a subscriptions/listen stream."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    log.info("upstream %s: its tool list changed", self.name)
                    self._tools_stale()
        except ListenNotSupportedError:
            return  # an older session: the message handler hears list_changed
        except Exception as exc:  # the stream is an extra; the connection's own errors show
            why = type(exc).__name__
            log.info("upstream %s: no tools/list_changed stream (%s)", self.name, why)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Client]:
        s = self.settings
        if s.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            # The headers carry the upstream's credentials; they stay in this client.
            async with httpx2.AsyncClient(headers=s.headers, timeout=s.timeout_s) as http:
                transport = streamable_http_client(s.url, http_client=http)
                async with self._connect(transport) as client:
                    yield client
            return
        assert s.command is not None  # the parser requires command or url
        identity = upstream_identity(s)
        with private_dir(s, identity) as home:
            env = stdio_env(s, identity, home)
            # Through the launcher: its own user, its own directory, dies with the gateway.
            argv = confined_argv(s.command, identity, home)
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
            errlog = UpstreamLog(self.log_path, secret_values(s.env))
            self._launcher_said = None
            try:
                with errlog:
                    transport = tapped_stdio_client(params, errlog.sink, self._tap)
                    async with self._connect(transport) as client:
                        yield client
            finally:  # after the log's reader has seen the server's last line
                self._launcher_said = errlog.launcher_said

    @asynccontextmanager
    async def _connect(self, transport: Any) -> AsyncIterator[Client]:
        """The SDK client over ``transport``, in the era this server is known to speak.

        By default the SDK probes ``server/discover`` on every connection, and a server
        from before 2026-07-28 (mcvsphere) logs a screenful of validation warnings for
        each probe before the client falls back to ``initialize``. Once a server has
        answered the handshake instead, that is remembered (:class:`EraMemo`) and later
        connections, in this process or the next, go straight to ``initialize``. A
        remembered handshake that fails is forgotten, so the next attempt probes again
        (a server upgraded to 2026-07-28 only).
        """
        legacy = self.era.handshake_only()
        mode = "legacy" if legacy else "auto"
        entered = False
        try:
            async with Client(
                transport, cache=None, message_handler=self._on_message, mode=mode
            ) as client:
                entered = True
                if not legacy and client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                    self.era.remember_handshake(client.protocol_version)
                yield client
        except Exception:
            if legacy and not entered:
                self.era.forget()
            raise

    async def _live(self, timeout_s: float) -> Client:
        with anyio.move_on_after(timeout_s):
            await self._connected.wait()
        client = self._client
        if client is None:
            why = f" ({self.last_error})" if self.last_error else ""
            msg = f"the VM MCP server {self.name!r} is not connected{why}"
            raise UpstreamError(msg, result="failed")  # nothing was sent
        return client

    # ------------------------------------------------------------------ calls

    async def list_tools(self, timeout_s: float) -> list[types.Tool]:
        """Every tool the server lists (all pages), cached for the life of the connection."""
        if self._tools is not None and self.connected:
            return self._tools
        client = await self._live(timeout_s)
        generation = self._generation
        tools: list[types.Tool] = []
        try:
            with anyio.fail_after(timeout_s):
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except Exception as exc:
            await self._check_after_failure(client)
            msg = f"the VM MCP server {self.name!r} did not list its tools: {type(exc).__name__}"
            raise UpstreamError(msg) from exc
        if generation != self._generation:
            return tools  # changed while it was read: the watcher lists it again
        self._schemas = {t.name: t.input_schema for t in tools}
        self._outputs = {t.name: t.output_schema for t in tools}
        self._tools = tools
        if self.on_listed is not None:
            self.on_listed(tools)
        return tools

    @property
    def transport(self) -> str:
        """``network.transport`` to this server (for traces): a stdio command is a pipe."""
        return "pipe" if self.settings.command else "tcp"

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        timeout_s: float,
        meta: dict[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Forward one call; UpstreamError when the server is gone or too slow.

        ``meta``: the request's ``params._meta`` (the trace context, when tracing).
        """
        client = await self._live(min(timeout_s, 10.0))
        wire_meta = cast(types.RequestParamsMeta, meta) if meta else None
        if wire_meta is not None:
            call = functools.partial(client.call_tool, name, arguments or {}, meta=wire_meta)
        else:
            call = functools.partial(client.call_tool, name, arguments or {})
        return await self._bounded(client, name, timeout_s, call)

    @property
    def raw_calls(self) -> bool:
        """Whether :meth:`call_raw` can be used now: a connected stdio server whose pipes
        carry the fast lane's tap, once the SDK session has sent a request on them (the
        era's envelope the fast lane copies; :mod:`.stdio_tap`)."""
        return self._client is not None and self._tap.open and self._tap.envelope is not None

    async def call_raw(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float,
        meta: dict[str, Any] | None = None,
    ) -> Any:
        """Forward one call on the fast lane's tap; the server's result as parsed JSON.

        The read-only fast lane's way up (``gateway.fastlane``): the request is built
        from the fast lane's one parse, with the ``_meta`` envelope the SDK session
        sends on these pipes (a 2026-07-28 server's; none before), and written to the
        SDK transport's write stream (:mod:`.stdio_tap`); the answer's result is not
        validated against a model. Failures are ``call_tool``'s: UpstreamError with
        the same words, the connection checked.
        ``meta``: as ``call_tool``'s (the trace context, when tracing).
        """
        # The connected client at once: waiting on the connection costs a loop turn.
        client = self._client
        if client is None:
            client = await self._live(min(timeout_s, 10.0))
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        envelope = self._tap.envelope
        if meta or envelope:  # the era's keys win over the caller's, as the SDK stamps them
            params["_meta"] = {**(meta or {}), **(envelope or {})}
        try:
            answer = await self._tap.request("tools/call", params, timeout_s)
        except TimeoutError:
            raise await self._failure(client, name, timeout_s, None) from None
        except Exception as exc:
            raise await self._failure(client, name, timeout_s, exc) from exc
        if isinstance(answer, types.JSONRPCError):
            error = MCPError(code=answer.error.code, message=answer.error.message)
            raise await self._failure(client, name, timeout_s, error) from error
        return answer.result

    async def _bounded(
        self, client: Client, name: str, timeout_s: float, call: Callable[[], Awaitable[_T]]
    ) -> _T:
        """One call within its time bound; its failures as UpstreamError."""
        try:
            with anyio.fail_after(timeout_s):
                return await call()
        except TimeoutError:
            raise await self._failure(client, name, timeout_s, None) from None
        except Exception as exc:
            raise await self._failure(client, name, timeout_s, exc) from exc

    async def _failure(
        self, client: Client, name: str, timeout_s: float, exc: Exception | None
    ) -> UpstreamError:
        """A failed call, for the agent: no answer in time (``exc`` None) or what failed.
        The connection is checked first: a dead one is dropped and restarts."""
        await self._check_after_failure(client)
        if exc is None:
            msg = f"the VM MCP server {self.name!r} did not answer {name} within {timeout_s:g} s"
            return UpstreamError(msg)
        msg = f"the VM MCP server {self.name!r} failed on {name}: {type(exc).__name__}: {exc}"
        return UpstreamError(msg, result=_result_of(exc))

    async def _check_after_failure(self, client: Client) -> None:
        """Ping; a server that does not answer is dropped, so the next call restarts it."""
        try:
            with anyio.fail_after(_PING_TIMEOUT_S):
                await client.send_ping()
        except Exception:
            if self._client is client:
                self._drop.set()


def _result_of(exc: BaseException) -> str:
    """``failed`` when the server answered the call with a JSON-RPC error; ``unknown`` when
    the connection closed or timed out under it, or anything else broke after it was sent."""
    cause = _cause(exc)
    if isinstance(cause, MCPError) and cause.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
        return "failed"
    return "unknown"


def _cause(exc: BaseException) -> BaseException:
    """The first real error inside the SDK's (nested) task groups; cancellations skipped."""
    while isinstance(exc, BaseExceptionGroup):
        # Exception, not BaseException: a cancellation is the group's echo, not its cause.
        inner: list[BaseException] = [e for e in exc.exceptions if isinstance(e, Exception)]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def _describe(exc: BaseException) -> str:
    """What failed, for a person: the cause, not the exception group around it."""
    exc = _cause(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
