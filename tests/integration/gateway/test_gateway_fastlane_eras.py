"""The fast lane between a client and an upstream of different protocol eras.

mcvsphere serves the handshake only (an SDK from before 2026-07-28): its results carry no
``resultType``. A 2026-07-28 client requires one, so the fast lane answers in the
client's era, as the SDK's server does on the full path: ``resultType`` added (and the
gateway's ``serverInfo`` stamp) for a 2026-07-28 client, ``resultType`` dropped for a
2025-11-25 one. The deployment guide's end-to-end run found it with its first read-only
call; here the same shape runs with the legacy stand-in (legacy_server.py), with an
approval answered and retried while read-only calls run beside it on the lane.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    actions,
    approvals_cli,
    client,
    gateway_config,
    gateway_process,
    legacy_upstream,
    text_of,
)
from integration.gateway.test_gateway_fastlane import (
    LANE,
    _legacy_headers,
    _metric,
    _modern_headers,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

SERVER_INFO = "io.modelcontextprotocol/serverInfo"


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25 sessions, 2026-07-28
async def test_a_handshake_era_upstream_is_answered_in_the_clients_era(
    box: Sandbox, tmp_path: Path, mode: str
) -> None:
    gateway_config(box, upstream=legacy_upstream(box, tmp_path / "actions.jsonl"),
                   gateway={"fast_lane": True})  # fmt: skip
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"], mode=mode) as c:
            first = await c.call_tool("list_vms", {})
            listed = await c.call_tool("list_vms", {})
            got = await c.call_tool("get_vm", {"name": "jp-ubuntu"})
        assert not first.is_error, text_of(first)
        assert not listed.is_error, text_of(listed)
        assert not got.is_error, text_of(got)
        assert "jp-ubuntu" in text_of(got)
        assert _metric(gw.url, LANE, upstream="vsphere") >= 2


async def test_the_lane_shapes_a_modern_answer_as_the_full_path_does(
    box: Sandbox, tmp_path: Path
) -> None:
    """On the wire, from a handshake-era upstream: ``resultType`` and the gateway's
    ``serverInfo`` stamp for a 2026-07-28 call, the same bytes' worth as the full path's."""
    gateway_config(box, upstream=legacy_upstream(box, tmp_path / "actions.jsonl"),
                   gateway={"fast_lane": True})  # fmt: skip
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.call_tool("list_vms", {})  # the upstream is up and its era seen
        before = _metric(gw.url, LANE, upstream="vsphere")
        full = _modern_call(gw.endpoint(), "get_vm", {"name": "jp-ubuntu"}, request_id=1)
        assert _metric(gw.url, LANE, upstream="vsphere") == before + 1
        # a key the lane does not read (an empty inputResponses): the full path answers
        fields = {"inputResponses": {}}
        slow = _modern_call(gw.endpoint(), "get_vm", {"name": "jp-ubuntu"}, 2, **fields)
        assert _metric(gw.url, LANE, upstream="vsphere") == before + 1
    assert full["resultType"] == "complete"
    assert slow["resultType"] == "complete"
    assert full["_meta"][SERVER_INFO]["name"] == slow["_meta"][SERVER_INFO]["name"]
    assert full["content"] == slow["content"]


async def test_a_handshake_era_client_gets_no_result_type(box: Sandbox, tmp_path: Path) -> None:
    """The plain stand-in (SDK 2.x) speaks 2026-07-28 upstream and stamps ``resultType``;
    a 2025-11-25 session's answer leaves it out, as the SDK's server does for that era."""
    gateway_config(box, tmp_path / "actions.jsonl", gateway={"fast_lane": True})
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.call_tool("list_vms", {})
        url = gw.endpoint()
        opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
        opened = httpx.post(url, json=opening, headers=_legacy_headers("agent-a"), timeout=30)
        headers = _legacy_headers("agent-a", opened.headers["mcp-session-id"])
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert httpx.post(url, json=ready, headers=headers, timeout=30).status_code == 202
        get_vm = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "get_vm", "arguments": {"name": "jp-ubuntu"}}}  # fmt: skip
        answer = httpx.post(url, json=get_vm, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        assert _metric(gw.url, LANE, upstream="vsphere") == 2
    result = answer.json()["result"]
    assert "jp-ubuntu" in result["content"][0]["text"]
    assert "resultType" not in result


async def test_an_approved_retry_beside_read_only_calls_on_the_lane(
    box: Sandbox, tmp_path: Path
) -> None:
    """The deployment guide's shape: a handshake-era upstream, 2026-07-28 clients. One call
    waits for an approver and is retried with its requestState once approved, while other
    sessions' read-only calls run on the lane the whole time; every answer is whole."""
    actions_log = tmp_path / "actions.jsonl"
    sock = str(tmp_path / "approvals.sock")
    gateway_config(
        box,
        upstream=legacy_upstream(box, actions_log),
        gateway={"fast_lane": True},
        approvals={"approvers": {"users": ["root"]}, "wait_s": 30},
    )
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", sock)) as gw:
        url, token = gw.endpoint(), TOKENS["agent-a"]
        results: list[Any] = []
        reads: list[Any] = []
        async with client(url, token) as c:
            await c.call_tool("list_vms", {})  # the upstream's era seen: the lane is open
        before = _metric(gw.url, LANE, upstream="vsphere")
        async with anyio.create_task_group() as tg:

            async def the_call() -> None:
                async with client(url, token) as c:
                    results.append(await c.call_tool("mystery_tool", {"name": "jp-ubuntu"}))

            async def reader() -> None:
                async with client(url, TOKENS["agent-b"]) as c:
                    while not results:
                        reads.append(await c.call_tool("get_vm", {"name": "jp-ubuntu"}))

            tg.start_soon(the_call)
            for _ in range(3):
                tg.start_soon(reader)
            request_id = await _wait_for_request(sock)
            approved = await anyio.to_thread.run_sync(
                lambda: approvals_cli("--service", f"unix:{sock}", "approve", request_id)
            )
            assert approved.returncode == 0, approved.stderr
        lane_calls = _metric(gw.url, LANE, upstream="vsphere") - before
    (result,) = results
    assert not result.is_error, text_of(result)
    assert [a["tool"] for a in actions(actions_log)] == ["mystery_tool"]
    assert reads
    assert all(not r.is_error and "jp-ubuntu" in text_of(r) for r in reads)
    assert lane_calls == len(reads)


async def _wait_for_request(sock: str) -> str:
    """The id of the one pending approval request, as the approver's CLI lists it."""
    with anyio.fail_after(20):
        while True:
            listed = await anyio.to_thread.run_sync(
                lambda: approvals_cli("--service", f"unix:{sock}", "list", "--json")
            )
            pending = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
            if pending:
                return str(pending[0]["id"])
            await anyio.sleep(0.2)


def _modern_call(
    url: str, tool: str, arguments: dict[str, Any], request_id: int, **fields: Any
) -> dict[str, Any]:
    """One raw 2026-07-28 ``tools/call``; the answer's result."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    params = {"name": tool, "arguments": arguments, "_meta": meta, **fields}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    answer = httpx.post(url, json=body, headers=_modern_headers(tool), timeout=30)
    assert answer.status_code == 200, answer.text
    text = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result: dict[str, Any] = json.loads(text)["result"]
    return result
