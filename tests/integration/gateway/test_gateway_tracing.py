"""Traces from the real gateway process, through the real OTLP/HTTP exporter, decoded.

The gateway runs with only the standard ``OTEL_*`` variables pointing at a receiver on
loopback (tests/support/otlp_receiver.py) that parses each ``ExportTraceServiceRequest``
with ``opentelemetry-proto``. A real SDK client calls a confirmed tool with a W3C trace
context in ``params._meta`` and an unlisted one that waits for an approver; a hook's
``POST /v1/decide`` carries a ``traceparent`` header. The upstream (traced_server.py)
records the ``_meta`` each forwarded call carried.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from integration.gateway.gateway_helpers import (
    CALLER_SPAN,
    CALLER_TRACE,
    TOKENS,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
    traced_upstream,
)
from support.otlp_receiver import ReceivedSpan, otlp_receiver
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

HOOK_TRACE = "0af7651916cd43dd8448eb211c80319c"
HOOK_SPAN = "b7ad6b7169203331"


def by_name(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


async def test_spans_parents_events_and_the_log_line_through_otlp(
    box: Sandbox, tmp_path: Path
) -> None:
    record = tmp_path / "traced.jsonl"
    sock = tmp_path / "approvals.sock"
    gateway_config(
        box,
        upstream=traced_upstream(record),
        approvals={"approvers": {"users": ["root"]}, "wait_s": 1},
    )
    with otlp_receiver() as receiver:
        env = box.env(
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_SERVICE_NAME="zr-gateway-under-test",
            OTEL_BSP_SCHEDULE_DELAY="100",
        )
        with gateway_process(
            box, tmp_path, extra_args=("--approvals-socket", str(sock)), env=env
        ) as gw:
            async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
                meta = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "zr=1"}
                ran = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"}, meta=meta)  # type: ignore[arg-type]
                assert not ran.is_error, text_of(ran)
                waited = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
                assert waited.is_error, text_of(waited)
            async with httpx.AsyncClient(timeout=30) as http:
                answer = await http.post(
                    f"{gw.url}/v1/decide",
                    headers={
                        "Authorization": f"Bearer {TOKENS['agent-a']}",
                        "traceparent": f"00-{HOOK_TRACE}-{HOOK_SPAN}-01",
                    },
                    json={"tool_name": "mcp__vsphere__power_off_vm", "tool_input": {"name": "x"}},
                )
                assert answer.status_code == 200, answer.text
            servers = receiver.wait_for(3, kind="server")
            clients = receiver.wait_for(1, kind="client")
    assert len(servers) == 3, [s.name for s in servers]

    # The confirmed call: a SERVER span under the caller's context, with the guard's facts.
    call = by_name(servers, "tools/call power_off_vm")
    assert (call.trace_id, call.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert call.resource["service.name"] == "zr-gateway-under-test"
    attrs = call.attributes
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "power_off_vm"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["network.transport"] == "tcp"
    assert attrs["jsonrpc.request.id"]
    assert attrs["mcp.protocol.version"]
    assert (attrs["zerto.decision"], attrs["zerto.row"]) == ("context", "confirmed")
    assert attrs["zerto.vm"] == ["jp-ubuntu"]
    assert attrs["zerto.vpg"]
    assert attrs["zerto.checkpoint_id"]
    assert attrs["zerto.landing_delay_s"] >= 0
    assert "error.type" not in attrs

    # The forwarded call: a CLIENT span under it, whose context the upstream received.
    (forwarded,) = [s for s in clients if s.trace_id == CALLER_TRACE]
    assert forwarded.parent_span_id == call.span_id
    assert forwarded.attributes["network.transport"] == "pipe"
    reached = [json.loads(line) for line in record.read_text().splitlines()]
    (power_off,) = [r for r in reached if r["tool"] == "power_off_vm"]
    assert power_off["meta"]["traceparent"] == f"00-{CALLER_TRACE}-{forwarded.span_id}-01"
    assert "mystery_tool" not in [r["tool"] for r in reached]

    # The unlisted call: refused after the approval wait, which is an event of its span.
    mystery = by_name(servers, "tools/call mystery_tool")
    assert mystery.parent_span_id == ""  # no context sent: a trace of its own
    assert mystery.attributes["error.type"] == "tool_error"
    assert mystery.attributes["zerto.row"] == "unlisted"
    assert mystery.attributes["zerto.answer"] == "waiting"
    ((event, facts),) = mystery.events
    assert event == "zerto.approval.wait"
    assert facts["zerto.approval.state"] == "pending"
    assert facts["zerto.approval.waited_s"] >= 0.9

    # The guard service's decision for a hook: its parent is the traceparent header.
    hook = by_name(servers, "tools/call mcp__vsphere__power_off_vm")
    assert (hook.trace_id, hook.parent_span_id) == (HOOK_TRACE, HOOK_SPAN)
    assert hook.attributes["zerto.row"] == "vm_unknown"
    assert hook.attributes["network.transport"] == "tcp"

    # Each decision's log line names its trace.
    by_origin = {
        (line["tool"], line["origin"]): line["trace_id"]
        for line in decisions(box)
        if "trace_id" in line
    }
    assert by_origin[("mcp__vsphere__power_off_vm", "gateway")] == CALLER_TRACE
    assert by_origin[("mcp__vsphere__power_off_vm", "service")] == HOOK_TRACE
    assert by_origin[("mcp__vsphere__mystery_tool", "gateway")] == mystery.trace_id


async def test_a_stdio_gateway_traces_its_calls_as_a_pipe(box: Sandbox, tmp_path: Path) -> None:
    record = tmp_path / "traced.jsonl"
    gateway_config(box, upstream=traced_upstream(record))
    with otlp_receiver() as receiver:
        env = box.env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="100")
        args = ["-m", "zerto_rewind", "gateway", "--stdio", "--upstream", "vsphere"]
        args.append("--allow-privileged-upstream")  # the stand-in runs as the tests' user
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        async with Client(params, cache=None) as c:
            meta = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
            listed = await c.call_tool("list_vms", {}, meta=meta)  # type: ignore[arg-type]
            assert not listed.is_error, text_of(listed)
        # The host closed the pipe: the gateway flushed its spans before it exited.
        (served,) = receiver.wait_for(1, kind="server")
    assert served.name == "tools/call list_vms"
    assert served.resource["service.name"] == "zerto-rewind-gateway"
    assert (served.trace_id, served.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert served.attributes["network.transport"] == "pipe"
    assert (served.attributes["zerto.row"], served.attributes["zerto.decision"]) == (
        "read_only",
        "none",
    )
    (reached,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert reached["meta"]["traceparent"].startswith(f"00-{CALLER_TRACE}-")
