"""The estate's fault matrix: one of three ZVMs down, hanging, 401 or failing TLS, for VMs
of that site and for a VM of each other site, through the real hook process and three
simulated ZVMs over TLS (``THREE_ZVMS``: hq, dr, azure, each protecting a VM paired with
another ZVM site and a VM only its own ZVM lists).

Zero fail-open. A VM of the dark site is denied naming the site: never allowed, never a
prompt. The VM only the dark site lists is denied as *error* (no ZVM that answered knows
it, so nobody can say it is unknown to Zerto); the VM another ZVM lists as recovering is
denied as *failed* (its protected site, which alone takes its tag, is dark). A VM of
another site is *site_unknown*: the dark site may hold a VM of the same name, so the
hook asks a person naming the dark site, and no ZVM is asked for a tag (silence is not
absence, issue 28). Each test runs two sequences, each in a fresh state directory:

* *dark site first*: its lone VM (the fault is met live), another site's VM, then its
  paired VM (now from the "site down" mark);
* *other site first*: the third site's VM while the dark site is not yet marked (its
  failure is met during that VM's lookup), then the dark site's paired and lone VMs.

Every answer comes within the guard's budget + 1 s: each ZVM's own timeout (1 s connect,
1 s read) bounds what a hanging site costs. ``scripts/fault-matrix`` writes the table in
docs/reliability.md (``ZERTO_ESTATE_FAULT_MATRIX_REPORT``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reliability.reliability_helpers import BUDGET_S, GUARD, POWER_OFF, Bench
from zerto_rewind.testing import THREE_ZVMS, Sandbox, fast_sim_config

# Every journal ticks each second, so a confirmed decision waits about a second.
CADENCES = {"vcenter": 1.0, "hyperv": 1.0, "vcd": 1.0, "azure": 1.0, "aws": 1.0}
# Each ZVM's own budget for an answer: what a hanging site may cost a decision.
SITE_TIMEOUTS = {"connect_timeout_s": 1, "read_timeout_s": 1}
# Each site's VM paired with another ZVM site, and its VPG; and its VM only it lists.
VM_OF = {"hq": ("web-01", "hq-web-dr"), "dr": ("db-01", "dr-db-hq"),
         "azure": ("crm-01", "azure-crm-hq")}  # fmt: skip
LONE_VM_OF = {"hq": "file-01", "dr": "batch-01", "azure": "ml-01"}
FAULTS: dict[str, dict[str, Any]] = {
    "down": {"kind": "down"},
    "hanging": {"route": "*", "kind": "hang"},
    "401": {"route": "*", "kind": "unauthorized"},
    "TLS error": {"kind": "wrong_cert"},
}
# What the deny says about the dark site's failure, besides its name.
SAYS = {
    "down": ("did not answer", "cannot reach", "connect"),
    "hanging": ("did not answer", "timed out", "timeout"),
    "401": ("AuthError", "401", "refused"),
    "TLS error": ("ZvmTlsError", "TLS", "certificate"),
}


@pytest.fixture(scope="module")
def estate_box() -> Iterator[Sandbox]:
    """Three ZVMs over TLS for the whole module; each test resets them."""
    config = fast_sim_config(cadences=CADENCES)
    root = tempfile.mkdtemp(prefix="zr-rel-estate-")
    with Sandbox(root, sim_config=config, estate=THREE_ZVMS, guard=GUARD, zvm=SITE_TIMEOUTS) as box:
        yield box


@pytest.mark.parametrize("dark", list(VM_OF))
@pytest.mark.parametrize("fault", list(FAULTS))
def test_one_dark_zvm_of_three_never_fails_open(
    estate_box: Sandbox, tmp_path: Path, fault: str, dark: str
) -> None:
    box = estate_box
    box.control("POST", "/_sim/reset")
    first_other, second_other = (site for site in VM_OF if site != dark)
    box.control("POST", "/_sim/faults", FAULTS[fault], site=dark)
    try:
        own_first = Bench(box, tmp_path / "dark-site-first")
        _expect_denied(own_first, fault, dark, LONE_VM_OF[dark], "error", "first call")
        _expect_site_unknown(own_first, fault, dark, first_other)
        _expect_denied(own_first, fault, dark, VM_OF[dark][0], "failed", "site marked down")
        other_first = Bench(box, tmp_path / "other-site-first")
        _expect_site_unknown(other_first, fault, dark, second_other)
        when = "after another site's lookup"
        _expect_denied(other_first, fault, dark, VM_OF[dark][0], "failed", when)
        _expect_denied(other_first, fault, dark, LONE_VM_OF[dark], "error", when)
    finally:
        box.control("DELETE", "/_sim/faults", site=dark)
    tags = box.tag_counts()
    assert tags == {site: {} for site in VM_OF}, f"a ZVM was asked for a tag: {tags}"


def _expect_denied(bench: Bench, fault: str, dark: str, vm: str, row: str, when: str) -> None:
    run = bench.hook(POWER_OFF, {"name": vm}, session_id=f"dark-{len(bench.runs)}")
    _report(fault, dark, vm, dark, when, run.decision, _row(bench), run.reason, run.elapsed_s)
    assert "Traceback" not in run.stderr
    assert run.elapsed_s <= BUDGET_S + 1.0
    assert run.decision == "deny", f"{vm} of dark site {dark} was {run.decision}: {run.reason}"
    assert f"site {dark}" in run.reason
    assert any(word.lower() in run.reason.lower() for word in SAYS[fault]), run.reason
    assert _row(bench) == row, run.reason


def _expect_site_unknown(bench: Bench, fault: str, dark: str, site: str) -> None:
    vm, _vpg = VM_OF[site]
    run = bench.hook(POWER_OFF, {"name": vm}, session_id=f"other-{len(bench.runs)}")
    _report(fault, dark, vm, site, "other site", run.decision, _row(bench), run.reason,
            run.elapsed_s)  # fmt: skip
    assert "Traceback" not in run.stderr
    assert run.elapsed_s <= BUDGET_S + 1.0
    assert run.decision == "ask", f"{vm} of site {site} with {dark} {fault}: {run.reason}"
    assert f"site {dark}" in run.reason
    assert f"{vm} is listed by site" in run.reason
    assert site in run.reason.split(" but ")[0]
    record = _last_record(bench)
    assert record["row"] == "site_unknown"
    assert not record.get("checkpoint_ids"), "no checkpoint while a site is dark"


def _last_record(bench: Bench) -> dict[str, Any]:
    with open(bench.log_path, encoding="utf-8") as fh:
        record: dict[str, Any] = json.loads(fh.read().splitlines()[-1])
    return record


def _row(bench: Bench) -> str:
    return str(_last_record(bench).get("row")) if os.path.exists(bench.log_path) else "-"


def _report(
    fault: str, dark: str, vm: str, site: str, when: str, decision: str, row: str, reason: str,
    seconds: float,
) -> None:  # fmt: skip
    path = os.environ.get("ZERTO_ESTATE_FAULT_MATRIX_REPORT")
    if path:
        line = {"fault": fault, "dark": dark, "vm": vm, "site": site, "when": when,
                "decision": decision, "row": row, "reason": reason,
                "seconds": round(seconds, 2)}  # fmt: skip
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
