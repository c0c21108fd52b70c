"""``POST /v1/result`` over the gateway's TCP listener: the caller is the bearer token.

A token's call decided through ``/v1/decide`` gets its result recorded only when the
same token posts it, once; another token's post is refused (403) and nothing is
written. The gateway is a real process on 127.0.0.1 with the ZVM simulator behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    gateway_config,
    gateway_process,
    results,
)
from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"
CALL = {"session_id": "tcp-results", "tool_use_id": "call-1", "tool_name": POWER_OFF,
        "tool_input": {"name": "jp-ubuntu"}}  # fmt: skip


@pytest.fixture
def gw(box: Sandbox, tmp_path: Path, actions_log: Path) -> Iterator[GatewayProcess]:
    gateway_config(box, actions_log)
    with gateway_process(box, tmp_path) as process:
        yield process


def post(gw: GatewayProcess, path: str, token: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{gw.url}{path}", json=body, headers=headers, timeout=30)


def test_only_the_token_the_call_was_decided_for_records_its_result_once(
    gw: GatewayProcess, box: Sandbox
) -> None:
    """agent-b cannot record agent-a's call (403); agent-a can, once (then 409)."""
    decided = post(gw, "/v1/decide", TOKENS["agent-a"], CALL)
    assert decided.json()["outcome"] == "context", decided.text
    body = {**CALL, "result": "failed", "host": "codex"}
    forged = post(gw, "/v1/result", TOKENS["agent-b"], body)
    assert forged.status_code == 403, forged.text
    assert "another principal" in forged.json()["error"]
    assert results(box) == []
    assert post(gw, "/v1/result", "not-a-token", body).status_code == 401
    assert results(box) == []
    done = post(gw, "/v1/result", TOKENS["agent-a"], body)
    assert done.json() == {"recorded": True}
    (line,) = results(box)
    assert (line["client"], line["host"], line["result"]) == ("agent-a", "codex", "failed")
    again = post(gw, "/v1/result", TOKENS["agent-a"], {**body, "result": "succeeded"})
    assert again.status_code == 409
    assert "already recorded" in again.json()["error"]
    assert [r["result"] for r in results(box)] == ["failed"]
