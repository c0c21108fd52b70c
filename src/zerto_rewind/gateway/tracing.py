"""OpenTelemetry spans for the gateway's tool calls and the guard service's decisions.

Off unless the standard ``OTEL_*`` variables ask for traces (:func:`wanted`); then
:func:`setup` builds an SDK tracer provider whose exporters (``otlp`` over
HTTP/protobuf, ``console``), resource (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``), sampler (``OTEL_TRACES_SAMPLER``) and batching
(``OTEL_BSP_*``) the same variables configure. Off, nothing of OpenTelemetry is
imported and each hook below costs one global read.

Spans follow the GenAI semantic conventions for MCP: a SERVER span
``tools/call {tool}`` per call the gateway serves (its parent is the W3C trace
context in the request's ``params._meta``), a CLIENT span for the call forwarded
to the upstream (whose ``params._meta`` carries that span's context), and a
SERVER span per ``POST /v1/decide``. The guard's facts go under ``zerto.*``.
Like the decision log, a span holds no tool argument: the VM names at most.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from ..core.decision import Decision
    from .upstream import Upstream

__all__ = [
    "approval_waited",
    "decided",
    "forwarding",
    "install",
    "serving",
    "setup",
    "shutdown",
    "stamp",
    "wanted",
]

R = TypeVar("R")

TOOLS_CALL = "tools/call"
DEFAULT_SERVICE_NAME = "zerto-rewind-gateway"
# The W3C Trace Context keys the MCP convention (SEP-414) reserves in params._meta.
_CONTEXT_KEYS = ("traceparent", "tracestate")
_EXPORTERS = ("otlp", "console")

_tracer: Tracer | None = None
_provider: TracerProvider | None = None


class _Api:
    """The OpenTelemetry names the hooks use, imported once when tracing starts, not
    looked up by an import statement per call."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.attach = context.attach
        self.detach = context.detach
        self.empty_context = context.Context
        self.current_span = trace.get_current_span
        self.in_context = trace.set_span_in_context
        self.server = SpanKind.SERVER
        self.client = SpanKind.CLIENT
        self.error = Status(StatusCode.ERROR)
        self.propagator = TraceContextTextMapPropagator()


_api: _Api | None = None


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """Traces are asked for: an exporter other than ``none``, or an OTLP endpoint."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def setup(env: Mapping[str, str] = os.environ) -> bool:
    """Start exporting spans when ``OTEL_*`` asks; True when traces are on.

    ConfigError when the variables ask for what cannot be had (the extra not
    installed, a protocol or exporter this build does not ship): an operator who
    asked for traces learns at start that there will be none, not from an empty
    collector.
    """
    if _tracer is not None or not wanted(env):
        return _tracer is not None
    names = _exporter_names(env)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        msg = (
            "the OTEL_* variables ask for traces, but OpenTelemetry is not installed: "
            "install zerto-rewind[otel], or unset OTEL_TRACES_EXPORTER and "
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        raise ConfigError(msg) from None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, env)))
    install(provider)
    return True


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "otlp"
    names = [n.strip() for n in raw.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in _EXPORTERS]
    if unknown:
        msg = (
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}, which the gateway does not "
            f"ship; use {' or '.join(_EXPORTERS)}"
        )
        raise ConfigError(msg)
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if "otlp" in names and protocol.strip() != "http/protobuf":
        msg = (
            f"OTEL_EXPORTER_OTLP_PROTOCOL is {protocol!r}; the gateway exports OTLP over "
            "http/protobuf only: set it to http/protobuf and point the endpoint at the "
            "collector's HTTP port (4318)"
        )
        raise ConfigError(msg)
    return names


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        msg = "OTLP export needs opentelemetry-exporter-otlp-proto-http: install zerto-rewind[otel]"
        raise ConfigError(msg) from None
    return OTLPSpanExporter()  # endpoint, headers, timeout: from OTEL_EXPORTER_OTLP_*


def install(provider: TracerProvider) -> None:
    """Trace with ``provider`` (:func:`setup`'s, or a test's with an in-memory exporter)."""
    global _tracer, _provider, _api
    _api = _Api()
    _provider = provider
    _tracer = provider.get_tracer("zerto_rewind.gateway")


def shutdown() -> None:
    """Flush the spans still batched and stop tracing (the gateway is closing)."""
    global _tracer, _provider, _api
    provider, _tracer, _provider, _api = _provider, None, None, None
    if provider is not None:
        provider.shutdown()


# --------------------------------------------------------------------------- spans


async def serving(
    tool: str,
    run: Callable[[], Awaitable[R]],
    *,
    meta: Mapping[str, Any] | None,
    transport: str,
    request_id: object = None,
    protocol_version: str | None = None,
    session_id: str | None = None,
) -> R:
    """Run one served call (``tools/call`` or ``/v1/decide``) inside its SERVER span.

    Its parent is the trace context in ``meta`` (the request's ``params._meta``).
    A result with ``isError`` (a refusal, a tool's error) sets ``error.type`` to
    ``tool_error``; an exception, to its type. Neither message is recorded: it
    may quote an argument.
    """
    tracer, api = _tracer, _api
    if tracer is None or api is None:
        return await run()
    attributes = _mcp_attributes(tool, transport)
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if session_id:
        attributes["mcp.session.id"] = session_id
    span = tracer.start_span(
        f"{TOOLS_CALL} {tool}",
        context=_parent(meta),
        kind=api.server,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    with _Current(api, span):
        result = await run()
        if getattr(result, "is_error", False):
            _failed(span, "tool_error")
        return result


@contextmanager
def forwarding(tool: str, upstream: Upstream) -> Iterator[dict[str, str] | None]:
    """The CLIENT span of a call forwarded upstream; yields the ``_meta`` that carries it.

    Off, it yields None: the forwarded call carries no ``_meta`` of ours. The span
    is current while the call is sent: the MCP SDK's client stamps the current
    context into ``_meta`` too, over ours.
    """
    tracer, api = _tracer, _api
    if tracer is None or api is None:
        yield None
        return
    span = tracer.start_span(
        f"{TOOLS_CALL} {tool}",
        kind=api.client,
        attributes=_mcp_attributes(tool, upstream.transport),
        record_exception=False,
        set_status_on_exception=False,
    )
    current = _Current(api, span)
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier, context=current.context)
    with current:
        yield carrier


def _mcp_attributes(tool: str, transport: str) -> dict[str, Any]:
    return {
        "mcp.method.name": TOOLS_CALL,
        "gen_ai.tool.name": tool,
        "gen_ai.operation.name": "execute_tool",
        "network.transport": transport,
    }


class _Current:
    """A started span, current inside the ``with`` and ended at its end; an exception
    sets ``error.type`` to its type (never its message).

    A class, not start_as_current_span's two generator-based context managers: the
    same span made current the same way, for less CPU per call.
    """

    __slots__ = ("_api", "_span", "_token", "context")

    def __init__(self, api: _Api, span: Span) -> None:
        self._api = api
        self._span = span
        self.context = api.in_context(span)

    def __enter__(self) -> None:
        self._token = self._api.attach(self.context)

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        if kind is not None:
            _failed(self._span, kind.__name__)
        self._api.detach(self._token)
        self._span.end()


def decided(decision: Decision, answer: str | None = None) -> None:
    """The guard's facts on the current span: ``zerto.*``."""
    if _api is None:
        return
    span = _api.current_span()
    if not span.is_recording():
        return
    facts: dict[str, Any] = {"zerto.decision": decision.outcome, "zerto.row": decision.row}
    if decision.vpgs:
        facts["zerto.vpg"] = decision.vpg_names
        facts["zerto.vpg_id"] = [v.vpg_id for v in decision.vpgs]
    checkpoints = decision.checkpoint_ids
    if checkpoints:
        facts["zerto.checkpoint_id"] = checkpoints
    delays = [
        v.landed_at - v.requested_at
        for v in decision.vpgs
        if v.landed_at is not None and v.requested_at is not None
    ]
    if delays:
        facts["zerto.landing_delay_s"] = round(max(delays), 3)
    if decision.vms:
        facts["zerto.vm"] = list(decision.vms)
    if answer is not None:
        facts["zerto.answer"] = answer
    span.set_attributes(facts)


def approval_waited(request_id: str, state: str, waited_s: float, bound_s: float) -> None:
    """The approval wait, as an event on the current span: which request, how it ended."""
    if _api is None:
        return
    _api.current_span().add_event(
        "zerto.approval.wait",
        {
            "zerto.approval.id": request_id,
            "zerto.approval.state": state,
            "zerto.approval.waited_s": round(waited_s, 3),
            "zerto.approval.wait_bound_s": bound_s,
        },
    )


def stamp(record: dict[str, Any]) -> None:
    """The current trace's id in a decision-log record (``trace_id``), when tracing is on."""
    if _api is None:
        return
    context = _api.current_span().get_span_context()
    if context.is_valid:
        record["trace_id"] = format(context.trace_id, "032x")


def _parent(meta: Mapping[str, Any] | None) -> Context | None:
    """The caller's trace context from ``params._meta``; None (a new trace) without one."""
    if not meta:
        return None
    carrier = {k: v for k in _CONTEXT_KEYS if isinstance(v := meta.get(k), str)}
    if "traceparent" not in carrier or _api is None:
        return None
    # From an empty context: the caller's trace, never a span left current by the gateway.
    return _api.propagator.extract(carrier, context=_api.empty_context())


def _failed(span: Span, error_type: str) -> None:
    span.set_attribute("error.type", error_type)
    if _api is not None:
        span.set_status(_api.error)
