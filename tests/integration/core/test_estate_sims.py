"""The guard over two real ZVM simulators (one per site, over TLS): lookups across sites,
the tag on the protected site's ZVM, per-ZVM caches and tokens, and deny on a dark site
(down, hanging, 401, TLS error)."""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.config import write_estate_config
from support.sim import estate_sims
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.core.decision import Outcome, Row, ToolCall
from zerto_rewind.core.guard import Guard
from zerto_rewind.sim import SimServer

TOOL = "mcp__vsphere__power_off_vm"
CATALOG: dict[str, Any] = {"tools": {TOOL: {"vm_arg": "name"}}}


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[dict[str, SimServer]]:
    with estate_sims(tmp_path) as running:
        yield running


def settings_for(
    sims: dict[str, SimServer], directory: Path, **zvm_overrides: dict[str, Any]
) -> Settings:
    guard = {"timeout_s": 20, "site_down_s": 30}
    path = write_estate_config(sims, directory, zvm_overrides=zvm_overrides, guard=guard, **CATALOG)
    return load_settings({"HOME": str(directory)}, path=str(path))


def decide(settings: Settings, vm: str, session: str = "s1") -> Any:
    guard = Guard(settings)
    try:
        return guard.decide(ToolCall(TOOL, {"name": vm}, session_id=session))
    finally:
        guard.close()


def control(sim: SimServer, method: str, path: str, body: Any = None) -> Any:
    assert sim.ca_bundle is not None
    verify = ssl.create_default_context(cafile=sim.ca_bundle)
    with httpx.Client(base_url=sim.url, verify=verify, timeout=5.0) as client:
        response = client.request(method, path, json=body)
        response.raise_for_status()
        return response.json() if response.content else None


def stats(sim: SimServer) -> dict[str, Any]:
    found: dict[str, Any] = control(sim, "GET", "/_sim/stats")
    return found


def test_a_vm_of_site_dr_is_tagged_and_confirmed_on_dr(
    sims: dict[str, SimServer], tmp_path: Path
) -> None:
    settings = settings_for(sims, tmp_path)
    decision = decide(settings, "db-01")
    assert (decision.row, decision.outcome) == (Row.CONFIRMED, Outcome.CONTEXT)
    assert [(v.vpg_name, v.site) for v in decision.vpgs] == [("dr-vpg", "dr")]
    assert stats(sims["dr"])["tag_requests"] == {"dr-vpg": 1}
    assert stats(sims["hq"])["tag_requests"] == {}


def test_a_vpg_both_sites_list_is_tagged_on_its_protected_site(
    sims: dict[str, SimServer], tmp_path: Path
) -> None:
    decision = decide(settings_for(sims, tmp_path), "web-01")
    assert decision.row == Row.CONFIRMED
    assert [(v.vpg_name, v.site) for v in decision.vpgs] == [("web-vpg", "hq")]
    assert stats(sims["hq"])["tag_requests"] == {"web-vpg": 1}
    assert stats(sims["dr"])["tag_requests"] == {}


def test_unknown_only_when_every_zvm_answered(sims: dict[str, SimServer], tmp_path: Path) -> None:
    decision = decide(settings_for(sims, tmp_path), "ghost-01")
    assert (decision.row, decision.outcome) == (Row.VM_UNKNOWN, Outcome.PROMPT)
    assert sims["hq"].url in decision.reason
    assert sims["dr"].url in decision.reason


def test_caches_and_tokens_are_per_zvm(sims: dict[str, SimServer], tmp_path: Path) -> None:
    """Each site's lookup is cached under its own URL and each ZVM issues one token, however
    many calls the guard makes."""
    settings = settings_for(sims, tmp_path)
    for n, vm in enumerate(["db-01", "web-01", "db-01", "web-01b"]):
        assert decide(settings, vm, session=f"s{n}").row == Row.CONFIRMED
    assert stats(sims["hq"])["token_requests"]["total"] == 1
    assert stats(sims["dr"])["token_requests"]["total"] == 1
    tokens = [n for n in os.listdir(Path(settings.state_dir) / "tokens") if n.endswith(".json")]
    assert len(tokens) == 2
    lists = {site: stats(sim)["requests"].get("GET vms.list", 0) for site, sim in sims.items()}
    assert lists == {"hq": 3, "dr": 3}  # db-01, web-01, web-01b once each: the repeat is cached


def test_site_down_denies_its_vms_and_asks_for_the_others(tmp_path: Path) -> None:
    """dr's ZVM is stopped: a VM only dr knows is denied naming dr; a VM hq lists is
    site_unknown (dr may hold a twin of the name): a prompt naming dr, no tag on hq."""
    with estate_sims(tmp_path) as sims:
        settings = settings_for(sims, tmp_path)
        sims["dr"].stop()
        denied = decide(settings, "web-01b")
        allowed = decide(settings, "web-01", session="s2")
        hq_tags = stats(sims["hq"])["tag_requests"]
    assert (denied.row, denied.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr" in denied.reason
    assert "did not answer" in denied.reason
    assert (allowed.row, allowed.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
    assert "site dr" in allowed.reason
    assert hq_tags == {}


def test_a_401_site_is_dark(sims: dict[str, SimServer], tmp_path: Path) -> None:
    settings = settings_for(sims, tmp_path, dr={"password": "not-the-password"})
    decision = decide(settings, "web-01b")
    assert (decision.row, decision.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr" in decision.reason
    assert "AuthError" in decision.reason
    assert "not-the-password" not in decision.reason
    assert decide(settings, "web-01", session="s2").row == Row.SITE_UNKNOWN
    assert stats(sims["hq"])["tag_requests"] == {}


def test_a_tls_error_site_is_dark(sims: dict[str, SimServer], tmp_path: Path) -> None:
    """dr's entry trusts hq's CA, not dr's: the TLS handshake fails, dr is dark."""
    settings = settings_for(sims, tmp_path, dr={"ca_bundle": sims["hq"].ca_bundle})
    decision = decide(settings, "web-01b")
    assert (decision.row, decision.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr" in decision.reason
    assert "ZvmTlsError" in decision.reason


def test_a_dark_protected_site_denies_the_vpg_the_other_site_lists(
    sims: dict[str, SimServer], tmp_path: Path
) -> None:
    """db-01 is protected from dr; dr answers 503 from now on: hq lists dr-vpg recovering,
    but cannot take its checkpoint (guard.tag_via protected): deny naming dr."""
    settings = settings_for(sims, tmp_path)
    assert decide(settings, "db-01").row == Row.CONFIRMED  # both sites' identities learned
    control(sims["dr"], "POST", "/_sim/faults", {"route": "GET /v1/.*", "kind": "status"})
    control(sims["dr"], "POST", "/_sim/faults", {"route": "POST /v1/.*", "kind": "status"})
    for vm_cache in (Path(settings.state_dir) / "cache").glob("vms-*"):
        vm_cache.unlink()  # a fresh lookup, so that dr's failure is seen there
    decision = decide(settings, "db-01", session="s2")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "VPG 'dr-vpg' is protected from site dr" in decision.reason
    assert stats(sims["hq"])["tag_requests"] == {}


def test_a_hanging_site_costs_its_own_timeout_once(
    sims: dict[str, SimServer], tmp_path: Path
) -> None:
    """dr hangs on every VM lookup: the first call waits dr's own timeout (1 s connect +
    1 s read) and is denied naming dr; dr is then marked down, so a VM of hq is decided
    in its normal time (site_unknown: dr may hold a twin), and dr is not asked again."""
    settings = settings_for(sims, tmp_path, dr={"connect_timeout_s": 1, "read_timeout_s": 1})
    assert decide(settings, "web-01").row == Row.CONFIRMED  # warm: tokens, site identities
    normal_started = time.monotonic()
    assert decide(settings, "app-01", session="s0").row == Row.CONFIRMED
    normal_s = time.monotonic() - normal_started
    control(sims["dr"], "POST", "/_sim/faults", {"route": "vms.list", "kind": "hang"})
    try:
        started = time.monotonic()
        first = decide(settings, "web-01b", session="s1")
        first_s = time.monotonic() - started
        before = stats(sims["dr"])["requests"].get("GET vms.list", 0)
        started = time.monotonic()
        other = decide(settings, "app-02", session="s2")
        other_s = time.monotonic() - started
        after = stats(sims["dr"])["requests"].get("GET vms.list", 0)
    finally:
        control(sims["dr"], "DELETE", "/_sim/faults")
    assert (first.row, first.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr" in first.reason
    assert 1.0 <= first_s < 5.0
    assert other.row == Row.SITE_UNKNOWN
    assert other_s < max(1.0, 3 * normal_s)
    assert after == before


# web-03 is a protected VM of hq and a different VM of dr, each VPG recovering to a site
# only its own ZVM lists: with both up the name is ambiguous; with dr dark, hq alone
# lists it, and that must never read as a unique name.
_TWIN_HQ = {"name": "hq-twin", "site_kind": "vcenter", "protected_site": "hq",
            "recovery_site": "aws", "vms": [{"name": "web-03", "vcenter_id": "vm-14"}]}  # fmt: skip
_TWIN_DR = {"name": "dr-twin", "site_kind": "vcenter", "protected_site": "dr",
            "recovery_site": "hq", "vms": [{"name": "web-03", "vcenter_id": "vm-23"}]}  # fmt: skip


def twin_estates() -> dict[str, Any]:
    from support.sim import PAIRED_ESTATES

    hq, dr = PAIRED_ESTATES["hq"], PAIRED_ESTATES["dr"]
    return {"hq": {**hq, "vpgs": [*hq["vpgs"], _TWIN_HQ]},
            "dr": {**dr, "vpgs": [*dr["vpgs"], _TWIN_DR]}}  # fmt: skip


@pytest.mark.parametrize("fault", ["down", "hang"])
def test_a_dark_site_never_makes_a_twin_name_unique(tmp_path: Path, fault: str) -> None:
    """dr down, or hanging past its 1 s read timeout: web-03 is site_unknown (a prompt
    naming dr), and no ZVM was asked for a tag, read back from both simulators."""
    with estate_sims(tmp_path, twin_estates()) as sims:
        settings = settings_for(sims, tmp_path, dr={"connect_timeout_s": 1, "read_timeout_s": 1})
        both = decide(settings, "web-03")
        assert (both.row, both.outcome) == (Row.VM_AMBIGUOUS, Outcome.PROMPT)
        for entry in (Path(settings.state_dir) / "cache").glob("vms-*"):
            entry.unlink()  # what dr holds now, only dr can say
        if fault == "down":
            sims["dr"].stop()
        else:
            control(sims["dr"], "POST", "/_sim/faults", {"route": "vms.list", "kind": "hang"})
        dark = decide(settings, "web-03", session="s2")
        again = decide(settings, "web-03", session="s3")  # dr marked down; hq's entry is cached
        hq_tags = stats(sims["hq"])["tag_requests"]
        if fault == "hang":
            assert stats(sims["dr"])["tag_requests"] == {}
            control(sims["dr"], "DELETE", "/_sim/faults")
    for decision in (dark, again):
        assert (decision.row, decision.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
        assert "web-03 is listed by site hq" in decision.reason
        assert "site dr" in decision.reason
        assert "did not answer" in decision.reason
    assert hq_tags == {}


def test_a_cache_entry_made_under_a_dark_site_is_not_a_unique_answer(
    tmp_path: Path,
) -> None:
    """hq answered web-03 while dr was dark; dr answers again: the next call asks both
    afresh and finds the twin (ambiguous), never hq's cached answer alone."""
    with estate_sims(tmp_path, twin_estates()) as sims:
        settings = settings_for(sims, tmp_path)
        assert decide(settings, "web-01").row == Row.CONFIRMED  # learn both sites' identities
        control(sims["dr"], "POST", "/_sim/faults", {"route": "vms.list", "kind": "status"})
        assert decide(settings, "web-03", session="s2").row == Row.SITE_UNKNOWN
        control(sims["dr"], "DELETE", "/_sim/faults")
        for mark in (Path(settings.state_dir) / "cache").glob("sitedown-*"):
            mark.unlink()  # dr's mark ends (as after guard.site_down_s)
        hq_lists = stats(sims["hq"])["requests"].get("GET vms.list", 0)
        decision = decide(settings, "web-03", session="s3")
        assert stats(sims["hq"])["requests"].get("GET vms.list", 0) == hq_lists + 1
        assert (decision.row, decision.outcome) == (Row.VM_AMBIGUOUS, Outcome.PROMPT)
        assert stats(sims["hq"])["tag_requests"] == {"web-vpg": 1}  # the warm-up's alone


def test_a_tag_the_second_zvm_does_not_show_is_denied_naming_both(tmp_path: Path) -> None:
    """web-vpg is listed by hq and dr. dr's view of its journal is made to part from hq's
    (as a proxy on hq's path that moved the tag would): hq confirms the tag, dr, asked as
    a second witness, shows no such checkpoint: deny naming both sites."""
    import copy

    with estate_sims(tmp_path) as sims:
        settings = settings_for(sims, tmp_path)
        vpg_id = next(i for i, v in sims["dr"].world.vpgs.items() if v.name == "web-vpg")
        with sims["dr"].world.lock:
            vpg = sims["dr"].world.vpgs[vpg_id]
            vpg.journal = copy.deepcopy(vpg.journal)  # dr's listing no longer sees hq's tag
        decision = decide(settings, "web-01")
        hq_tags = stats(sims["hq"])["tag_requests"]
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "site hq's ZVM" in decision.reason
    assert "site dr's ZVM" in decision.reason
    assert "no such checkpoint" in decision.reason
    assert hq_tags == {"web-vpg": 1}  # the tag was taken on hq; the call was not allowed
