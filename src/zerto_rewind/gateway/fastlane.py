"""The read-only fast lane: a read-only ``tools/call`` over HTTP, answered without the SDK's stacks.

On the full path a read-only call crosses the SDK's server (transport, dispatcher,
models), the guard, and the SDK's client to the upstream, and back: about 1.5 ms
of CPU, of which the guard's own decision is 0.1 ms. Here, for a call that is
read-only by the catalog, the body that :class:`~.limits.TokenLimits` already
read, and parsed once, strictly (:mod:`.fastlane_wire`), is classified and forwarded
through the upstream's SDK session as a request built from that parse; the
result goes back re-serialized, with no model built, in the client's protocol era
(the upstream's may be the other one: ``fastlane_wire.in_clients_era``).

It sits after everything that gates the full path: the bearer token and the
session's owner (:class:`~.http._BearerAuth`), the per-token caps (``TokenLimits``
counted this request before it got here). It then checks, itself, what the SDK
would check next: Content-Type, Host and Origin (the same transport security
settings), Accept, the protocol version header, and that the session is open in
the SDK and belongs to this token; on 2026-07-28, the SDK's own request ladder
(envelope, routing headers, ``Mcp-Param-*``). And it answers only what the full
path would answer read-only: the catalog's classification with the call's
arguments, and, for a pinned upstream, only a tool that matches its reviewed pin.

Anything it does not recognise — another method, a duplicated key, an
unlisted or mutating tool, a pin not compared yet, a header it would have to
reject, an HTTP upstream, an SDK without what this relies on — goes
to the full path unchanged, which answers (or refuses) as before. It never
answers a call the full path would not have forwarded read-only.

What it leaves out is what a read-only call does not use: the decision thread,
progress and elicitation, the upstream result's model and output-schema checks
(the client validates its result itself), and the log line (read-only calls
write none on the full path either). Metrics and spans are the full path's
(``zerto_rewind_decisions``, ``…_forwarded_calls``; the SERVER and CLIENT spans, the
trace context passed upstream), and ``zerto_rewind_fast_lane_calls`` counts it too.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request

from ..core.decision import Decision, Outcome, Row
from . import tracing
from .calls import host_tool_name
from .fastlane_sdk import in_flight, open_session, sessions_readable
from .fastlane_wire import STRICT_MESSAGE_KEY, LaneCall, in_clients_era, lane_call, takes
from .proxy import PEER_USER_KEY
from .result_notes import error_result
from .upstream import UpstreamError

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .service import Gateway
    from .upstream import Upstream

__all__ = ["FastLane"]

_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"
_PARAM_PREFIX = "mcp-param-"


class _Route:
    """One ``/mcp/<upstream>`` endpoint: its upstream and the SDK's session manager."""

    __slots__ = ("manager", "server_info", "upstream")

    def __init__(self, upstream: Upstream, manager: StreamableHTTPSessionManager) -> None:
        self.upstream = upstream
        self.manager = manager
        # the stamp the SDK's server puts on a 2026-07-28 result; read-only from here on
        self.server_info: dict[str, Any] = manager.app.server_info_stamp


class _Admitted:
    """A call the fast lane answers: where it goes, and how the answer is framed."""

    __slots__ = ("call", "route", "scope", "session_id", "started", "transport", "version")

    def __init__(
        self,
        call: LaneCall,
        route: _Route,
        scope: Scope,
        version: str,
        session_id: str | None,
        transport: Any,
        started: float,
    ) -> None:
        self.call = call
        self.route = route
        self.scope = scope
        self.version = version
        self.session_id = session_id  # a handshake-era session's, named in the answer
        self.transport = transport
        self.started = started


class FastLane:
    """ASGI middleware in front of the SDK's endpoints: read-only calls go the short way."""

    def __init__(
        self,
        app: ASGIApp,
        gateway: Gateway,
        routes: dict[str, tuple[Upstream, StreamableHTTPSessionManager]],
        security: TransportSecuritySettings | None,
    ) -> None:
        self.app = app
        self.gateway = gateway
        self.security = TransportSecurityMiddleware(security)
        self.routes: dict[str, _Route] = {}
        # An SDK without what the lane reads: no route, everything the full path's.
        if sessions_readable([manager for _, manager in routes.values()]):
            self.routes = {path: _Route(*pair) for path, pair in routes.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # TokenLimits' strict parse of a tools/call body: taken, so the full path holds
        # no second copy of a declined call's arguments while it runs.
        message = scope.pop(STRICT_MESSAGE_KEY, None)
        route = self.routes.get(scope.get("path", "")) if scope["type"] == "http" else None
        if message is None or route is None or not route.upstream.raw_calls:
            await self.app(scope, receive, send)
            return
        first = await receive()  # TokenLimits hands the whole body over as one message
        admitted = None
        if first["type"] == "http.request" and not first.get("more_body", False):
            admitted = await self._admit(scope, message, route)
        if admitted is None:
            await self.app(scope, _replay(first, receive), send)
            return
        if admitted.transport is None:  # 2026-07-28: no session to keep
            await self._serve(admitted, send)
            return
        manager, bound = route.manager, self.gateway.call_timeout_s(route.upstream)
        with in_flight(admitted.transport, manager.session_idle_timeout, bound):
            await self._serve(admitted, send)

    # ------------------------------------------------------------------ admission

    async def _admit(self, scope: Scope, message: Any, route: _Route) -> _Admitted | None:
        """The call, if every gate of the full path passes and it is read-only; else None.

        ``message``: the body as TokenLimits parsed it, strictly (duplicated keys refused).
        """
        started = time.monotonic()
        call = lane_call(message)
        if call is None or scope.get("method") != "POST":
            return None
        request = Request(scope)
        headers = request.headers
        if await self.security.validate_request(request, is_post=True) is not None:
            return None
        has_json, has_sse = check_accept_headers(request)
        version = headers.get(_VERSION_HEADER)
        session_id = headers.get(_SESSION_HEADER)
        if not (has_json and has_sse) or version is None:
            return None
        upstream = route.upstream
        transport = None
        if version in HANDSHAKE_PROTOCOL_VERSIONS and session_id is not None:
            transport = open_session(route.manager, session_id, scope)
            if transport is None:
                return None
        elif version in MODERN_PROTOCOL_VERSIONS and session_id is None:
            if _modern_rejection(call, request, upstream) is not None:
                return None
        else:  # a version the SDK would refuse, or an era's header with the other's session
            return None
        catalog, pins = self.gateway.settings.catalog, self.gateway.pins
        if not takes(catalog, pins, upstream.name, call.tool, call.arguments):
            return None
        return _Admitted(call, route, scope, version, session_id, transport, started)

    # ------------------------------------------------------------------ answering

    async def _serve(self, admitted: _Admitted, send: Send) -> None:
        """Forward the call and send its answer; metrics and spans as the full path makes them."""
        call = admitted.call
        meta = call.message["params"].get("_meta")
        answer = await tracing.serving(
            call.tool,
            lambda: self._forward(admitted),
            meta=meta,
            transport="unix" if PEER_USER_KEY in admitted.scope else "tcp",
            request_id=call.request_id,
            protocol_version=admitted.version,
            session_id=admitted.session_id,
        )
        modern = admitted.version in MODERN_PROTOCOL_VERSIONS
        in_clients_era(answer.result, modern, admitted.route.server_info)
        body = {"jsonrpc": "2.0", "id": call.request_id, "result": answer.result}
        await _send(send, json.dumps(body, separators=(",", ":")).encode(), admitted.session_id)

    async def _forward(self, admitted: _Admitted) -> _Answer:
        gateway = self.gateway
        metrics = gateway.metrics
        upstream = admitted.route.upstream
        call = admitted.call
        decision = Decision(Row.READ_ONLY, Outcome.NONE, host_tool_name(upstream.name, call.tool))
        metrics.decided(decision, time.monotonic() - admitted.started, None)
        tracing.decided(decision)
        try:
            with tracing.forwarding(call.tool, upstream) as trace_meta:
                result = await upstream.call_raw(
                    call.tool, call.arguments, gateway.call_timeout_s(upstream), meta=trace_meta
                )
                if not _complete(result):
                    msg = (
                        f"the VM MCP server {upstream.name!r} failed on {call.tool}: "
                        "its answer is not a tool result"
                    )
                    raise UpstreamError(msg)
        except UpstreamError as exc:
            metrics.upstream_error(upstream.name, "call")
            failed = error_result(f"{exc}; the call may not have run. ")
            return _Answer(failed.model_dump(mode="json", by_alias=True, exclude_none=True), True)
        metrics.forwarded(upstream.name, Row.READ_ONLY)
        metrics.fast_lane(upstream.name)
        return _Answer(result, result.get("isError") is True)


def _complete(result: Any) -> bool:
    """Whether an upstream's answer is a whole tool result (not a question, nor an
    extension's shape): the only answer the lane relays."""
    return (
        isinstance(result, dict)
        and isinstance(result.get("content"), list)
        and result.get("resultType", "complete") == "complete"
    )


class _Answer:
    """A result as it goes back; ``is_error`` marks the span as the full path's result does."""

    __slots__ = ("is_error", "result")

    def __init__(self, result: dict[str, Any], is_error: bool) -> None:
        self.result = result
        self.is_error = is_error


def _modern_rejection(call: LaneCall, request: Request, upstream: Upstream) -> object | None:
    """What the SDK's 2026-07-28 ladder would refuse in this request (None: nothing).

    The same functions the SDK's modern entry runs, in its order: a routing header
    given twice, the ``_meta`` envelope and its headers, then the ``Mcp-Param-*``
    headers against the tool's listed input schema (a tool not listed yet: the
    full path's, which lists it).
    """
    headers = request.headers
    duplicated = find_duplicated_routing_header(headers.items())
    if duplicated is not None:
        return duplicated
    verdict = classify_inbound_request(call.message, headers=dict(headers))
    if isinstance(verdict, InboundLadderRejection):
        return verdict
    params_given = any(key.startswith(_PARAM_PREFIX) for key in headers)
    if not call.arguments and not params_given:
        return None
    if not upstream.listed:
        return "unlisted"
    schema = upstream.input_schema(call.tool)
    if schema is None:
        return "no schema" if params_given else None
    if not params_given and not _declares_headers(schema):
        return None  # nothing to compare: the SDK's check finds nothing either
    return validate_mcp_param_headers(schema, call.arguments, headers)


# input schema's id -> (the schema, whether it declares x-mcp-header); the upstream's
# cached list holds the same schema objects from one call to the next
_DECLARES: dict[int, tuple[object, bool]] = {}
_DECLARES_KEEP = 1024


def _declares_headers(schema: dict[str, Any]) -> bool:
    """Whether the schema names ``x-mcp-header`` anywhere (a mention in a description
    counts too: then the SDK's own check runs, as on the full path)."""
    known = _DECLARES.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    if len(_DECLARES) >= _DECLARES_KEEP:
        _DECLARES.clear()
    declares = "x-mcp-header" in json.dumps(schema)
    _DECLARES[id(schema)] = (schema, declares)
    return declares


async def _send(send: Send, data: bytes, session_id: str | None) -> None:
    """The answer as ``application/json``, in both eras: a client must accept it (the SDK
    refuses a POST that does not), and it reads a JSON body to its end, so the connection
    is kept. An SSE answer with one event was read up to its event and the connection
    then closed: one TCP connection per call on handshake-era sessions."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _replay(first: Message, receive: Receive) -> Receive:
    """A ``receive`` that gives ``first`` back once, then what the connection says."""
    box = [first]

    async def replay() -> Message:
        if box:
            return box.pop()
        return await receive()

    return replay
