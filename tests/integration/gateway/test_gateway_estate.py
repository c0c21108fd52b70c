"""The gateway over an estate of three ZVMs: per-site health, and a dark site's VM refused.

A real `zerto-rewind gateway --listen` process, the SDK's own client, the stand-in VM
server, and one simulator running a ZVM per site (``THREE_ZVMS``: hq, dr, azure).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    GatewayProcess,
    actions,
    client,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.testing import THREE_ZVMS, Sandbox

pytestmark = pytest.mark.anyio
HEALTH_TTL_S = 5.0  # gateway/service.py caches /healthz this long


@pytest.fixture
def estate_box(tmp_path: Path) -> Iterator[Sandbox]:
    zvm = {"connect_timeout_s": 1.0, "read_timeout_s": 2.0}
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, estate=THREE_ZVMS, zvm=zvm) as box:
        yield box


@pytest.fixture
def gw(estate_box: Sandbox, tmp_path: Path, actions_log: Path) -> Iterator[GatewayProcess]:
    gateway_config(estate_box, actions_log)
    with gateway_process(estate_box, tmp_path) as process:
        yield process


def health(gw: GatewayProcess) -> dict[str, object]:
    answer: dict[str, object] = httpx.get(
        f"{gw.url}/healthz", headers=METRICS_HEADERS, timeout=30
    ).json()
    return answer


async def test_health_names_the_dark_site_and_its_vm_is_refused(
    gw: GatewayProcess, estate_box: Sandbox, actions_log: Path
) -> None:
    assert health(gw)["zvm"] == "ok"
    estate_box.control("POST", "/_sim/faults", {"kind": "down"}, site="azure")
    time.sleep(HEALTH_TTL_S + 0.2)
    answer = health(gw)
    assert answer["ready"] is False
    assert str(answer["zvm"]).startswith("azure: unreachable")
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        others = await c.call_tool("power_off_vm", {"name": "web-01"})
        dark = await c.call_tool("power_off_vm", {"name": "ml-01"})
    assert not others.is_error, text_of(others)
    assert estate_box.tag_requests("hq-web-dr", site="hq") == 1
    assert dark.is_error
    assert "azure" in text_of(dark)
    assert [a["vm"] for a in actions(actions_log)] == ["web-01"]
