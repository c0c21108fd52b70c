"""The second witness through the gateway: a tag confirmed on one ZVM is checked with the
other ZVM that lists the same VPG, and a disagreement is a deny that names both.

A real `zerto-rewind gateway --listen` process, the SDK's own client, the stand-in VM
server recording every call that reaches it, and one simulator running a ZVM per site
(``THREE_ZVMS``). web-01 is hq-web-dr's: hq protects it and takes its tags, dr, its
recovery site, lists the same journal. A journal fault on dr (``hide_tags`` /
``move_tags``) makes dr's view of that journal part from hq's, as a proxy on one ZVM's
path that moved a tag would. Ground truth: the simulators' counters and the stand-in's
record.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    actions,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.testing import THREE_ZVMS, Sandbox

pytestmark = pytest.mark.anyio
VPG = "hq-web-dr"


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


def listings(box: Sandbox, site: str) -> int:
    """How many checkpoint listings that site's ZVM served (the witness asks one)."""
    requests: dict[str, int] = box.control("GET", "/_sim/stats", site=site)["requests"]
    return requests.get("GET checkpoints.list", 0)


def tags_on_hq(box: Sandbox) -> int:
    """Tags hq's ZVM was asked for on hq-web-dr, read at hq's own port (``box.control``
    would go through dr's, which may be down)."""
    assert box.sim.ca_bundle is not None
    tls = ssl.create_default_context(cafile=box.sim.ca_bundle)
    answer = httpx.get(f"{box.sites['hq']['url']}/_sim/stats", verify=tls, timeout=10)
    answer.raise_for_status()
    tags: dict[str, int] = answer.json()["tag_requests"]
    return tags.get(VPG, 0)


async def power_off(gw: GatewayProcess, vm: str = "web-01") -> Any:
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        return await c.call_tool("power_off_vm", {"name": vm})


@pytest.mark.parametrize(("kind", "seen"), [("hide_tags", "shows no such checkpoint"),
                                            ("move_tags", "shows checkpoint ")])  # fmt: skip
async def test_a_tag_the_other_zvm_disagrees_about_is_denied_naming_both(
    gw: GatewayProcess, estate_box: Sandbox, actions_log: Path, kind: str, seen: str
) -> None:
    """Both agree: forwarded once. dr's view parts: the tag is taken on hq and landed, dr
    is asked and disagrees, the call is denied naming both ZVMs and never reaches the VM
    server. The fault cleared, the same call is forwarded again, once."""
    agreed = await power_off(gw)
    assert not agreed.is_error, text_of(agreed)
    assert [a["vm"] for a in actions(actions_log)] == ["web-01"]
    assert listings(estate_box, "dr") >= 1  # dr was asked as the second witness
    estate_box.control("POST", "/_sim/faults", {"kind": kind, "vpg": VPG}, site="dr")
    tags_before, dr_before = estate_box.tag_requests(VPG, site="hq"), listings(estate_box, "dr")

    parted = await power_off(gw)
    text = text_of(parted)
    assert parted.is_error
    assert "site hq's ZVM" in text
    assert "site dr's ZVM" in text
    assert seen in text.split("site dr's ZVM", 1)[1]  # move_tags: another checkpoint's id
    assert "disagree" in text
    line = decisions(estate_box)[-1]
    assert (line["row"], line["decision"]) == ("failed", "deny")
    assert estate_box.tag_requests(VPG, site="hq") == tags_before + 1  # hq took a new tag
    assert estate_box.tag_requests(site="dr") == 0  # dr takes none: hq-web-dr is hq's
    assert listings(estate_box, "dr") > dr_before
    assert [a["vm"] for a in actions(actions_log)] == ["web-01"]  # not forwarded

    estate_box.control("DELETE", "/_sim/faults", site="dr")
    again = await power_off(gw)
    assert not again.is_error, text_of(again)
    assert [a["vm"] for a in actions(actions_log)] == ["web-01", "web-01"]
    assert [d["row"] for d in decisions(estate_box)] == ["confirmed", "failed", "confirmed"]


async def test_a_disagreement_about_another_vpg_leaves_this_call_alone(
    gw: GatewayProcess, estate_box: Sandbox, actions_log: Path
) -> None:
    """The journal fault names one VPG: db-01's (dr-db-hq, also listed by both) is
    checked and agrees, so its call is forwarded while dr still parts on hq-web-dr."""
    estate_box.control("POST", "/_sim/faults", {"kind": "hide_tags", "vpg": VPG}, site="dr")
    result = await power_off(gw, "db-01")
    assert not result.is_error, text_of(result)
    assert [a["vm"] for a in actions(actions_log)] == ["db-01"]
    assert estate_box.tag_requests("dr-db-hq", site="dr") == 1


DARK = {"down": {"kind": "down"},
        "listing 503": {"route": "checkpoints.list", "kind": "status", "status": 503}}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(DARK))
async def test_a_second_witness_that_does_not_answer_is_a_deny_naming_it(
    gw: GatewayProcess, estate_box: Sandbox, actions_log: Path, fault: str
) -> None:
    """dr goes dark after a call that both agreed on, so web-01's lookup is served from
    the VM cache and dr is first met as the witness: the call is denied naming dr (before,
    it was forwarded with no second witness). The next call meets dr's "site down" mark:
    site_unknown, a prompt, refused with no approver, and no VPG is tagged."""
    agreed = await power_off(gw)
    assert not agreed.is_error, text_of(agreed)
    estate_box.control("POST", "/_sim/faults", DARK[fault], site="dr")
    tags_before = tags_on_hq(estate_box)

    silent = await power_off(gw)
    text = text_of(silent)
    assert silent.is_error
    assert "site hq's ZVM" in text
    assert "site dr (the ZVM at" in text
    assert "did not answer" in text
    assert "Retry the same call once site dr's ZVM answers" in text
    assert tags_on_hq(estate_box) == tags_before + 1

    marked = await power_off(gw)
    assert marked.is_error
    assert "site dr" in text_of(marked)
    assert tags_on_hq(estate_box) == tags_before + 1  # no tag this time
    rows = [(d["row"], d["decision"]) for d in decisions(estate_box)]
    assert rows == [("confirmed", "context"), ("failed", "deny"), ("site_unknown", "prompt")]
    assert [a["vm"] for a in actions(actions_log)] == ["web-01"]  # only the agreed call
