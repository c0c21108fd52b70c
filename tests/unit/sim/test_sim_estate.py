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


def test_vm_entries_may_give_a_vcenter_identity_beside_plain_names() -> None:
    """``{"name", "vcenter_id", "instance_uuid"}`` gives the VM the identity a test needs
    (e.g. vcsim's moref); plain names keep working and names are kept exactly."""
    raw = {
        "vpgs": [
            {
                "name": "a",
                "site_kind": "vcenter",
                "vms": [
                    "plain",
                    {"name": "web\u00a0", "vcenter_id": "vm-42", "instance_uuid": "5012-ab"},
                ],
            },
            {"name": "b", "site_kind": "vcenter", "vms": ["x"]},
        ]
    }
    a, b = parse_estate(raw).vpgs
    assert a.vms == ("plain", "web\u00a0")
    assert [(v.name, v.vcenter_id, v.instance_uuid) for v in a.entries()] == [
        ("plain", None, None),
        ("web\u00a0", "vm-42", "5012-ab"),
    ]
    assert b.vm_specs == ()
    assert [v.name for v in b.entries()] == ["x"]


@pytest.mark.parametrize(
    ("vm", "where"),
    [
        ({"vcenter_id": "vm-1"}, r"vms\[0\].name"),
        ({"name": "w", "vcenter_id": "x.vm-1"}, r"vms\[0\].vcenter_id"),
        ({"name": "w", "moref": "vm-1"}, r"vms\[0\].moref: unknown key"),
        ({"name": "w", "vcenter_id": 42}, r"vms\[0\].vcenter_id: wrong type"),
        (7, r"vms\[0\]: must be a VM name or an object"),
    ],
)
def test_a_bad_vm_entry_is_refused_naming_its_key(vm: object, where: str) -> None:
    raw = {"vpgs": [{"name": "a", "site_kind": "vcenter", "vms": [vm]}]}
    with pytest.raises(EstateError, match=where):
        parse_estate(raw)
