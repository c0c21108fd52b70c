"""The read-only fast lane through the real gateway, with the SDK's own client, in both eras.

A read-only call is answered by the fast lane (``zerto_rewind_fast_lane_calls``
counts it) and writes no log line; a mutating call takes the full path (a
checkpoint, a log line, the counter unchanged); a tool whose pin no longer
matches is refused and never runs, though the catalog's glob calls it read-only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    CALLER_SPAN,
    CALLER_TRACE,
    METRICS_HEADERS,
    TOKENS,
    actions,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
    traced_upstream,
)
from integration.gateway.gateway_helpers import configure_rug_pull as _configure
from integration.gateway.gateway_helpers import ran_tools as _ran
from integration.gateway.gateway_helpers import scan_rug_pull as _scan
from integration.gateway.gateway_helpers import wait_metric as _wait_metric
from support.otlp_receiver import otlp_receiver
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

LANE = "zerto_rewind_fast_lane_calls_total"


def _metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics", headers=METRICS_HEADERS, timeout=10).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25 sessions (SSE), 2026-07-28
async def test_read_only_takes_the_fast_lane_and_mutating_the_full_path(
    box: Sandbox, tmp_path: Path, actions_log: Path, mode: str
) -> None:
    gateway_config(box, actions_log)  # on by default
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"], mode=mode) as c:
            await c.list_tools()
            got = await c.call_tool("get_vm", {"name": "jp-ubuntu"})
            assert not got.is_error, text_of(got)
            assert "jp-ubuntu" in text_of(got)
            assert _metric(gw.url, LANE, upstream="vsphere") == 1
            listed = await c.call_tool("list_vms", {})
            assert not listed.is_error, text_of(listed)
            assert _metric(gw.url, LANE, upstream="vsphere") == 2
            off = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
            assert not off.is_error, text_of(off)
            assert (off.meta or {})["zerto-rewind/checkpoints"][0]["vpg"] == "jp-local"
        assert _metric(gw.url, LANE, upstream="vsphere") == 2
        # Counted as the full path counts a read-only call: a decision and a forward.
        assert _metric(gw.url, "zerto_rewind_decisions_total", row="read_only", outcome="none") == 2
        forwarded = _metric(gw.url, "zerto_rewind_forwarded_calls_total", upstream="vsphere",
                            row="read_only")  # fmt: skip
        assert forwarded == 2
    assert [a["tool"] for a in actions(actions_log)] == ["power_off_vm"]  # it records changes
    # Read-only calls leave no log line, fast lane or not; the mutating one does.
    assert [(d["tool"], d["row"]) for d in decisions(box)] == [
        ("mcp__vsphere__power_off_vm", "confirmed")
    ]


async def test_switched_off_every_call_takes_the_full_path(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    gateway_config(box, actions_log, gateway={"fast_lane": False})
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            got = await c.call_tool("get_vm", {"name": "jp-ubuntu"})
            again = await c.call_tool("get_vm", {"name": "jp-ubuntu"})
        assert not got.is_error, text_of(got)
        assert not again.is_error, text_of(again)
        assert _metric(gw.url, "zerto_rewind_decisions_total", row="read_only", outcome="none") == 2
        assert _metric(gw.url, LANE, upstream="vsphere") == 0


async def test_an_unlisted_or_host_path_call_is_not_taken(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """An unlisted tool prompts (no approver: refused) on the full path, and a read-only
    pattern that a host path turns mutating is not answered read-only either."""
    gateway_config(box, actions_log, gateway={"fast_lane": True})
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            mystery = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
        assert mystery.is_error
        assert _metric(gw.url, LANE, upstream="vsphere") == 0
    assert actions(actions_log) == []
    assert [d["row"] for d in decisions(box)] == ["unlisted"]


async def test_a_tool_changed_after_review_is_refused_not_fast_laned(
    box: Sandbox, tmp_path: Path
) -> None:
    """``list_and_delete_vms`` matches the read-only glob ``list_*`` but is not pinned: the fast
    lane leaves it to the full path, which refuses it; ``list_vms`` still takes the lane."""
    actions_log = tmp_path / "actions.jsonl"
    pins = _scan(actions_log)["catalog"]["pins"]
    actions_log.unlink(missing_ok=True)
    _configure(box, actions_log, pins, gateway={"fast_lane": True})
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            listed = await c.call_tool("list_vms", {})
            assert not listed.is_error, text_of(listed)
            assert _metric(gw.url, LANE, upstream="vsphere") == 1
            upgraded = await c.call_tool("upgrade", {})
            assert not upgraded.is_error, text_of(upgraded)
            _wait_metric(gw.url, "zerto_rewind_unreviewed_tools", 2, upstream="vsphere")
            pulled = await c.call_tool("list_and_delete_vms", {"name": "jp-ubuntu"})
            again = await c.call_tool("list_vms", {})
        assert pulled.is_error
        assert "it is new" in text_of(pulled)
        assert not again.is_error, text_of(again)
        assert _metric(gw.url, LANE, upstream="vsphere") == 3  # list_vms, upgrade, list_vms
    assert "list_and_delete_vms" not in _ran(actions_log)
    assert [d["row"] for d in decisions(box)] == ["unlisted"]


async def test_a_body_with_a_duplicated_key_is_not_taken(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """A 2026-07-28 call whose params name the tool twice: the fast lane declines it, so
    the full path decides it on its own single parse (the last name: power_off_vm)."""
    gateway_config(box, actions_log, gateway={"fast_lane": True})
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()  # the upstream is up and listed
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        args = json.dumps({"name": "jp-ubuntu"})
        body = (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_vm",'
            f'"name":"power_off_vm","arguments":{args},"_meta":{json.dumps(meta)}}}}}'
        )
        headers = _modern_headers("power_off_vm")
        answer = httpx.post(gw.endpoint(), content=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        assert _metric(gw.url, LANE, upstream="vsphere") == 0
    assert [(d["tool"], d["row"]) for d in decisions(box)] == [
        ("mcp__vsphere__power_off_vm", "confirmed")
    ]


def _modern_headers(tool: str) -> dict[str, Any]:
    return {
        "Authorization": f"Bearer {TOKENS['agent-a']}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }


async def test_only_the_sessions_owner_gets_an_answer(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """A 2025-11-25 session opened by agent-a: agent-b's token, or an id the SDK does not
    hold, gets 404 and reaches no upstream; agent-a's own call is answered by the lane."""
    gateway_config(box, actions_log, gateway={"fast_lane": True})
    with gateway_process(box, tmp_path) as gw:
        url = gw.endpoint()
        opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
        opened = httpx.post(url, json=opening, headers=_legacy_headers("agent-a"), timeout=30)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = _legacy_headers("agent-a", session)
        assert httpx.post(url, json=ready, headers=headers, timeout=30).status_code == 202
        get_vm = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "get_vm", "arguments": {"name": "jp-ubuntu"}}}  # fmt: skip
        theirs = httpx.post(url, json=get_vm, headers=_legacy_headers("agent-b", session),
                            timeout=30)  # fmt: skip
        unknown = httpx.post(url, json=get_vm, headers=_legacy_headers("agent-a", "0" * 32),
                             timeout=30)  # fmt: skip
        assert (theirs.status_code, unknown.status_code) == (404, 404)
        # A page that rebinds its own name to the gateway: refused as on the full path.
        rebound = httpx.post(url, json=get_vm, timeout=30,
                             headers={**headers, "Host": "evil.example:80"})  # fmt: skip
        assert rebound.status_code == 421, rebound.text
        foreign = httpx.post(url, json=get_vm, timeout=30,
                             headers={**headers, "Origin": "https://evil.example"})  # fmt: skip
        assert foreign.status_code == 403, foreign.text
        assert _metric(gw.url, LANE, upstream="vsphere") == 0
        mine = httpx.post(url, json=get_vm, headers=headers, timeout=30)
        assert mine.status_code == 200, mine.text
        # JSON, which the client must accept: read to its end, the connection is kept
        assert mine.headers["content-type"] == "application/json"
        assert mine.headers["mcp-session-id"] == session
        event = mine.json()
        assert event["id"] == 2
        assert "jp-ubuntu" in event["result"]["content"][0]["text"]
        assert _metric(gw.url, LANE, upstream="vsphere") == 1


def _legacy_headers(client_name: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {TOKENS[client_name]}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


async def test_a_traced_read_only_call_has_the_full_paths_spans(
    box: Sandbox, tmp_path: Path
) -> None:
    """Traces on: the fast lane answers, with the SERVER span under the caller's context,
    the guard's facts on it, and a CLIENT span whose context the upstream received."""
    record = tmp_path / "traced.jsonl"
    gateway_config(box, upstream=traced_upstream(record), gateway={"fast_lane": True})
    with otlp_receiver() as receiver:
        env = box.env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="100")
        with gateway_process(box, tmp_path, env=env) as gw:
            async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
                meta = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
                listed = await c.call_tool("list_vms", {}, meta=meta)  # type: ignore[arg-type]
                assert not listed.is_error, text_of(listed)
            assert _metric(gw.url, LANE, upstream="vsphere") == 1
            (served,) = receiver.wait_for(1, kind="server")
            (forwarded,) = receiver.wait_for(1, kind="client")
    assert served.name == "tools/call list_vms"
    assert (served.trace_id, served.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    attrs = served.attributes
    assert (attrs["zerto.row"], attrs["zerto.decision"]) == ("read_only", "none")
    assert attrs["network.transport"] == "tcp"
    assert attrs["mcp.protocol.version"] == "2026-07-28"
    assert "error.type" not in attrs
    assert forwarded.parent_span_id == served.span_id
    (reached,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert reached["meta"]["traceparent"] == f"00-{CALLER_TRACE}-{forwarded.span_id}-01"
