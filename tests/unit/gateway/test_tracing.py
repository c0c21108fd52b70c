"""The gateway's spans (gateway/tracing.py), in-process, with the SDK's in-memory exporter.

End to end (the real OTLP/HTTP exporter, the real gateway process, a receiver that
decodes what arrives) is tests/integration/gateway/test_gateway_tracing.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from zerto_rewind.core.decision import Decision, Outcome, Row, VpgOutcome
from zerto_rewind.errors import ConfigError
from zerto_rewind.gateway import tracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.shutdown()


def served(result: Any = None, **kwargs: Any) -> Any:
    async def run() -> Any:
        tracing.decided(CONFIRMED, None)
        record: dict[str, Any] = {}
        tracing.stamp(record)
        return result if result is not None else record

    options: dict[str, Any] = {"meta": None, "transport": "tcp", **kwargs}
    return anyio.run(lambda: tracing.serving("power_off_vm", run, **options))


CONFIRMED = Decision(
    Row.CONFIRMED,
    Outcome.CONTEXT,
    "mcp__vsphere__power_off_vm",
    vms=("jp-ubuntu",),
    vpgs=[
        VpgOutcome(
            "vpg-1",
            "hq-app",
            ("jp-ubuntu",),
            checkpoint_id="cp-7",
            requested_at=100.0,
            landed_at=104.25,
        )
    ],
)


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_traces_are_on_only_when_otel_variables_ask(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, "jaeger"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"),
    ],
)
def test_what_this_build_cannot_export_stops_the_start(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        tracing.setup(env)
    assert tracing._tracer is None


def test_off_the_call_runs_and_nothing_of_the_sdk_is_imported() -> None:
    code = (
        "import sys, anyio\n"
        "from zerto_rewind.gateway import service, tracing\n"
        "assert not tracing.setup({})\n"
        "async def run():\n"
        "    return 'ran'\n"
        "ran = anyio.run(lambda: tracing.serving('t', run, meta=None, transport='pipe'))\n"
        "assert ran == 'ran'\n"
        "rec = {}\n"
        "tracing.stamp(rec)\n"
        "assert rec == {}, rec\n"
        "with tracing.forwarding('t', None) as meta:\n"
        "    assert meta is None\n"
        "loaded = [m for m in sys.modules if m.startswith('opentelemetry.sdk')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_served_call_is_a_server_span_under_the_callers_context(
    spans: InMemorySpanExporter,
) -> None:
    meta = {"traceparent": TRACEPARENT, "tracestate": "zr=1"}
    record = served(meta=meta, request_id=7, protocol_version="2025-11-25", session_id="s-1")
    (span,) = spans.get_finished_spans()
    assert span.name == "tools/call power_off_vm"
    assert span.kind == SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == PARENT_ID
    assert span.parent.trace_state.get("zr") == "1"
    assert dict(span.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "power_off_vm",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp",
        "jsonrpc.request.id": "7",
        "mcp.protocol.version": "2025-11-25",
        "mcp.session.id": "s-1",
        "zerto.decision": "context",
        "zerto.row": "confirmed",
        "zerto.vpg": ("hq-app",),
        "zerto.vpg_id": ("vpg-1",),
        "zerto.checkpoint_id": ("cp-7",),
        "zerto.landing_delay_s": 4.25,
        "zerto.vm": ("jp-ubuntu",),
    }
    assert record == {"trace_id": TRACE_ID}
    assert span.status.status_code == StatusCode.UNSET


def test_without_a_traceparent_the_call_starts_a_trace(spans: InMemorySpanExporter) -> None:
    served(meta={"traceparent": "not-a-traceparent"})
    (span,) = spans.get_finished_spans()
    assert span.parent is None
    assert "jsonrpc.request.id" not in (span.attributes or {})


def test_a_refusal_is_a_tool_error_and_an_exception_its_type_without_message(
    spans: InMemorySpanExporter,
) -> None:
    refused = types.CallToolResult(content=[], is_error=True)
    served(result=refused)

    async def boom() -> None:
        raise ValueError("quotes the argument secret-value")

    with pytest.raises(ValueError, match="secret-value"):
        anyio.run(lambda: tracing.serving("power_off_vm", boom, meta=None, transport="pipe"))
    first, second = spans.get_finished_spans()
    assert first.attributes is not None
    assert first.attributes["error.type"] == "tool_error"
    assert first.status.status_code == StatusCode.ERROR
    assert second.attributes is not None
    assert second.attributes["error.type"] == "ValueError"
    assert "secret-value" not in repr(second.to_json())


def test_the_forwarded_call_carries_its_client_span_in_meta(
    spans: InMemorySpanExporter,
) -> None:
    upstream = SimpleNamespace(transport="pipe")
    carried: list[dict[str, str] | None] = []

    async def run() -> str:
        with tracing.forwarding("power_off_vm", upstream) as meta:  # type: ignore[arg-type]
            carried.append(meta)
        return "ran"

    meta = {"traceparent": TRACEPARENT}
    anyio.run(lambda: tracing.serving("power_off_vm", run, meta=meta, transport="tcp"))
    client, server = spans.get_finished_spans()
    assert client.kind == SpanKind.CLIENT
    assert server.kind == SpanKind.SERVER
    assert client.parent is not None
    assert client.parent.span_id == server.context.span_id
    assert client.attributes is not None
    assert client.attributes["network.transport"] == "pipe"
    (sent,) = carried
    assert sent is not None
    assert sent["traceparent"] == f"00-{TRACE_ID}-{format(client.context.span_id, '016x')}-01"


def test_the_approval_wait_is_an_event_of_the_span(spans: InMemorySpanExporter) -> None:
    async def run() -> str:
        tracing.approval_waited("ab12", "approved", 3.21456, 30.0)
        return "ran"

    anyio.run(lambda: tracing.serving("mystery_tool", run, meta=None, transport="tcp"))
    (span,) = spans.get_finished_spans()
    (event,) = span.events
    assert event.name == "zerto.approval.wait"
    assert dict(event.attributes or {}) == {
        "zerto.approval.id": "ab12",
        "zerto.approval.state": "approved",
        "zerto.approval.waited_s": 3.215,
        "zerto.approval.wait_bound_s": 30.0,
    }


def test_the_guard_service_takes_the_bodys_meta_before_the_http_headers() -> None:
    from starlette.requests import Request

    from zerto_rewind.gateway.decide import _trace_meta

    other = f"00-{'1' * 32}-{'2' * 16}-01"
    scope = {"type": "http", "headers": [(b"traceparent", other.encode())]}
    request = Request(scope)
    in_body = {"tool_name": "t", "_meta": {"traceparent": TRACEPARENT}}
    assert _trace_meta(in_body, request) == {"traceparent": TRACEPARENT}
    assert _trace_meta({"tool_name": "t"}, request) == {"traceparent": other}
    assert _trace_meta({"tool_name": "t"}, Request({"type": "http", "headers": []})) == {}


def test_a_caller_that_does_not_sample_gets_no_span_and_its_flag_forwarded(
    spans: InMemorySpanExporter,
) -> None:
    upstream = SimpleNamespace(transport="pipe")
    carried: list[dict[str, str] | None] = []

    async def run() -> dict[str, Any]:
        tracing.decided(CONFIRMED, "approved")
        tracing.approval_waited("ab12", "approved", 1.0, 30.0)
        with tracing.forwarding("power_off_vm", upstream) as meta:  # type: ignore[arg-type]
            carried.append(meta)
        record: dict[str, Any] = {}
        tracing.stamp(record)
        return record

    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-00"}
    record = anyio.run(lambda: tracing.serving("power_off_vm", run, meta=meta, transport="tcp"))
    assert spans.get_finished_spans() == ()
    (sent,) = carried
    assert sent is not None
    assert sent["traceparent"].startswith(f"00-{TRACE_ID}-")
    assert sent["traceparent"].endswith("-00")
    assert record == {"trace_id": TRACE_ID}  # the log line still finds the caller's trace
