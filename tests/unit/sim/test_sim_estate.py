"""Estate specs: the default estate and generated VPGs."""

from __future__ import annotations

import pytest

from zerto_rewind.sim.estate import EstateError, default_estate, generated_vpgs, parse_estate


def test_default_estate_names() -> None:
    """The built-in estate has the seed's VPGs and a VM in two VPGs."""
    names = {vpg.name: vpg for vpg in default_estate().vpgs}
    assert set(names) == {
        "jp-local", "CMH-AWS-1", "EUS-AZ-1", "paused-vpg", "multi-a", "multi-b", "syncing-vpg",
    }  # fmt: skip
    assert names["CMH-AWS-1"].site_kind == "aws"
    assert names["paused-vpg"].sub_status == 25


def test_generated_vpgs_group_vms() -> None:
    """--vms N with per-VPG grouping names VMs vm-00001… and VPGs vpg-00001…."""
    specs = generated_vpgs(25, per_vpg=10)
    assert [len(s.vms) for s in specs] == [10, 10, 5]
    assert specs[0].vms[0] == "vm-00001"
    assert specs[2].name == "vpg-00003"


def test_duplicate_vpg_name_is_refused() -> None:
    """Two VPGs with the same name (any case) are refused, naming the second."""
    raw = {"vpgs": [{"name": "a", "site_kind": "aws", "vms": ["x"]}] * 2}
    with pytest.raises(EstateError, match=r"vpgs\[1\].name"):
        parse_estate(raw)


def test_unknown_site_reference_is_refused() -> None:
    """protected_site must name a declared site."""
    raw = {"vpgs": [{"name": "a", "site_kind": "aws", "vms": ["x"], "protected_site": "nope"}]}
    with pytest.raises(EstateError, match=r"vpgs\[0\].protected_site"):
        parse_estate(raw)


def test_protected_site_must_match_site_kind() -> None:
    """A protected_site of another kind than site_kind is refused."""
    raw = {
        "sites": [{"name": "east", "kind": "azure"}],
        "vpgs": [{"name": "a", "site_kind": "aws", "vms": ["x"], "protected_site": "east"}],
    }
    with pytest.raises(EstateError, match=r"vpgs\[0\].protected_site: 'east' is a azure site"):
        parse_estate(raw)
