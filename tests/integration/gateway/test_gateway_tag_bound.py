"""A flood of tags through the gateway is cut off at guard.max_tags_per_minute."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    StartGateway,
    actions,
    client,
    decisions,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


async def test_a_flood_of_changes_on_one_vpg_is_cut_off(
    box: Sandbox, start_gateway: StartGateway, actions_log: Path
) -> None:
    """Bound 2: two changes are tagged and run; the third is refused with the bound and the
    VPG, is counted in /metrics and the decision log, and never reaches the server."""
    gw = start_gateway(guard={**box.guard, "max_tags_per_minute": 2})
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        results = [await c.call_tool("power_off_vm", {"name": "jp-ubuntu"}) for _ in range(3)]
    metrics = httpx.get(f"{gw.url}/metrics", headers=METRICS_HEADERS, timeout=10).text
    assert [r.is_error for r in results] == [False, False, True], [text_of(r) for r in results]
    refused = text_of(results[2])
    assert "VPG 'jp-local'" in refused
    assert "guard.max_tags_per_minute: 2" in refused
    assert "the next tag is possible from" in refused
    assert box.tag_requests("jp-local") == 2
    assert len(actions(actions_log)) == 2
    assert 'zerto_rewind_tags_total{event="bounded"} 1.0' in metrics
    (bounded,) = [d for d in decisions(box) if d.get("tag_bound")]
    assert (bounded["row"], bounded["decision"], bounded["tag_bound"]) == (
        "failed",
        "deny",
        ["jp-local"],
    )
