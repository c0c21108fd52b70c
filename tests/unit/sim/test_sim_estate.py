"""Estate specs: the default estate and generated VPGs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.sim.estate import (
    ESTATES_DIR,
    EstateError,
    default_estate,
    estate_path,
    generated_sites,
    generated_vpgs,
    load_estate,
    parse_estate,
)


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


def _three(**top: Any) -> dict[str, Any]:
    """Two vCenter sites with ZVMs, one AWS site without, and a VPG each way."""
    raw: dict[str, Any] = {
        "sites": [
            {"name": "hq", "kind": "vcenter", "zvm": True},
            {"name": "dr", "kind": "vcenter", "zvm": True, "client_id": "dr-client"},
            {"name": "aws", "kind": "aws"},
        ],
        "vpgs": [
            {"name": "a", "site_kind": "vcenter", "vms": ["x"],
             "protected_site": "hq", "recovery_site": "dr"},
            {"name": "b", "site_kind": "vcenter", "vms": ["y"],
             "protected_site": "dr", "recovery_site": "aws"},
        ],
    }  # fmt: skip
    raw.update(top)
    return raw


def test_zvm_sites_make_a_multi_site_estate() -> None:
    """``"zvm": true`` sites are the estate's ZVMs in file order; the first is ``local``."""
    estate = parse_estate(_three())
    assert estate.multi_site
    assert estate.zvms == ("hq", "dr")
    assert estate.local.name == "hq"
    assert [p.name for p in estate.peers] == ["dr", "aws"]
    assert estate.site("DR").client_id == "dr-client"
    assert (estate.tag_accepted_by, estate.recovery_accepted_by) == ("protected", "both")


def test_an_estate_without_zvm_sites_is_the_one_zvm_estate_of_before() -> None:
    """No ``"zvm": true``: one ZVM at local_site (default zvm-local), sites are its peers."""
    estate = parse_estate({"sites": [{"name": "aws", "kind": "aws", "zvm": False}], "vpgs": []})
    assert not estate.multi_site
    assert estate.zvms == ()
    assert estate.local.name == "zvm-local"
    assert [p.name for p in estate.peers] == ["aws"]


def test_accepting_sides_are_read_and_checked() -> None:
    """tag_accepted_by / recovery_accepted_by take protected, recovery or both."""
    estate = parse_estate(_three(tag_accepted_by="both", recovery_accepted_by="recovery"))
    assert (estate.tag_accepted_by, estate.recovery_accepted_by) == ("both", "recovery")
    with pytest.raises(EstateError, match=r"tag_accepted_by: must be one of protected, recovery"):
        parse_estate(_three(tag_accepted_by="either"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(local_site={"name": "x", "kind": "vcenter"}), r"^local_site: not with"),
        (lambda r: r["vpgs"][0].pop("recovery_site"), r"vpgs\[0\]\.recovery_site: required"),
        (lambda r: r["vpgs"][1].update(protected_site="aws", site_kind="aws",
                                       recovery_site="aws"), r"vpgs\[1\]: neither"),
        (lambda r: r["sites"][2].update(client_id="c"), r"sites\[2\]\.client_id: only for a site"),
        (lambda r: r["sites"][0].update(peers=["hq"]), r"sites\[0\]\.peers: 'hq' is not another"),
        (lambda r: r["sites"][0].update(peers=["nowhere"]), r"sites\[0\]\.peers: 'nowhere'"),
        (lambda r: r["sites"][0].update(zvm="yes"), r"sites\[0\]\.zvm: must be true or false"),
        (lambda r: r["sites"].append({"name": "HQ", "kind": "aws"}), r"names must be unique"),
    ],
)  # fmt: skip
def test_multi_site_estate_errors_name_the_key(change: Any, message: str) -> None:
    """Each mistake in a multi-site estate is refused with the key that is wrong."""
    raw = _three()
    change(raw)
    with pytest.raises(EstateError, match=message):
        parse_estate(raw)


def test_accepting_sides_need_zvm_sites() -> None:
    """tag_accepted_by means nothing to a one-ZVM estate, so it is refused there."""
    with pytest.raises(EstateError, match=r'tag_accepted_by: only for an estate with "zvm"'):
        parse_estate({"vpgs": [], "tag_accepted_by": "both"})


def test_packaged_three_sites_estate_loads_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``three-sites`` is the packaged estate unless the working directory has that file."""
    monkeypatch.chdir(tmp_path)
    estate = load_estate(Path("three-sites"))
    assert estate.zvms == ("hq", "dr", "azure", "aws")
    assert load_estate(Path("three-sites.json")) == estate
    assert estate_path(Path("three-sites")) == ESTATES_DIR / "three-sites.json"
    (tmp_path / "three-sites").write_text(json.dumps({"vpgs": []}))
    assert not load_estate(Path("three-sites")).multi_site


def test_three_sites_estate_has_the_documented_pairs() -> None:
    """HQ → DR, HQ → Azure, DR → AWS, and app-01 in two VPGs that recover to different sites."""
    estate = load_estate(ESTATES_DIR / "three-sites.json")
    pairs = {v.name: (v.protected_site, v.recovery_site) for v in estate.vpgs}
    assert set(pairs.values()) >= {("hq", "dr"), ("hq", "azure"), ("dr", "aws")}
    holding = [v for v in estate.vpgs if "app-01" in v.vms]
    assert {(v.protected_site, v.recovery_site) for v in holding} == {("hq", "dr"), ("hq", "azure")}


def test_generated_vpgs_of_a_multi_site_estate_go_from_the_first_zvm() -> None:
    """--vms in a multi-site estate: VPGs from the first ZVM site to the next site."""
    estate = parse_estate(_three())
    between = generated_sites(estate)
    assert between is not None
    (spec,) = generated_vpgs(1, between=between)
    assert (spec.protected_site, spec.recovery_site, spec.site_kind) == ("hq", "dr", "vcenter")
    assert generated_sites(default_estate()) is None
