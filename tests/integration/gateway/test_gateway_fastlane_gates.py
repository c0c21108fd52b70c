"""Every gate of the full path still refuses a read-only call the fast lane would answer.

One gateway with the lane on (the default). Each request is a read-only ``get_vm`` call
the lane would take, with one thing wrong: the token, the body's size (the listener's
bound, then the token's caps), the Host or Origin, the Content-Type, the Accept, the
protocol version, a routing header that does not match the body. Each gets the refusal
the full path gives (the same request to a gateway with the lane off), and none reaches
the upstream: neither the lane's counter nor the forwarded calls move. The session owner,
a duplicated key, pins and the classification are in test_gateway_fastlane.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.gateway.gateway_helpers import TOKENS, gateway_config, gateway_process
from integration.gateway.test_gateway_fastlane import LANE, _metric
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

MAX_BODY = 4096
PER_TOKEN_BYTES = 2048
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


def _body(pad: int = 0) -> bytes:
    arguments: dict[str, Any] = {"name": "jp-ubuntu"}
    if pad:
        arguments["pad"] = "x" * pad
    params = {"name": "get_vm", "arguments": arguments, "_meta": META}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(message).encode()


def _headers(**changed: str | None) -> dict[str, str]:
    headers: dict[str, str | None] = {
        "Authorization": f"Bearer {TOKENS['agent-a']}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_vm",
    }
    headers.update(changed)
    return {k: v for k, v in headers.items() if v is not None}


# what is wrong -> (the headers, the body); each refused before any upstream
WRONG: dict[str, tuple[dict[str, str], bytes]] = {
    "no token": (_headers(Authorization=None), _body()),
    "an unknown token": (_headers(Authorization="Bearer not-a-client-token"), _body()),
    "a body over gateway.max_body_bytes": (_headers(), _body(MAX_BODY)),
    "a body over the token's argument bytes": (_headers(), _body(PER_TOKEN_BYTES + 100)),
    "a rebound Host": (_headers(Host="evil.example:80"), _body()),
    "a foreign Origin": (_headers(Origin="https://evil.example"), _body()),
    "a Content-Type other than JSON": (_headers(**{"Content-Type": "text/plain"}), _body()),
    "an Accept without SSE": (_headers(Accept="application/json"), _body()),
    "an unknown protocol version": (_headers(**{"MCP-Protocol-Version": "1999-01-01"}), _body()),
    "an Mcp-Name naming another tool": (_headers(**{"Mcp-Name": "power_off_vm"}), _body()),
    "an Mcp-Method header given twice": (_headers(), _body()),  # duplicated below
}


def _send(url: str, what: str) -> httpx.Response:
    headers, body = WRONG[what]
    pairs = list(headers.items())
    if what == "an Mcp-Method header given twice":
        pairs.append(("Mcp-Method", "tools/call"))
    return httpx.post(url, content=body, headers=pairs, timeout=30)


def _statuses(box: Sandbox, tmp_path: Path, *, fast_lane: bool) -> dict[str, int]:
    tmp_path.mkdir()
    gateway_config(
        box,
        tmp_path / "actions.jsonl",
        gateway={
            "fast_lane": fast_lane,
            "max_body_bytes": MAX_BODY,
            "limits": {"argument_bytes_per_token": PER_TOKEN_BYTES},
        },
    )
    with gateway_process(box, tmp_path) as gw:
        url = gw.endpoint()
        for _ in range(2):  # the first on the full path: its era seen, the lane is open
            ready = httpx.post(url, content=_body(), headers=_headers(), timeout=30)
            assert ready.status_code == 200, ready.text
        before = (_metric(gw.url, LANE, upstream="vsphere"), _forwarded(gw.url))
        got = {what: _send(url, what).status_code for what in WRONG}
        assert (_metric(gw.url, LANE, upstream="vsphere"), _forwarded(gw.url)) == before, got
        if fast_lane:
            assert before[0] == 1  # the one good call took the lane
    return got


def _forwarded(url: str) -> float:
    return _metric(url, "zerto_rewind_forwarded_calls_total", upstream="vsphere", row="read_only")


async def test_each_gate_refuses_on_the_lane_as_on_the_full_path(
    box: Sandbox, tmp_path: Path
) -> None:
    on = _statuses(box, tmp_path / "on", fast_lane=True)
    off = _statuses(box, tmp_path / "off", fast_lane=False)
    assert on == off
    assert all(400 <= status < 500 for status in on.values()), on
    assert on["no token"] == on["an unknown token"] == 401
    assert on["a body over gateway.max_body_bytes"] == 413
    assert on["a body over the token's argument bytes"] == 429
    assert (on["a rebound Host"], on["a foreign Origin"]) == (421, 403)
    assert on["an Accept without SSE"] == 406
