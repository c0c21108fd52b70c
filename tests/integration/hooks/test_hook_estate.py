"""The standalone hook process against two ZVMs (one simulator per site, over TLS):
a VM of site dr is tagged on dr; with dr down, a VM only dr knows is denied naming dr."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.config import sim_zvm, write_config
from support.sim import PAIRED_ESTATES, estate_sims, share_journals
from zerto_rewind.sim import SimServer
from zerto_rewind.testing import Sandbox, fast_sim_config

POWER_OFF = "mcp__vsphere__power_off_vm"


@pytest.fixture
def estate(tmp_path: Path) -> Iterator[tuple[Sandbox, SimServer]]:
    """The sandbox's simulator is site hq; a second simulator is site dr; zvms names both."""
    hq_estate = tmp_path / "estate-hq.json"
    hq_estate.write_text(json.dumps(PAIRED_ESTATES["hq"]))
    config = fast_sim_config(estate_file=hq_estate)
    with (
        estate_sims(tmp_path, {"dr": PAIRED_ESTATES["dr"]}) as sims,
        Sandbox(str(tmp_path / "box"), sim_config=config, guard={"timeout_s": 10}) as box,
    ):
        share_journals(box.sim, sims["dr"])
        data = box.config()
        data["zvms"] = {"hq": data.pop("zvm"), "dr": sim_zvm(sims["dr"])}
        config_path = Path(box.config_path)
        write_config(config_path.parent, data, name=config_path.name)
        yield box, sims["dr"]


def dr_tags(dr: SimServer) -> dict[str, int]:
    import ssl

    import httpx

    assert dr.ca_bundle is not None
    verify = ssl.create_default_context(cafile=dr.ca_bundle)
    with httpx.Client(base_url=dr.url, verify=verify, timeout=5.0) as client:
        found: dict[str, int] = client.get("/_sim/stats").json()["tag_requests"]
        return found


def test_a_vm_of_site_dr_is_tagged_on_dr(estate: tuple[Sandbox, SimServer]) -> None:
    box, dr = estate
    run = box.run_hook(POWER_OFF, {"name": "db-01"})
    assert run.decision == "context"
    assert "VPG 'dr-vpg' (vcenter, site dr)" in run.reason
    assert dr_tags(dr) == {"dr-vpg": 1}
    assert box.tag_requests() == 0
    record = box.log_records()[-1]
    assert (record["row"], record["sites"]) == ("confirmed", ["dr"])


def test_with_dr_down_a_vm_only_dr_knows_is_denied_naming_dr(
    estate: tuple[Sandbox, SimServer],
) -> None:
    box, dr = estate
    dr_url = dr.url
    dr.stop()
    run = box.run_hook(POWER_OFF, {"name": "web-01b"})
    assert run.decision == "deny"
    assert "site dr" in run.reason
    assert dr_url in run.reason
    assert "did not answer" in run.reason
    assert box.log_records()[-1]["row"] == "error"
    # hq lists web-01, but dr may hold a twin of the name: the hook asks, naming dr.
    mine = box.run_hook(POWER_OFF, {"name": "web-01"})
    assert mine.decision == "ask"
    assert "site dr" in mine.reason
    assert box.log_records()[-1]["row"] == "site_unknown"
    assert box.tag_requests() == 0
