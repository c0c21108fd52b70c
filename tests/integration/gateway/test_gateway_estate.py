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
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.testing import THREE_ZVMS, Sandbox, fast_sim_config

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
    # azure may hold a twin of web-01: site_unknown, a prompt; with no approver, refused.
    assert others.is_error
    assert "site azure" in text_of(others)
    assert estate_box.tag_requests() == 0
    assert dark.is_error
    assert "azure" in text_of(dark)
    assert actions(actions_log) == []
    rows = [(d["row"], d["decision"]) for d in decisions(estate_box)[-2:]]
    assert rows == [("site_unknown", "prompt"), ("error", "deny")]


# web-03: a protected VM of hq and a different VM of dr, each recovering to lab (no ZVM),
# so only its own site's ZVM lists it.
TWINS = {
    **THREE_ZVMS,
    "vpgs": [
        *THREE_ZVMS["vpgs"],
        {"name": "hq-twin", "site_kind": "vcenter", "protected_site": "hq",
         "recovery_site": "lab", "vms": [{"name": "web-03", "vcenter_id": "vm-42"}]},
        {"name": "dr-twin", "site_kind": "vcenter", "protected_site": "dr",
         "recovery_site": "lab", "vms": [{"name": "web-03", "vcenter_id": "vm-42"}]},
    ],
}  # fmt: skip


@pytest.mark.parametrize("fault", ["down", "slow"])
async def test_a_dark_site_hides_no_twin(tmp_path: Path, actions_log: Path, fault: str) -> None:
    """Issue 28's attack: with dr down, or slow past its 2 s read timeout, hq alone lists
    web-03. The call is site_unknown (a prompt naming dr), refused with no approver: no
    VPG took a tag (the simulator's own count) and the VM server saw no call."""
    zvm = {"connect_timeout_s": 1.0, "read_timeout_s": 2.0}
    config = fast_sim_config()
    with Sandbox(str(tmp_path / "twins"), sim_config=config, guard={"timeout_s": 10},
                 estate=TWINS, zvm=zvm) as box:  # fmt: skip
        gateway_config(box, actions_log)
        with gateway_process(box, tmp_path) as gw:
            async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
                both = await c.call_tool("power_off_vm", {"name": "web-03"})
                assert decisions(box)[-1]["row"] == "vm_ambiguous", text_of(both)
                kind = {"kind": "down"} if fault == "down" else {"route": "*", "kind": "hang"}
                box.control("POST", "/_sim/faults", kind, site="dr")
                for entry in (Path(box.state_dir) / "cache").glob("vms-*"):
                    entry.unlink()  # dr's cached twin would still make it ambiguous
                for _ in range(2):  # met live, then from dr's "site down" mark
                    result = await c.call_tool("power_off_vm", {"name": "web-03"})
                    assert result.is_error
                    assert "web-03 is listed by site hq" in text_of(result)
                    assert "site dr" in text_of(result)
                    line = decisions(box)[-1]
                    assert (line["row"], line["decision"]) == ("site_unknown", "prompt")
                    assert line["answer"] == "no_approver"
            box.control("DELETE", "/_sim/faults", site="dr")
            assert box.tag_counts() == {"hq": {}, "dr": {}, "azure": {}}
    assert actions(actions_log) == []
