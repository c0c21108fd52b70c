"""The guard over several ZVMs: merge rules, where the tag goes, and every fail-closed case
of a dark site (fake per-site clients over the simulator's backends, a fake clock)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from zerto_rewind.core.decision import Outcome, Row
from zerto_rewind.errors import AuthError, ZvmConnectionError, ZvmTimeout, ZvmTlsError

from .guard_fakes import HOST_TOOL, EstateRig

DARK = [
    pytest.param(ZvmConnectionError("connection refused"), id="down"),
    pytest.param(AuthError("HTTP 401 twice, with a fresh token"), id="401"),
    pytest.param(ZvmTlsError("certificate verify failed"), id="tls"),
    pytest.param(ZvmTimeout("read timed out"), id="timeout"),
]


@pytest.fixture
def rig(tmp_path: Path) -> EstateRig:
    return EstateRig(tmp_path)


@pytest.fixture(params=DARK)
def dark(rig: EstateRig, request: pytest.FixtureRequest) -> Exception:
    """Site dr's ZVM is dark in one of the ways a ZVM fails: every request raises this."""
    fault: Exception = request.param
    rig.zvms["dr"].fault = fault
    return fault


def test_a_vm_of_site_dr_is_tagged_on_dr(rig: EstateRig) -> None:
    """db-01 is protected from dr: hq lists it recovering, dr protecting; dr takes the tag."""
    decision = rig.decide("db-01")
    assert (decision.row, decision.outcome) == (Row.CONFIRMED, Outcome.CONTEXT)
    (vpg,) = decision.vpgs
    assert (vpg.vpg_name, vpg.site) == ("dr-vpg", "dr")
    assert (rig.tags("dr"), rig.tags("hq")) == (["dr-vpg"], [])
    assert "VPG 'dr-vpg' (vcenter, site dr)" in decision.context
    assert decision.log_record(decision_call(rig))["sites"] == ["dr"]


def decision_call(rig: EstateRig) -> object:
    from zerto_rewind.core.decision import ToolCall

    return ToolCall("t", {}, session_id="s", started_at=rig.clock.wall())


def test_a_vpg_both_zvms_list_is_tagged_once_on_its_protected_site(rig: EstateRig) -> None:
    """web-vpg: protected at hq, recovering to dr; one VPG, one tag, on hq."""
    decision = rig.decide("web-01")
    assert decision.row == Row.CONFIRMED
    assert [(v.vpg_name, v.site) for v in decision.vpgs] == [("web-vpg", "hq")]
    assert (rig.tags("hq"), rig.tags("dr")) == (["web-vpg"], [])


def test_a_vm_only_one_site_knows_is_found_there(rig: EstateRig) -> None:
    decision = rig.decide("web-01b")
    assert [(v.vpg_name, v.site) for v in decision.vpgs] == [("dr-own", "dr")]


def test_every_zvm_is_asked_for_a_vm(rig: EstateRig) -> None:
    rig.decide("db-01")
    assert "find_vms db-01" in rig.zvms["hq"].calls
    assert "find_vms db-01" in rig.zvms["dr"].calls


def test_vms_of_two_sites_in_one_call_get_both_checkpoints(rig: EstateRig) -> None:
    decision = rig.decide("web-01", "web-01b")
    assert decision.row == Row.CONFIRMED
    assert sorted((v.vpg_name, v.site) for v in decision.vpgs) == [
        ("dr-own", "dr"),
        ("web-vpg", "hq"),
    ]


def test_one_to_many_gets_every_vpgs_checkpoint(tmp_path: Path) -> None:
    """web-01 protected from hq to dr and to aws (two VPGs): both are tagged, on hq."""
    from .guard_fakes import DR_ESTATE, HQ_ESTATE

    to_aws = {**HQ_ESTATE["vpgs"][0], "name": "web-to-aws", "recovery_site": "aws"}
    hq = {**HQ_ESTATE, "vpgs": [*HQ_ESTATE["vpgs"], to_aws]}
    rig = EstateRig(tmp_path, {"hq": hq, "dr": DR_ESTATE})
    decision = rig.decide("web-01")
    assert decision.row == Row.CONFIRMED
    assert sorted(v.vpg_name for v in decision.vpgs) == ["web-to-aws", "web-vpg"]
    assert sorted(rig.tags("hq")) == ["web-to-aws", "web-vpg"]


def test_a_vm_no_zvm_knows_is_unknown_only_when_every_zvm_answered(rig: EstateRig) -> None:
    decision = rig.decide("nowhere-01")
    assert (decision.row, decision.outcome) == (Row.VM_UNKNOWN, Outcome.PROMPT)
    assert "site hq (https://hq.zvm.test)" in decision.reason
    assert "site dr (https://dr.zvm.test)" in decision.reason


def test_a_dark_site_and_a_vm_no_other_site_knows_is_denied_naming_it(
    rig: EstateRig, dark: Exception
) -> None:
    """dr is dark and hq does not know web-01b: deny (not a prompt), naming dr."""
    decision = rig.decide("web-01b")
    assert (decision.row, decision.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in decision.reason
    assert type(dark).__name__ in decision.reason
    assert "may be that site's" in decision.reason
    assert "zerto-rewind doctor" in decision.reason


def test_a_vm_one_site_lists_while_another_is_dark_is_site_unknown(
    rig: EstateRig, dark: Exception
) -> None:
    """dr is dark; hq lists web-01: dr may hold a twin of that name, so the call asks a
    person naming dr, and no VPG is tagged on the site that did answer."""
    decision = rig.decide("web-01")
    assert (decision.row, decision.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
    assert "web-01 is listed by site hq" in decision.reason
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in decision.reason
    assert type(dark).__name__ in decision.reason
    assert "no VPG was tagged" in decision.reason
    assert (rig.tags("hq"), rig.tags("dr")) == ([], [])
    assert decision.vpgs == []


def test_a_twin_on_a_dark_site_is_never_a_unique_name(tmp_path: Path) -> None:
    """web-03 is a VM of hq and a different VM of dr: ambiguous with both up, and with dr
    down it is site_unknown, never confirmed on hq alone."""
    from .guard_fakes import DR_ESTATE, HQ_ESTATE

    twin_hq = {"name": "hq-twin", "site_kind": "vcenter", "protected_site": "hq",
               "recovery_site": "dr",
               "vms": [{"name": "web-03", "vcenter_id": "vm-14"}]}  # fmt: skip
    twin_dr = {"name": "dr-twin", "site_kind": "vcenter", "protected_site": "dr",
               "recovery_site": "aws",
               "vms": [{"name": "web-03", "vcenter_id": "vm-23"}]}  # fmt: skip
    hq = {**HQ_ESTATE, "vpgs": [*HQ_ESTATE["vpgs"], twin_hq]}
    dr_sites = [*DR_ESTATE["sites"], {"name": "aws", "kind": "aws"}]
    dr = {**DR_ESTATE, "sites": dr_sites, "vpgs": [*DR_ESTATE["vpgs"], twin_hq, twin_dr]}
    rig = EstateRig(tmp_path, {"hq": hq, "dr": dr})
    assert rig.decide("web-03").row == Row.VM_AMBIGUOUS
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    for entry in (Path(rig.settings.state_dir) / "cache").glob("vms-*"):
        entry.unlink()  # dr's cached twin gone: what dr holds now, only dr could say
    decision = rig.decide("web-03", session="s2")
    assert (decision.row, decision.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
    assert "site dr" in decision.reason
    assert (rig.tags("hq"), rig.tags("dr")) == ([], [])


def test_a_dark_protected_site_denies_its_vpg_even_if_the_other_site_lists_it(
    rig: EstateRig, dark: Exception
) -> None:
    """dr (protecting db-01) is dark; hq lists dr-vpg recovering: deny naming dr."""
    decision = rig.decide("db-01")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "VPG 'dr-vpg' is protected from site dr" in decision.reason
    assert f"{type(dark).__name__}: {dark}" in decision.reason
    assert rig.tags("hq") == []


def test_tag_via_any_tags_on_a_listing_site_when_the_protected_site_is_not_a_zvm(
    tmp_path: Path,
) -> None:
    """guard.tag_via any (UNCONFIRMED that Zerto takes it): cloud-01 is protected from aws,
    which has no ZVM in zvms; hq, which lists its VPG, takes the tag."""
    rig = EstateRig(tmp_path, tag_via="any")
    decision = rig.decide("cloud-01")
    assert decision.row in (Row.CONFIRMED, Row.PENDING)  # an AWS journal's slow cadence
    assert [v.site for v in decision.vpgs] == ["hq"]
    assert rig.tags("hq") == ["from-aws"]


def test_tag_via_any_never_confirms_while_the_protected_site_is_dark(tmp_path: Path) -> None:
    """dr protects db-01 and is dark: hq could take the tag (tag_via any), but dr may also
    hold a twin of the name, so the call is site_unknown and nothing is tagged."""
    rig = EstateRig(tmp_path, tag_via="any")
    rig.decide("db-01")  # learn dr's site identity while it answers
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    rig.clock.advance(120)
    first = rig.decide("db-01", session="s2")  # dr's rows are cached: dr fails on the VPG
    assert (first.row, first.outcome) == (Row.ERROR, Outcome.DENY)
    assert "the ZVM of site dr (https://dr.zvm.test) failed" in first.reason
    decision = rig.decide("db-01", session="s3")  # dr is marked down
    assert (decision.row, decision.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
    assert rig.tags("hq") == []


def test_a_vpg_protected_from_a_site_outside_the_estate_is_denied(rig: EstateRig) -> None:
    """cloud-01 is protected from aws, which no ZVM of zvms is: tag_via protected refuses."""
    decision = rig.decide("cloud-01")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "not one of the guard's ZVMs" in decision.reason
    assert rig.tags("hq") == []


def test_a_cached_vm_of_a_site_marked_down_is_denied_at_once(rig: EstateRig) -> None:
    """web-01b is cached as dr's; dr fails once and is marked down: the next call is denied
    at once, asking dr nothing."""
    assert rig.decide("web-01b").row == Row.CONFIRMED
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    rig.decide("nowhere-01")  # dr fails this lookup and is marked down
    calls_before = list(rig.zvms["dr"].calls)
    decision = rig.decide("web-01b", session="s2")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "site dr" in decision.reason
    assert "ZvmConnectionError: connection refused" in decision.reason
    assert rig.zvms["dr"].calls == calls_before


def test_a_site_marked_down_is_not_asked_and_other_sites_are_decided(rig: EstateRig) -> None:
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    rig.decide("nowhere-01")
    asked = len(rig.zvms["dr"].calls)
    rig.zvms["dr"].fault = None  # it came back, but the mark still holds for site_down_s
    assert rig.decide("web-01").row == Row.SITE_UNKNOWN
    assert rig.decide("web-01b").row == Row.ERROR
    assert len(rig.zvms["dr"].calls) == asked


def test_the_site_down_mark_lasts_site_down_s(tmp_path: Path) -> None:
    rig = EstateRig(tmp_path, site_down_s=0)  # 0: no mark, ask every time
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    assert rig.decide("web-01b").row == Row.ERROR
    rig.zvms["dr"].fault = None
    assert rig.decide("web-01b").row == Row.CONFIRMED


def test_a_hanging_site_costs_its_own_timeout_once(rig: EstateRig) -> None:
    """dr hangs: the first lookup waits dr's own timeout; then dr is marked down and a VM
    of hq is decided without waiting for dr."""
    import time

    release = threading.Event()
    dr = rig.zvms["dr"]
    dr.settings.connect_timeout_s, dr.settings.read_timeout_s = 0.0, 0.3
    original = dr.find_vms

    def hang(name: str, *, deadline: float | None = None) -> list[object]:
        release.wait(10)
        return original(name, deadline=deadline)  # type: ignore[return-value]

    dr.find_vms = hang  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        first = rig.decide("web-01b")
        first_s = time.monotonic() - started
        started = time.monotonic()
        second = rig.decide("web-01", session="s2")
        second_s = time.monotonic() - started
    finally:
        release.set()
    assert first.row == Row.ERROR
    assert "did not answer within its timeout" in first.reason
    assert 0.3 <= first_s < 2.0
    assert second.row == Row.SITE_UNKNOWN  # decided at once: dr is marked down
    assert second_s < 0.3


def test_caches_are_per_zvm(rig: EstateRig) -> None:
    """Each ZVM's answer is cached under its own URL: a second call asks neither again,
    and hq's empty answer for web-01b never hides dr's rows."""
    rig.decide("web-01b")
    state = rig.state
    hq = state.cached("vms", "https://hq.zvm.test|web-01b", 60)
    dr = state.cached("vms", "https://dr.zvm.test|web-01b", 60)
    assert hq == {"rows": [], "dark": []}
    assert dr is not None
    assert len(dr["rows"]) == 1
    assert state.cached("localsite", "https://hq.zvm.test", 60) != state.cached(
        "localsite", "https://dr.zvm.test", 60
    )
    before = {s: len(z.calls) for s, z in rig.zvms.items()}
    rig.clock.advance(1)
    rig.decide("web-01b", session="s2")
    assert not any(c.startswith("find_vms") for c in rig.zvms["hq"].calls[before["hq"] :])
    assert not any(c.startswith("find_vms") for c in rig.zvms["dr"].calls[before["dr"] :])


def test_a_cache_entry_made_while_a_site_was_dark_is_not_served(rig: EstateRig) -> None:
    """hq's answer for web-01 was stored while dr was dark, and says so; once dr answers
    again, web-01 is asked of hq afresh (never served from that entry) and confirmed."""
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    assert rig.decide("web-01").row == Row.SITE_UNKNOWN
    entry = rig.state.cached("vms", "https://hq.zvm.test|web-01", 60)
    assert entry["dark"] == ["dr"]
    rig.zvms["dr"].fault = None
    for mark in (Path(rig.settings.state_dir) / "cache").glob("sitedown-*"):
        mark.unlink()  # dr's mark ends (as after guard.site_down_s)
    assert rig.decide("web-01", session="s2").row == Row.CONFIRMED
    assert rig.zvms["hq"].calls.count("find_vms web-01") == 2
    assert rig.state.cached("vms", "https://hq.zvm.test|web-01", 60)["dark"] == []


def test_a_catalog_named_vpg_found_while_a_site_is_dark_is_site_unknown(tmp_path: Path) -> None:
    rig = EstateRig(tmp_path)
    rig.guard().sites().local_id("dr", rig.zvms["dr"], None)
    rig.zvms["hq"].fault = ZvmConnectionError("connection refused")
    decision = rig.decide(tool=HOST_TOOL)
    assert (decision.row, decision.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
    assert "which VPG" in decision.reason
    assert "site hq" in decision.reason
    assert rig.tags("dr") == []


def test_an_unknown_vm_is_asked_of_every_zvm_afresh(rig: EstateRig) -> None:
    rig.decide("nowhere-01")
    rig.decide("nowhere-01", session="s2")
    assert rig.zvms["hq"].calls.count("find_vms nowhere-01") == 2
    assert rig.zvms["dr"].calls.count("find_vms nowhere-01") == 2


def test_a_catalog_named_vpg_is_found_and_tagged_on_its_site(rig: EstateRig) -> None:
    decision = rig.decide(tool=HOST_TOOL)
    assert decision.row == Row.CONFIRMED
    assert rig.tags("dr") == ["dr-own"]


def test_a_catalog_named_vpg_of_a_dark_site_is_denied_naming_it(rig: EstateRig) -> None:
    rig.zvms["dr"].fault = AuthError("HTTP 401 twice, with a fresh token")
    decision = rig.decide(tool=HOST_TOOL)
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "site dr" in decision.reason
    assert "AuthError" in decision.reason


def test_a_tag_requested_through_another_sites_zvm_has_its_task_asked_there(
    rig: EstateRig,
) -> None:
    """tag_via any: hq's ZVM took dr-vpg's tag while dr was dark. A later call through dr
    joins that tag, and asks hq (which knows the task), not dr, how it went."""
    from zerto_rewind.core.decision import ToolCall, VpgOutcome
    from zerto_rewind.core.tagging import Tagger, TagPlan

    hq, dr = rig.zvms["hq"], rig.zvms["dr"]
    hq.tag_behaviour("dr-vpg", "fail", reason="the VRA did not answer")
    tagger = Tagger(
        hq,  # type: ignore[arg-type]
        rig.state,
        rig.settings.guard,
        wall=rig.clock.wall,
        mono=rig.clock.mono,
        sleep=rig.clock.sleep,
        site_client=rig.zvms.get,  # type: ignore[arg-type]
    )
    deadline = rig.clock.mono() + 30
    vpg_id = hq.vpg_id("dr-vpg")

    def plan_on(site: str, session: str) -> TagPlan:
        zvm = rig.zvms[site]
        call = ToolCall("t", {}, session_id=session, started_at=rig.clock.wall())
        outcome = VpgOutcome(vpg_id, "dr-vpg", ("db-01",), site_kind="vcenter", site=site)
        vpg = zvm.get_vpg(vpg_id)
        return tagger.plan(vpg, outcome, call, deadline, client=zvm, site=site)  # type: ignore[arg-type]

    plan_on("hq", "s1")
    tag = rig.state.peek_vpg(vpg_id).tag
    assert tag is not None
    assert tag.site == "hq"
    rig.clock.advance(1)
    joined = plan_on("dr", "s2")
    tagger.check_task(joined, deadline)
    assert joined.outcome.row == Row.FAILED
    assert "the VRA did not answer" in joined.outcome.reason
    assert "get_task" in hq.calls
    assert "get_task" not in dr.calls


def test_a_tag_one_zvm_confirms_and_the_other_does_not_show_is_denied_naming_both(
    rig: EstateRig,
) -> None:
    """web-vpg is listed by hq and dr (one journal). hq shows the landed tag; dr's listing
    has no checkpoint with it (a proxy on hq's path moved the tag): deny naming both."""
    dr = rig.zvms["dr"]
    listed = dr.list_checkpoints

    def without_tags(vpg_id: str, **kw: object) -> list[object]:
        return [replace(c, tag=None) for c in listed(vpg_id, **kw)]  # type: ignore[arg-type]

    dr.list_checkpoints = without_tags  # type: ignore[method-assign]
    decision = rig.decide("web-01")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "site hq's ZVM (https://hq.zvm.test) shows tag" in decision.reason
    assert "site dr's ZVM (https://dr.zvm.test)" in decision.reason
    assert "no such checkpoint" in decision.reason
    assert "disagree" in decision.reason


def test_a_witness_that_does_not_answer_is_a_deny_naming_it(rig: EstateRig) -> None:
    """dr answered the lookup but fails on the checkpoint listing: silence is not a
    witness, so the tag hq confirmed stands unchecked and the call is denied naming dr."""
    dr = rig.zvms["dr"]

    def dark(vpg_id: str, **kw: object) -> list[object]:
        raise ZvmConnectionError("connection refused")

    dr.list_checkpoints = dark  # type: ignore[method-assign]
    decision = rig.decide("web-01")
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert "site hq's ZVM (https://hq.zvm.test) shows tag" in decision.reason
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in decision.reason
    assert "connection refused" in decision.reason
    assert "Retry the same call once site dr's ZVM answers" in decision.reason
    assert rig.tags("hq") == ["web-vpg"]
