"""The SDK server that stands in for one upstream: its tools unchanged, every call guarded.

``tools/list`` returns the upstream's tools as the upstream lists them (names,
descriptions, input schemas, annotations), so prompts that name tools keep
working. ``tools/call`` goes through :func:`.calls.handle_call`. A connection's
opening waits until those tools are listed (:class:`ReadyFirst`).
"""

from __future__ import annotations

import functools
import getpass
import logging
import unicodedata
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from . import tracing
from .calls import (
    APPROVAL_FIELD,
    APPROVAL_SCHEMA,
    Asker,
    CallContext,
    Progress,
    UrlShower,
    handle_call,
)
from .upstream import UpstreamError

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from .service import Gateway
    from .upstream import Upstream

__all__ = ["CLIENT_SCOPE_KEY", "PEER_USER_KEY", "ReadyFirst", "build_proxy", "host_label"]

log = logging.getLogger("zerto_rewind.gateway")

# Where the HTTP auth layer leaves the authenticated client's name in the ASGI scope.
CLIENT_SCOPE_KEY = "zerto_rewind.client"
# Where the unix-socket protocol leaves the peer's user name (SO_PEERCRED) in the scope.
PEER_USER_KEY = "zerto_rewind.peer_user"
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())


class _ProxyServer(Server[Any]):
    """The SDK's low-level server, with ``get_tool_input_schema`` read from the upstream's cache.

    On the 2026-07-28 HTTP path the SDK checks a call's ``Mcp-Param-*`` headers
    against the tool's input schema; without a lookup it runs the whole
    ``tools/list`` handler (middleware, validation, serialization) on every
    call to find that schema. While the upstream's list is cached, the same
    schema comes from the cache; while it is not (before the first list on a
    connection), the lookup is None and the SDK lists as before.
    """

    upstream: Upstream | None = None

    @property
    def get_tool_input_schema(self) -> Callable[[str], Mapping[str, Any] | None] | None:
        upstream = self.upstream
        return upstream.input_schema if upstream is not None and upstream.listed else None

    @get_tool_input_schema.setter
    def get_tool_input_schema(self, value: object) -> None:
        """``Server.__init__`` assigns None here; the property above decides."""


def _call_context(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, connection_id: str | None
) -> CallContext:
    """What the guard needs of one call's request: who, which session, how to ask."""
    capable = ctx.session.check_client_capability(_ELICITATION)
    back_channel = capable and ctx.session.can_send_request
    url_mode = capable and _url_elicitation(ctx)
    return CallContext(
        client=_client_name(ctx),
        session_id=_session_id(ctx) or connection_id,
        tool_use_id=_tool_use_id(params),
        ask=_asker(ctx) if back_channel else None,
        ask_inline=capable and not back_channel,
        input_responses=dict(params.input_responses or {}),
        request_state=params.request_state,
        show_url=_url_shower(ctx) if url_mode and back_channel else None,
        url_inline=url_mode and not back_channel,
        progress=_progress(ctx),
        host=_host(ctx),
    )


def build_proxy(
    gateway: Gateway, upstream: Upstream, *, connection_id: str | None = None
) -> Server[Any]:
    """A low-level SDK server presenting ``upstream`` through the guard.

    ``connection_id``: the session id of a server that serves one connection (stdio),
    for the decision log and the tag; over HTTP each session's own id is used.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            tools = await upstream.list_tools(upstream.settings.timeout_s)
        except UpstreamError:
            gateway.metrics.upstream_error(upstream.name, "list")
            raise
        gateway.learn_tools(upstream.name, tools)
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        context = _call_context(ctx, params, connection_id)
        return await tracing.serving(
            params.name,
            lambda: handle_call(gateway, upstream, params.name, params.arguments, context),
            meta=params.meta,
            transport=_transport(ctx),
            request_id=ctx.request_id,
            protocol_version=ctx.protocol_version,
            session_id=_session_id(ctx),  # HTTP's; a stdio connection has none
        )

    server = _ProxyServer(
        f"zerto-rewind-gateway/{upstream.name}",
        instructions=(
            f"The VM MCP server {upstream.name!r}, behind zerto-rewind: every change is "
            "preceded by a Zerto checkpoint, or refused with the reason."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.upstream = upstream
    server.middleware.append(ReadyFirst(gateway, upstream))
    return server


# How long an opening (initialize, server/discover) waits for the upstream's tools, at
# most: under Codex's default MCP startup timeout (10 s), so the host shows the
# gateway's reason rather than its own timeout. A lower upstreams.NAME.timeout_s wins.
START_BUDGET_S = 8.0
# The requests that open a connection: a host lists tools right after them.
_OPENINGS = frozenset({"initialize", "server/discover"})


class ReadyFirst:
    """Server middleware: a connection's opening is answered once the upstream's tools are.

    A host that lists tools as soon as ``initialize`` is answered (Codex sends its
    first model request then) must find every tool on that first ``tools/list``. So
    ``initialize`` (and the 2026-07-28 ``server/discover``) waits until the upstream is
    connected and its list is read and cached; the SDK parks the connection's read
    loop meanwhile, so a ``tools/list`` sent at once is answered after it, from the
    cache. An upstream that is not up within the budget fails the opening with the
    reason, which the host shows as the server failing to start: no tool is offered,
    guarded or not. The upstream keeps being retried; the next connection may succeed.
    """

    def __init__(self, gateway: Gateway, upstream: Upstream) -> None:
        self.gateway = gateway
        self.upstream = upstream

    @property
    def budget_s(self) -> float:
        return min(self.upstream.settings.timeout_s, START_BUDGET_S)

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        if ctx.method in _OPENINGS:
            await self.ready()
        return await call_next(ctx)

    async def ready(self) -> None:
        """Return once the upstream's tools are listed; else MCPError with what failed."""
        upstream = self.upstream
        budget = self.budget_s
        why = "it did not answer"
        # The upstream's own wait ends first, with what failed; this bound is a backstop.
        with anyio.move_on_after(budget + 1.0):
            try:
                tools = await upstream.list_tools(budget)
            except UpstreamError as exc:
                # Not connected: why its last start failed; connected: why the list failed.
                why = f"last error: {upstream.last_error}" if upstream.last_error else str(exc)
            else:
                self.gateway.learn_tools(upstream.name, tools)
                return
        self.gateway.metrics.upstream_error(upstream.name, "start")
        log.warning(
            "upstream %s: not ready within %g s; the host's connection is refused",
            upstream.name,
            budget,
        )
        message = (
            f"zerto-rewind: the VM MCP server {upstream.name!r} did not start within "
            f"{budget:g} s ({why}), so none of its tools are offered. An operator can check "
            f"it with `zerto-rewind doctor --server {upstream.name}` and its upstream log, "
            "then restart this MCP server in the host."
        )
        raise MCPError(code=types.INTERNAL_ERROR, message=message)


def _client_name(ctx: ServerRequestContext[Any]) -> str:
    scope = getattr(ctx.request, "scope", None)
    if isinstance(scope, dict) and isinstance(scope.get(CLIENT_SCOPE_KEY), str):
        return str(scope[CLIENT_SCOPE_KEY])
    return f"stdio:{_os_user()}"


@functools.cache  # asked on every stdio call; a process's user does not change
def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _tool_use_id(params: types.CallToolRequestParams) -> str | None:
    """Claude Code names the model's tool use in ``_meta``; the log keeps it for tracing."""
    meta: Mapping[str, Any] = params.meta or {}
    value = meta.get("claudecode/toolUseId")
    return value if isinstance(value, str) else None


def _transport(ctx: ServerRequestContext[Any]) -> str:
    """``network.transport`` of the call's connection: stdio is a pipe."""
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):
        return "pipe"
    return "unix" if PEER_USER_KEY in scope else "tcp"


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        value = headers.get("mcp-session-id")
        if value:
            return str(value)
    return None


def _url_elicitation(ctx: ServerRequestContext[Any]) -> bool:
    """The client declared URL-mode elicitation (2025-11-25 and later)."""
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None and caps.elicitation.url is not None


def _url_shower(ctx: ServerRequestContext[Any]) -> UrlShower:
    """Show a person the approval page over the back channel; the answer approves nothing."""
    session = ctx.session

    async def show(message: str, url: str, elicitation_id: str) -> None:
        await session.elicit_url(message, url, elicitation_id, related_request_id=ctx.request_id)

    return show


def _progress(ctx: ServerRequestContext[Any]) -> Progress | None:
    """Progress notifications on this call, when the client asked for them with a token."""
    meta: Mapping[str, Any] = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    if not isinstance(token, str | int):
        return None
    session = ctx.session
    related = str(ctx.request_id) if ctx.request_id is not None else None

    async def progress(done: float, total: float, message: str) -> None:
        await session.send_progress_notification(
            token, done, total, message, related_request_id=related
        )

    return progress


def _host(ctx: ServerRequestContext[Any]) -> str | None:
    """The MCP client's own name and version (``clientInfo``), for the log and the approver.

    The agent's side writes it: informational only, never used to authorise.
    """
    params = ctx.session.client_params
    info = getattr(params, "client_info", None) if params is not None else None
    return host_label(getattr(info, "name", None), getattr(info, "version", None))


HOST_MAX = 80


def host_label(name: object, version: object) -> str | None:
    """``name version`` of a clientInfo, printable and at most :data:`HOST_MAX` characters.

    Control and format characters (newlines, escapes, bidi overrides) are dropped, so
    the text cannot forge a log line or a terminal's display.
    """
    shown = _printable(name) if isinstance(name, str) else ""
    if not shown:
        return None
    if isinstance(version, str) and _printable(version):
        shown = f"{shown} {_printable(version)}"
    return shown[:HOST_MAX]


def _printable(text: str) -> str:
    return "".join(
        ch for ch in text if unicodedata.category(ch)[0] not in "CZ" or ch == " "
    ).strip()


def _asker(ctx: ServerRequestContext[Any]) -> Asker:
    """Ask over the connection's back channel (handshake-era clients)."""
    session = ctx.session

    async def ask(message: str) -> bool | None:
        result = await session.elicit_form(
            message, APPROVAL_SCHEMA, related_request_id=ctx.request_id
        )
        if result.action != "accept":
            return False if result.action == "decline" else None
        content = result.content or {}
        return content.get(APPROVAL_FIELD) is True

    return ask
