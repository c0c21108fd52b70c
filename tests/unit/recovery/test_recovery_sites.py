"""The recovery library over several ZVMs: which site's ZVM each tool speaks to
(reads, recovery.via), and every dark-site case naming the site, never "not protected".

Fake per-site clients over the simulator's backends (hq and dr of PAIRED_ESTATES):
web-vpg hq -> dr (web-01), dr-vpg dr -> hq (db-01), hq-only hq -> aws (app-01, aws has no
ZVM in the config), dr-own dr -> hq (web-01b, listed by dr only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unit.core.guard_fakes import DR_ESTATE, HQ_ESTATE, TOOL, EstateRig, SimZvm
from zerto_rewind.core.decision import Outcome, Row, ToolCall
from zerto_rewind.errors import NotFound, ZvmConnectionError, ZvmError
from zerto_rewind.recovery.failover import start_failover_test
from zerto_rewind.recovery.plan import recovery_plan
from zerto_rewind.recovery.preview import preview_call
from zerto_rewind.recovery.protection import checkpoint_listing, protection_status
from zerto_rewind.recovery.sites import locate
from zerto_rewind.sim import recovery as sim_recovery
from zerto_rewind.sim import views
from zerto_rewind.zvm.models import Checkpoint, Task


class RecoveringZvm(SimZvm):
    """A site's fake client that also runs the failover test (the simulator's own rules)."""

    def failover_test(self, vpg_id: str, checkpoint_id: str, vm_ids: list[str], **_: Any) -> str:
        self._check()
        self.calls.append(f"failover_test {self.name_of(vpg_id)}")
        body: dict[str, Any] = {"checkpointidentifier": checkpoint_id, "vmidentifiers": vm_ids}
        return sim_recovery.failover_test(self.backend, self.backend.vpg(vpg_id), body).identifier

    def wait_for_task(self, task_id: str, *, deadline: float | None, poll_s: float = 0.5) -> Task:
        return self.get_task(task_id, deadline=deadline)

    def checkpoint_stats(
        self, vpg_id: str, *, deadline: float | None = None
    ) -> tuple[Checkpoint | None, Checkpoint | None]:
        listed = self.list_checkpoints(vpg_id)
        return (listed[0], listed[-1]) if listed else (None, None)


def recovering(rig: EstateRig) -> EstateRig:
    """The rig with every site's client able to run a failover test."""
    for site, zvm in list(rig.zvms.items()):
        rig.zvms[site] = RecoveringZvm(zvm.backend, url=zvm.settings.url)
    return rig


@pytest.fixture
def rig(tmp_path: Path) -> EstateRig:
    return recovering(EstateRig(tmp_path))


def sites_of(rig: EstateRig, vm: str, **kwargs: Any) -> list[tuple[str, str | None]]:
    located = locate(rig.guard(), vm, deadline=None, **kwargs)
    return [(p.ref.vpg_name, p.site) for p in located.places]


def test_reads_go_to_the_protected_site(rig: EstateRig) -> None:
    assert sites_of(rig, "web-01") == [("web-vpg", "hq")]
    assert sites_of(rig, "db-01") == [("dr-vpg", "dr")]


def test_a_read_falls_back_to_the_recovery_site_when_the_protected_one_is_dark(
    rig: EstateRig,
) -> None:
    rig.guard().sites().local_id("hq", rig.zvms["hq"], None)  # hq's identity, while it answers
    rig.zvms["hq"].fault = ZvmConnectionError("connection refused")
    located = locate(rig.guard(), "web-01", deadline=None)
    assert [(p.ref.vpg_name, p.site) for p in located.places] == [("web-vpg", "dr")]
    assert any("site hq did not answer" in n for n in located.notes())


def test_recovery_goes_to_the_recovery_site_by_default(rig: EstateRig) -> None:
    assert rig.settings.recovery_via == "recovery"
    assert sites_of(rig, "web-01", purpose="recover") == [("web-vpg", "dr")]
    assert sites_of(rig, "db-01", purpose="recover") == [("dr-vpg", "hq")]


def test_recovery_via_protected_goes_to_the_protected_site(rig: EstateRig) -> None:
    rig.settings.recovery_via = "protected"
    assert sites_of(rig, "web-01", purpose="recover") == [("web-vpg", "hq")]


def test_a_recovery_site_without_a_zvm_in_the_config_is_refused_saying_so(
    rig: EstateRig,
) -> None:
    with pytest.raises(ZvmError) as caught:
        locate(rig.guard(), "app-01", deadline=None, purpose="recover")
    text = str(caught.value)
    assert "VPG 'hq-only'" in text
    assert "not one of the guard's ZVMs" in text
    assert '"via": "protected"' in text


def test_a_dark_recovery_site_is_named_when_recovering(rig: EstateRig) -> None:
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    with pytest.raises(ZvmError) as caught:
        locate(rig.guard(), "web-01", deadline=None, purpose="recover")
    text = str(caught.value)
    assert "may be site dr, whose ZVM did not answer" in text
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in text
    assert "not protected" not in text


def test_a_vm_only_a_dark_site_knows_is_an_error_naming_it_not_unknown(rig: EstateRig) -> None:
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    with pytest.raises(ZvmError) as caught:
        protection_status(rig.guard(), rig.settings, "web-01b")
    assert not isinstance(caught.value, NotFound)
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in str(caught.value)
    assert "Zerto may well protect it" in str(caught.value)


def test_a_vm_no_zvm_knows_when_all_answered_is_not_found_naming_every_site(
    rig: EstateRig,
) -> None:
    with pytest.raises(NotFound) as caught:
        protection_status(rig.guard(), rig.settings, "nowhere-01")
    assert "site hq (https://hq.zvm.test), site dr (https://dr.zvm.test)" in str(caught.value)


def test_status_and_checkpoints_name_each_vpgs_site(rig: EstateRig) -> None:
    rig.clock.advance(60)
    status = protection_status(rig.guard(), rig.settings, "db-01")
    assert [(v.vpg, v.zvm_site, v.zvm_url) for v in status.vpgs] == [
        ("dr-vpg", "dr", "https://dr.zvm.test")
    ]
    assert status.notes == []
    listing = checkpoint_listing(rig.guard(), "db-01", since="1d", now=rig.clock.wall())
    assert [(g.vpg, g.zvm_site) for g in listing.vpgs] == [("dr-vpg", "dr")]
    assert "list_checkpoints dr-vpg" in rig.zvms["dr"].calls
    assert "list_checkpoints dr-vpg" not in rig.zvms["hq"].calls


def test_a_failover_test_runs_on_the_recovery_sites_zvm_and_says_so(rig: EstateRig) -> None:
    rig.clock.advance(60)
    vpg = rig.zvms["hq"].backend.vpg_named("web-vpg")
    checkpoint = views.checkpoint(rig.zvms["hq"].backend.checkpoints(vpg, None, None)[-1])
    result = start_failover_test(rig.guard(), "web-01", checkpoint["CheckpointIdentifier"])
    assert (result.zvm_site, result.zvm_url) == ("dr", "https://dr.zvm.test")
    assert "the ZVM of site dr (https://dr.zvm.test)" in result.summary
    assert "failover_test web-vpg" in rig.zvms["dr"].calls
    assert not any(c.startswith("failover_test") for c in rig.zvms["hq"].calls)


def test_the_plan_names_the_zvm_read_and_the_one_operations_would_use(rig: EstateRig) -> None:
    rig.clock.advance(60)
    vpg = rig.zvms["hq"].backend.vpg_named("web-vpg")
    checkpoint = views.checkpoint(rig.zvms["hq"].backend.checkpoints(vpg, None, None)[-1])
    plan = recovery_plan(rig.guard(), rig.settings, "web-01", checkpoint["CheckpointIdentifier"])
    assert plan.zvm_site == "hq"
    assert plan.operations_zvm is not None
    assert plan.operations_zvm.startswith("the ZVM of site dr (https://dr.zvm.test)")
    assert "UNCONFIRMED" in plan.operations_zvm


def test_the_plan_marks_operations_unavailable_when_no_zvm_can_run_them(rig: EstateRig) -> None:
    rig.clock.advance(60)
    vpg = rig.zvms["hq"].backend.vpg_named("hq-only")
    checkpoint = views.checkpoint(rig.zvms["hq"].backend.checkpoints(vpg, None, None)[-1])
    plan = recovery_plan(
        rig.guard(), rig.settings, "app-01", checkpoint["CheckpointIdentifier"], vpg="hq-only"
    )
    assert plan.operations_zvm is not None
    assert plan.operations_zvm.startswith("none:")
    assert all(not o.available for o in plan.options)
    assert all("no ZVM can run it" in (o.unavailable_reason or "") for o in plan.options)


def test_the_preview_names_the_site_that_would_tag(rig: EstateRig) -> None:
    guard = rig.guard()
    check = preview_call(rig.settings, guard, rig.state, TOOL, {"name": "db-01"})
    assert [(v.vpg, v.zvm_site) for v in check.vpgs] == [("dr-vpg", "dr")]
    assert not any(c.startswith("tag ") for z in rig.zvms.values() for c in z.calls)


def test_the_preview_denies_a_vm_a_dark_site_may_hold_naming_it(rig: EstateRig) -> None:
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    check = preview_call(rig.settings, rig.guard(), rig.state, TOOL, {"name": "web-01b"})
    assert (check.row, check.outcome) == (Row.ERROR, Outcome.DENY)
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in check.summary
    assert check.unknown_vms == []


def test_the_preview_asks_for_a_vm_one_site_lists_while_another_is_dark(rig: EstateRig) -> None:
    """As the guard: hq lists web-01, dr is dark and may hold a twin: site_unknown, no tag."""
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    check = preview_call(rig.settings, rig.guard(), rig.state, TOOL, {"name": "web-01"})
    assert (check.row, check.outcome) == (Row.SITE_UNKNOWN, Outcome.PROMPT)
    assert "site dr (the ZVM at https://dr.zvm.test) did not answer" in check.summary
    assert check.vpgs == []
    assert rig.guard().decide(call_of(rig, "web-01")).row == Row.SITE_UNKNOWN


def call_of(rig: EstateRig, vm: str) -> ToolCall:
    return ToolCall(TOOL, {"name": vm}, session_id="s", started_at=rig.clock.wall())


def test_the_preview_denies_a_vpg_protected_from_a_dark_site(rig: EstateRig) -> None:
    rig.guard().sites().local_id("dr", rig.zvms["dr"], None)
    rig.zvms["dr"].fault = ZvmConnectionError("connection refused")
    check = preview_call(rig.settings, rig.guard(), rig.state, TOOL, {"name": "db-01"})
    assert (check.row, check.outcome) == (Row.FAILED, Outcome.DENY)
    assert "VPG 'dr-vpg' is protected from site dr" in check.summary


def test_a_vpg_no_zvm_can_recover_is_named_when_chosen_not_called_unprotected(
    tmp_path: Path,
) -> None:
    """web-01 also in web-to-aws (hq -> aws, no aws ZVM): choosing it names why it is left out."""
    to_aws = {**HQ_ESTATE["vpgs"][0], "name": "web-to-aws", "recovery_site": "aws"}
    hq = {**HQ_ESTATE, "vpgs": [*HQ_ESTATE["vpgs"], to_aws]}
    rig = recovering(EstateRig(tmp_path, {"hq": hq, "dr": DR_ESTATE}))
    assert sites_of(rig, "web-01", purpose="recover") == [("web-vpg", "dr")]
    with pytest.raises(ZvmError) as caught:
        start_failover_test(rig.guard(), "web-01", "1", vpg="web-to-aws")
    assert "VPG 'web-to-aws' of VM 'web-01' cannot be handled now" in str(caught.value)
    assert "not one of the guard's ZVMs" in str(caught.value)
