"""The gateway's spans in OTLP/protobuf, written straight to the wire format.

The SDK's encoder builds a protobuf object per span, attribute and value: about
25 µs a span, as much CPU as making the span, and the larger part of what a
traced call costs. The gateway's spans have a small, fixed shape (string, number
and string-list attributes, one event at most, no link), so their bytes are
written directly, and the attributes every call repeats (``tools/call``, the
transport, the tool) are encoded once. A batch holding anything outside that
shape (a link, a map or bytes value) goes to the SDK's encoder whole: the bytes
sent always decode to what the SDK would have sent
(tests/unit/gateway/test_otlp_wire.py compares the two).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Event, ReadableSpan

__all__ = ["FastOTLPSpanExporter", "encode"]

# The SDK's span flags: "whether the parent is remote" is known (0x100), and it is (0x200).
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_CACHE_LIMIT = 4096
_MAX_REQUEST_SIZE = 64 * 1024 * 1024  # the SDK's default, past which it drops a batch

_pack_double = struct.Struct("<d").pack
_pack_fixed64 = struct.Struct("<Q").pack
_pack_fixed32 = struct.Struct("<I").pack
_SMALL = [bytes((n,)) for n in range(0x80)]
_pairs: dict[tuple[bytes, str, type, object], bytes] = {}


class _Unencodable(Exception):
    """A value outside the gateway's span shape: the SDK's encoder takes the batch."""


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    return tag + _varint(len(payload)) + payload


def _any_value(value: object) -> bytes:
    """An ``AnyValue``'s payload (its oneof is set even for "" or 0, as the SDK sets it)."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return _field(b"\x0a", value.encode())
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)  # int64: two's complement
    if isinstance(value, float):
        return b"\x21" + _pack_double(value)
    if value is None:
        return b""
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _any_value(v)) for v in value))
    raise _Unencodable(type(value).__name__)


def _key_value(tag: bytes, key: str, value: object) -> bytes:
    """A ``KeyValue`` field; the scalar pairs every call repeats come from a bounded cache."""
    if isinstance(value, (str, int, float)):
        cache_key = (tag, key, type(value), value)
        cached = _pairs.get(cache_key)
        if cached is None:
            if len(_pairs) >= _CACHE_LIMIT:
                _pairs.clear()
            cached = _pairs[cache_key] = _field(tag, _encode_pair(key, value))
        return cached
    return _field(tag, _encode_pair(key, value))


def _encode_pair(key: str, value: object) -> bytes:
    return (_field(b"\x0a", key.encode()) if key else b"") + _field(b"\x12", _any_value(value))


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    return b"".join([_key_value(tag, k, v) for k, v in attributes.items()])


def _count(tag: bytes, n: int) -> bytes:
    return tag + _varint(n) if n else b""


def _event(event: Event) -> bytes:
    return (
        b"\x09"
        + _pack_fixed64(event.timestamp)
        + (_field(b"\x12", event.name.encode()) if event.name else b"")
        + _attributes(b"\x1a", event.attributes)
        + _count(b"\x20", event.dropped_attributes)
    )


def _span(span: ReadableSpan) -> bytes:
    if span.links:
        raise _Unencodable(span.name)
    context = span.context
    parent = span.parent
    trace_state = ",".join(f"{k}={v}" for k, v in context.trace_state.items())
    status = span.status
    description = status.description
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0)
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big"),
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),
        _field(b"\x1a", trace_state.encode()) if trace_state else b"",
        b"\x22\x08" + parent.span_id.to_bytes(8, "big") if parent is not None else b"",
        _field(b"\x2a", span.name.encode()) if span.name else b"",
        b"\x30" + _varint(span.kind.value + 1),  # the proto's enum counts from UNSPECIFIED
        b"\x39" + _pack_fixed64(span.start_time or 0),
        b"\x41" + _pack_fixed64(span.end_time or 0),
        _attributes(b"\x4a", span.attributes),
        _count(b"\x50", span.dropped_attributes),
        b"".join(_field(b"\x5a", _event(e)) for e in span.events),
        _count(b"\x60", span.dropped_events),
        _count(b"\x70", span.dropped_links),
        _field(
            b"\x7a",
            (_field(b"\x12", description.encode()) if description else b"")
            + _count(b"\x18", status.status_code.value),
        ),
        b"\x85\x01" + _pack_fixed32(flags),
    ]
    return b"".join(parts)


def _scope_spans(span: ReadableSpan, spans: list[bytes]) -> bytes:
    scope = span.instrumentation_scope
    encoded = b""
    schema_url = ""
    if scope is not None:
        schema_url = scope.schema_url or ""
        encoded = (
            (_field(b"\x0a", scope.name.encode()) if scope.name else b"")
            + (_field(b"\x12", scope.version.encode()) if scope.version else b"")
            + _attributes(b"\x1a", scope.attributes)
        )
    return (
        _field(b"\x0a", encoded)
        + b"".join(_field(b"\x12", s) for s in spans)
        + (_field(b"\x1a", schema_url.encode()) if schema_url else b"")
    )


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest`` holding ``spans``, serialized.

    Grouped by resource, then instrumentation scope, in order of first appearance,
    as the SDK groups them.
    """
    try:
        return _encode(spans)
    except _Unencodable:
        data: bytes = encode_spans(spans).SerializePartialToString()
        return data


def _encode(spans: Sequence[ReadableSpan]) -> bytes:
    groups: dict[int, tuple[ReadableSpan, dict[int, tuple[ReadableSpan, list[bytes]]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = groups.setdefault(id(resource), (span, {}))
        scopes.setdefault(id(span.instrumentation_scope), (span, []))[1].append(_span(span))
    out = []
    for first, scopes in groups.values():
        resource = first.resource
        body = _field(b"\x0a", _attributes(b"\x0a", resource.attributes)) + b"".join(
            _field(b"\x12", _scope_spans(s, encoded)) for s, encoded in scopes.values()
        )
        if resource.schema_url:
            body += _field(b"\x1a", resource.schema_url.encode())
        out.append(_field(b"\x0a", body))
    return b"".join(out)


class FastOTLPSpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (every ``OTEL_EXPORTER_OTLP_*`` setting as it reads
    them), with :func:`encode` in place of its encoder.

    Where this SDK's exporter is not shaped as expected (its HTTP client), or its own
    metrics are asked for, its whole ``export`` runs unchanged.
    """

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        client = getattr(self, "_client", None)
        if (
            client is None
            or getattr(self, "_shutdown", True)
            or os.environ.get("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "").strip().lower()
            == "true"
        ):
            return super().export(spans)
        data = encode(spans)
        limit = getattr(self, "_max_request_size", _MAX_REQUEST_SIZE)
        if 0 < limit < len(data):
            return super().export(spans)  # the SDK drops it, with its warning
        result = client.export(data)
        return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE
