"""VM names match Zerto's exactly, as the VM server matches them; a name Zerto lists for
several VMs is ambiguous. Over the simulator's backend (guard_fakes), no sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unit.core.guard_fakes import Rig
from zerto_rewind.core.decision import Outcome, Row, VmIdentity

NBSP = "\u00a0"


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path, timeout_s=20.0)


def estate_rig(tmp_path: Path, vpgs: list[dict[str, object]]) -> Rig:
    path = tmp_path / "estate.json"
    path.write_text(json.dumps({"vpgs": vpgs}), encoding="utf-8")
    return Rig(tmp_path, sim={"estate_file": path})


@pytest.mark.parametrize(
    "twin", ["JP-Ubuntu", "jp-ubuntu" + NBSP, " jp-ubuntu", "jp-ubuntu ", "jp-ubuntu\t"]
)
def test_a_name_that_differs_only_by_case_or_whitespace_is_an_unknown_vm(
    rig: Rig, twin: str
) -> None:
    """mcvsphere takes the first exact match: the twin is another VM, so no checkpoint of
    jp-local's VPG may stand in for it."""
    decision = rig.decide(twin)
    assert (decision.row, decision.outcome) == (Row.VM_UNKNOWN, Outcome.PROMPT)
    assert decision.vms == (twin,)
    assert rig.zvm.tag_requests("jp-local") == 0


def test_the_exact_name_is_confirmed_with_zertos_vm_identity(rig: Rig) -> None:
    decision = rig.decide("jp-ubuntu")
    assert decision.row == Row.CONFIRMED
    identity = decision.identities["jp-ubuntu"]
    assert identity.vm_id.endswith(".vm-101")
    assert decision.vm_args == {"jp-ubuntu": "jp-ubuntu"}


def test_a_name_zerto_lists_for_two_vms_is_ambiguous_and_prompts(tmp_path: Path) -> None:
    """vCenter allows one name in two folders; Zerto lists both, with distinct identifiers."""
    rig = estate_rig(
        tmp_path,
        [
            {
                "name": "vpg-a",
                "site_kind": "vcenter",
                "vms": [{"name": "web", "vcenter_id": "vm-42"}],
            },
            {
                "name": "vpg-b",
                "site_kind": "vcenter",
                "vms": [{"name": "web", "vcenter_id": "vm-43"}],
            },
        ],
    )
    decision = rig.decide("web")
    assert (decision.row, decision.outcome) == (Row.VM_AMBIGUOUS, Outcome.PROMPT)
    assert "'web'" in decision.reason
    assert "several VMs" in decision.reason
    assert ".vm-42" in decision.reason
    assert ".vm-43" in decision.reason
    assert rig.zvm.tag_requests("vpg-a") == rig.zvm.tag_requests("vpg-b") == 0
    again = rig.decide("web")  # from the cache: still ambiguous
    assert again.row == Row.VM_AMBIGUOUS
    assert rig.zvm.calls.count("find_vms web") == 1


def test_one_vm_in_two_vpgs_is_not_ambiguous(rig: Rig) -> None:
    """multi-1 is one VM (one identifier) that two VPGs protect: both are tagged."""
    decision = rig.decide("multi-1")
    assert decision.row == Row.CONFIRMED
    assert sorted(v.vpg_name for v in decision.vpgs) == ["multi-a", "multi-b"]


def test_zerto_twins_by_case_are_two_vms_each_matched_exactly(tmp_path: Path) -> None:
    rig = estate_rig(
        tmp_path,
        [
            {
                "name": "upper",
                "site_kind": "vcenter",
                "vms": [{"name": "Web", "vcenter_id": "vm-7"}],
            },
            {
                "name": "lower",
                "site_kind": "vcenter",
                "vms": [{"name": "web", "vcenter_id": "vm-8"}],
            },
        ],
    )
    upper, lower = rig.decide("Web"), rig.decide("web")
    assert [v.vpg_name for v in upper.vpgs] == ["upper"]
    assert [v.vpg_name for v in lower.vpgs] == ["lower"]
    assert upper.identities["Web"] == VmIdentity(upper.identities["Web"].vm_id, None)
    assert upper.identities["Web"].vm_id.endswith(".vm-7")
    assert lower.identities["web"].vm_id.endswith(".vm-8")


def test_the_prompt_shows_a_hidden_character_to_the_approver(rig: Rig) -> None:
    """Printed bare, ``jp-ubuntu`` + NBSP would read as the protected VM."""
    decision = rig.decide("jp-ubuntu" + NBSP)
    assert "no VPG protects 'jp-ubuntu\\xa0' (" in decision.reason
    plain = rig.decide("JP-Ubuntu")
    assert "no VPG protects JP-Ubuntu (" in plain.reason
