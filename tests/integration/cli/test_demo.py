"""``zerto-rewind demo`` end to end, with a shorter AWS cadence and budget: every row of the
decision table and the estate's rows (four ZVMs over TLS, real hook processes) get the
decision the demo promises, the last act's session is rewound by its approver with the
real CLI and its three VMs are back, and it exits 0, as ``./scripts/demo`` needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from zerto_rewind.cli import demo_rewind
from zerto_rewind.cli.demo import DEMO_CATALOG, demo_estate, main
from zerto_rewind.testing import Sandbox, fast_sim_config


def test_the_demo_gets_every_row_it_promises(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--aws-cadence", "12", "--budget", "7"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "every row got the decision the table promises" in out
    for site in ("hq", "dr", "azure", "aws"):
        assert f"site {site} (" in out  # each ZVM of the estate is named with its URL
    assert "dr: dr-reports-aws 1" in out  # dr's VM was tagged on dr's ZVM, and only there
    assert "aws: aws-orders-hq 1" in out  # pending and retry share one tag
    assert "site dr dark: its VM" in out
    _assert_the_rewind_act(out)


def _assert_the_rewind_act(out: str) -> None:
    """The session's timeline, its plan, the run's report, and each VM back."""
    act = out[out.index("rewind an agent session") :]
    vms = (demo_rewind.WEB, demo_rewind.APP, demo_rewind.DB)
    assert f"session {demo_rewind.SESSION}: 3 change(s)" in act  # session show
    for vm in vms:
        assert re.search(rf"{vm}\s+allowed\s+not recorded\s+checkpoint \d+", act), act
        assert f"operation: journal VM restore of {vm} from checkpoint" in act  # the plan
        assert re.search(rf"{vm}: done \(restored\): restored from checkpoint \d+", act)
    assert "a --failover of the VPG would also move: shop-app-01" in act
    rows = {line.split()[0]: line for line in act.splitlines() if line.strip().startswith("shop-")}
    assert "off, 4 CPU, 8 GB" in rows[demo_rewind.APP]  # after its change
    assert rows[demo_rewind.DB].count("2 disks") == 2  # before, and after the rewind
    assert all(rows[vm].rstrip().endswith("yes") for vm in vms), rows
    assert "every VM the session changed is back as it was" in act


def test_the_rewind_act_fails_when_a_vm_is_not_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every ZVM refuses a journal restore: the rewind reports failures, the VMs stay as
    the session left them, and the act says which are not back."""
    vcenter = demo_rewind.memory_vcenter()
    config = fast_sim_config(vcenter_link=vcenter)
    estate = demo_estate()
    with Sandbox(str(tmp_path), sim_config=config, estate=estate, catalog=DEMO_CATALOG) as box:
        box.write_config(approvals=demo_rewind.approvals())
        for site in box.sites:
            fault = {"route": "vms.restore", "kind": "status", "status": 500}
            box.control("POST", "/_sim/faults", fault, site=site)
        back = demo_rewind.play(Console(width=120), box, vcenter)
    out = capsys.readouterr().out
    assert back is False
    assert "not back: shop-web-01, shop-app-01, shop-db-01" in out, out
    assert vcenter.state(demo_rewind.APP).power_state == "poweredOff"
