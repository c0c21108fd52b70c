"""The gateway's own OTLP/protobuf encoding (gateway/otlp_wire.py) against the SDK's.

What the gateway sends must decode to exactly what the SDK's encoder would have
sent for the same spans; the spans here are the ones the tracing hooks make.
"""

from __future__ import annotations

import contextlib
import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link

from zerto_rewind.core.decision import Decision, Outcome, Row, VpgOutcome
from zerto_rewind.gateway import otlp_wire, tracing

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

DECISION = Decision(
    Row.CONFIRMED,
    Outcome.CONTEXT,
    "mcp__vsphere__power_off_vm",
    vms=("jp-ubuntu", ""),
    vpgs=[VpgOutcome("vpg-1", "hq-app", ("jp-ubuntu",), checkpoint_id="cp-7",
                     requested_at=100.0, landed_at=104.25)],
)  # fmt: skip


def collecting(resource: Resource | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource or Resource.create({"n": 3}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider, exporter = collecting()
    tracing.install(provider)
    yield exporter
    tracing.shutdown()


def traced_calls(n: int) -> None:
    """``n`` calls through the hooks: a parent in ``_meta`` or not, a refusal, the
    approval event, the forwarded call's CLIENT span, an exception."""
    upstream = SimpleNamespace(transport="pipe")

    async def run(i: int) -> Any:
        tracing.decided(DECISION, "approved" if i % 2 else None)
        tracing.approval_waited(f"req-{i}", "approved", 1.5 + i, 60.0)
        with tracing.forwarding("power_off_vm", upstream) as meta:  # type: ignore[arg-type]
            assert meta is not None
        if i % 3 == 0:
            raise ValueError("an argument")
        return SimpleNamespace(is_error=i % 2 == 0)

    async def main() -> None:
        for i in range(n):
            meta = {"traceparent": TRACEPARENT, "tracestate": "zr=1,k=v"} if i % 2 else None
            with contextlib.suppress(ValueError):
                await tracing.serving("power_off_vm", lambda i=i: run(i), meta=meta,  # type: ignore[misc]
                                      transport="tcp", request_id=-i, session_id="s-1")  # fmt: skip

    anyio.run(main)


def decoded(data: bytes) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(data)


def sdk_bytes(batch: list[ReadableSpan]) -> bytes:
    return encode_spans(batch).SerializePartialToString()


def test_the_hooks_spans_decode_as_the_sdk_encodes_them(spans: InMemorySpanExporter) -> None:
    traced_calls(12)
    batch = list(spans.get_finished_spans())
    assert len(batch) == 24
    ours = decoded(otlp_wire.encode(batch))
    assert ours == decoded(sdk_bytes(batch))
    (resource_spans,) = ours.resource_spans
    assert len(resource_spans.scope_spans[0].spans) == 24
    # the cache of repeated pairs changes nothing on a second encoding
    assert decoded(otlp_wire.encode(batch)) == ours


def test_spans_of_two_resources_and_scopes_group_as_the_sdks() -> None:
    batch: list[ReadableSpan] = []
    for service in ("a", "b"):
        provider, exporter = collecting(Resource({"service.name": service}, "https://s/1"))
        for scope in ("one", "two"):
            tracer = provider.get_tracer(scope, "1.0", schema_url="https://s/2")
            with tracer.start_as_current_span("x", attributes={"f": 0.5, "t": True, "e": ""}):
                pass
        batch += exporter.get_finished_spans()
    batch.append(batch.pop(0))  # interleaved: a, b, b, a
    assert decoded(otlp_wire.encode(batch)) == decoded(sdk_bytes(batch))


def test_what_the_gateway_never_makes_goes_to_the_sdks_encoder() -> None:
    provider, exporter = collecting()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first") as first:
        pass
    with tracer.start_as_current_span("linked", links=[Link(first.get_span_context())]):
        pass
    batch = list(exporter.get_finished_spans())
    assert otlp_wire.encode(batch) == sdk_bytes(batch)


def test_the_exporter_posts_the_encoding_as_the_otel_variables_say(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[bytes] = []
    headers: list[dict[str, str]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            headers.append(dict(self.headers))
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/t")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=ops")
        exporter = otlp_wire.FastOTLPSpanExporter()

        def sdk_encoder(batch: Any) -> Any:
            raise AssertionError("the SDK's encoder ran")

        # the SDK's export path would fail: the bytes that arrive are ours
        monkeypatch.setattr(f"{otlp_wire.OTLPSpanExporter.__module__}.encode_spans", sdk_encoder)
        traced_calls(3)
        batch = list(spans.get_finished_spans())
        assert exporter.export(batch) is SpanExportResult.SUCCESS
        exporter.shutdown()
    finally:
        server.shutdown()
        server.server_close()
    (body,) = received
    (sent,) = headers
    assert (sent["Content-Encoding"], sent["x-team"]) == ("gzip", "ops")
    assert decoded(gzip.decompress(body)) == decoded(sdk_bytes(batch))
