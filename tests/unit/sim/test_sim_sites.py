"""Per-site views of a multi-site estate: one World, one Backend per ZVM site, no sockets."""

from __future__ import annotations

import pytest

from support.fakes import FakeClock
from zerto_rewind.sim import views
from zerto_rewind.sim.auth import Credentials
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.errors import SimError
from zerto_rewind.sim.estate import ESTATES_DIR, parse_estate
from zerto_rewind.sim.recovery import failover_test
from zerto_rewind.sim.state import Backend, World

BASE = "https://zvm.test"


def estate_views(clock: FakeClock) -> dict[str, Backend]:
    """A Backend per ZVM site of the packaged three-sites estate, over one World."""
    config = SimConfig(
        estate_file=ESTATES_DIR / "three-sites.json", clock=clock, jitter=0.0, seed=3
    )
    world = World(config)
    return {name: Backend(config, world=world, site=name) for name in world.estate.zvms}


@pytest.fixture
def zvms() -> dict[str, Backend]:
    return estate_views(FakeClock(1_800_000_000.0))


def test_each_zvm_shows_the_vpgs_protected_from_or_recovering_to_its_site(
    zvms: dict[str, Backend],
) -> None:
    """hq sees its two VPGs and the one recovering to it; aws only dr → aws."""
    seen = {name: sorted(v.name for v in zvm.vpgs.values()) for name, zvm in zvms.items()}
    assert seen == {
        "hq": ["dr-sql-paused", "hq-app-azure", "hq-web-dr"],
        "dr": ["dr-reports-aws", "dr-sql-paused", "hq-web-dr"],
        "azure": ["hq-app-azure"],
        "aws": ["dr-reports-aws"],
    }


def test_protected_side_sees_its_local_site_protected_recovery_side_recovering(
    zvms: dict[str, Backend],
) -> None:
    """One VPG, two views: same identifier, LocalSiteApi on the side that answers."""
    hq_row = views.vpg(zvms["hq"], BASE, zvms["hq"].vpg_named("hq-web-dr"))
    dr_row = views.vpg(zvms["dr"], BASE, zvms["dr"].vpg_named("hq-web-dr"))
    assert hq_row["VpgIdentifier"] == dr_row["VpgIdentifier"]
    assert (hq_row["ProtectedSite"]["type"], hq_row["RecoverySite"]["type"]) == (
        "LocalSiteApi",
        "PeerSiteApi",
    )
    assert (dr_row["ProtectedSite"]["type"], dr_row["RecoverySite"]["type"]) == (
        "PeerSiteApi",
        "LocalSiteApi",
    )
    hq_site = views.local_site(zvms["hq"], BASE)["SiteIdentifier"]
    assert hq_row["ProtectedSite"]["identifier"] == dr_row["ProtectedSite"]["identifier"] == hq_site
    assert (hq_row["ProtectedSiteName"], hq_row["RecoverySiteName"]) == ("hq", "dr")


def test_localsite_and_peersites_differ_per_zvm(zvms: dict[str, Backend]) -> None:
    """Each ZVM is its own local site; its peers are the sites it shares a VPG with."""
    local = {name: views.local_site(zvm, BASE) for name, zvm in zvms.items()}
    assert {name: site["SiteName"] for name, site in local.items()} == {n: n for n in zvms}
    assert local["azure"]["SiteType"] == "Azure"
    assert len({site["SiteIdentifier"] for site in local.values()}) == 4
    peers = {name: [p.name for p in zvm.peers] for name, zvm in zvms.items()}
    assert peers == {"hq": ["dr", "azure"], "dr": ["hq", "aws"], "azure": ["hq"], "aws": ["dr"]}


def test_declared_peers_replace_the_derived_ones() -> None:
    """A site's ``peers`` is its pairing list as given, even one-sided."""
    raw = {
        "sites": [
            {"name": "a", "kind": "vcenter", "zvm": True, "peers": ["b", "c"]},
            {"name": "b", "kind": "vcenter", "zvm": True, "peers": []},
            {"name": "c", "kind": "aws"},
        ],
        "vpgs": [{"name": "v", "site_kind": "vcenter", "vms": ["x"],
                  "protected_site": "a", "recovery_site": "b"}],
    }  # fmt: skip
    config = SimConfig(jitter=0.0)
    world = World(config, parse_estate(raw))
    a, b = (Backend(config, world=world, site=n) for n in ("a", "b"))
    assert [p.name for p in a.peers] == ["b", "c"]
    assert b.peers == []


def test_a_vm_in_two_vpgs_at_different_sites_is_one_vm(zvms: dict[str, Backend]) -> None:
    """app-01: two rows at hq (to dr and to azure), one at each recovery site, one identifier."""
    rows = {name: zvm.find_vms("app-01", None, None) for name, zvm in zvms.items()}
    assert sorted(vpg.name for _vm, vpg in rows["hq"]) == ["hq-app-azure", "hq-web-dr"]
    assert [vpg.name for _vm, vpg in rows["dr"]] == ["hq-web-dr"]
    assert [vpg.name for _vm, vpg in rows["azure"]] == ["hq-app-azure"]
    assert rows["aws"] == []
    assert len({vm.identifier for found in rows.values() for vm, _vpg in found}) == 1


def test_an_unseen_vpg_is_404_on_that_zvm(zvms: dict[str, Backend]) -> None:
    """aws does not know hq → azure: its API answers 404 as for any unknown VPG."""
    vpg_id = zvms["hq"].vpg_named("hq-app-azure").identifier
    with pytest.raises(SimError) as refused:
        zvms["aws"].vpg(vpg_id)
    assert refused.value.status == 404


def test_a_tag_through_the_protected_site_lands_in_the_journal_both_sides_read() -> None:
    """One journal per VPG: the recovery site lists the tag with the same checkpoint id."""
    clock = FakeClock(1_800_000_000.0)
    zvms = estate_views(clock)
    vpg = zvms["hq"].vpg(zvms["hq"].vpg_named("hq-web-dr").identifier)
    task = zvms["hq"].tag(vpg, "before-change")
    clock.now += 30
    tagged = {
        name: [(c.identifier, c.tag) for c in zvms[name].checkpoints(vpg, None, None) if c.tag]
        for name in ("hq", "dr")
    }
    assert tagged["hq"] == tagged["dr"]
    assert [tag for _id, tag in tagged["dr"]] == ["before-change"]
    assert task.identifier.endswith(f".{zvms['hq'].local.identifier}")
    assert zvms["dr"].tasks.get(task.identifier) is None  # tasks are the ZVM's own
    assert zvms["hq"].stats.tag_requests["hq-web-dr"] == 1
    assert zvms["dr"].stats.tag_requests == {}


def test_the_recovery_site_refuses_a_tag_by_default(zvms: dict[str, Backend]) -> None:
    """tag_accepted_by "protected": dr answers 400 naming the site to use; nothing lands."""
    vpg = zvms["dr"].vpg_named("hq-web-dr")
    with pytest.raises(SimError) as refused:
        zvms["dr"].tag(vpg, "from-dr")
    assert refused.value.status == 400
    assert refused.value.body == {
        "Message": "Cannot insert a checkpoint on VPG 'hq-web-dr' from site 'dr':"
        " use the ZVM of its protected site 'hq'"
    }
    assert vpg.journal.tags == []


@pytest.mark.parametrize(
    ("side", "accepted_at"),
    [("protected", {"hq"}), ("recovery", {"dr"}), ("both", {"hq", "dr"})],
)
def test_which_side_takes_a_tag_is_an_estate_setting(side: str, accepted_at: set[str]) -> None:
    """tag_accepted_by chooses the ZVM(s) that accept a tag on a paired VPG."""
    accepted = set()
    for name in ("hq", "dr"):
        zvms = _with_sides(tag_accepted_by=side)
        vpg = zvms[name].vpg_named("hq-web-dr")
        try:
            zvms[name].tag(vpg, "t")
        except SimError:
            continue
        accepted.add(name)
    assert accepted == accepted_at


def test_which_side_runs_recovery_operations_is_an_estate_setting() -> None:
    """recovery_accepted_by "recovery": a failover test from the protected site is refused."""
    zvms = _with_sides(recovery_accepted_by="recovery")
    vpg = zvms["hq"].vpg_named("hq-web-dr")
    with pytest.raises(SimError, match="use the ZVM of its recovery site 'dr'"):
        failover_test(zvms["hq"], vpg, {})
    assert failover_test(zvms["dr"], vpg, {}).type == "FailOverTest"
    assert vpg.test is not None


def test_a_reset_through_one_zvm_resets_the_estate_for_all() -> None:
    """The estate is shared: a reset rebuilds it, and every ZVM then sees the new objects."""
    zvms = estate_views(FakeClock(1_800_000_000.0))
    hq, dr = zvms["hq"], zvms["dr"]
    before = dr.vpg_named("hq-web-dr")
    hq.tag(hq.vpg_named("hq-web-dr"), "t")
    hq.reset()
    after = dr.vpgs[before.identifier]
    assert after is not before
    assert after is hq.vpgs[before.identifier]
    assert hq.stats.tag_requests == {}


def test_a_zvm_keeps_its_own_credentials() -> None:
    """Each site's token store checks that site's client and secret only."""
    config = SimConfig(estate_file=ESTATES_DIR / "three-sites.json")
    world = World(config)
    dr_creds = Credentials("dr-client", "dr-secret", "admin", "dr-password")
    hq = Backend(config, world=world, site="hq")
    dr = Backend(config, world=world, site="dr", credentials=dr_creds)
    form = {"grant_type": "client_credentials", "client_id": "dr-client"}
    assert dr.tokens.grant(form | {"client_secret": "dr-secret"})["token_type"] == "Bearer"
    with pytest.raises(SimError) as refused:
        hq.tokens.grant(form | {"client_secret": "dr-secret"})
    assert refused.value.status == 401
    assert hq.tokens.credentials.client_id == config.client_id


def _with_sides(**sides: str) -> dict[str, Backend]:
    """The three-sites estate with the accepting sides changed."""
    config = SimConfig(jitter=0.0, seed=3)
    raw = {
        "sites": [
            {"name": "hq", "kind": "vcenter", "zvm": True},
            {"name": "dr", "kind": "vcenter", "zvm": True},
        ],
        "vpgs": [{"name": "hq-web-dr", "site_kind": "vcenter", "vms": ["web-01"],
                  "protected_site": "hq", "recovery_site": "dr"}],
        **sides,
    }  # fmt: skip
    world = World(config, parse_estate(raw))
    return {name: Backend(config, world=world, site=name) for name in ("hq", "dr")}
