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


def test_site_down_denies_its_vms_and_decides_the_others(tmp_path: Path) -> None:
    """dr's ZVM is stopped: a VM only dr knows is denied naming dr; hq's VMs go on."""
    with estate_sims(tmp_path) as sims:
        settings = settings_for(sims, tmp_path)
        sims["dr"].stop()
        denied = decide(settings, "web-01b")
        allowed = decide(settings, "web-01", session="s2")
    assert (denied.row, denied.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr" in denied.reason
    assert "did not answer" in denied.reason
    assert allowed.row == Row.CONFIRMED


def test_a_401_site_is_dark(sims: dict[str, SimServer], tmp_path: Path) -> None:
    settings = settings_for(sims, tmp_path, dr={"password": "not-the-password"})
    decision = decide(settings, "web-01b")
    assert (decision.row, decision.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr" in decision.reason
    assert "AuthError" in decision.reason
    assert "not-the-password" not in decision.reason
    assert decide(settings, "web-01", session="s2").row == Row.CONFIRMED


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
    in its normal time, and dr is not asked again."""
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
    assert other.row == Row.CONFIRMED
    assert other_s < max(1.0, 3 * normal_s)
    assert after == before
