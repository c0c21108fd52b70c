"""Journal faults: one ZVM's view of a VPG's journal parts from the others' (the guard's
second witness disagrees), set through the control plane; no sockets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zerto_rewind.sim import control, handlers
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.errors import SimError
from zerto_rewind.sim.estate import ESTATES_DIR
from zerto_rewind.sim.faults import FaultTable, parse_fault, parted_view
from zerto_rewind.sim.handlers import Context, Request
from zerto_rewind.sim.journal import AUTOMATIC, TAGGED, Checkpoint
from zerto_rewind.sim.state import Backend, World

BASE = "https://zvm.test"


class Clock:
    """A wall clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def site_contexts(clock: Clock) -> dict[str, Context]:
    """A ZVM context (backend and fault table) per site of the three-sites estate."""
    config = SimConfig(
        estate_file=ESTATES_DIR / "three-sites.json", clock=clock, jitter=0.0, seed=3
    )
    world = World(config)
    contexts = {
        name: Context(Backend(config, world=world, site=name), FaultTable(), name=name)
        for name in world.estate.zvms
    }
    for ctx in contexts.values():
        ctx.sites = contexts
    return contexts


def request(method: str, path: str, body: Any = None, **params: str) -> Request:
    raw = b"" if body is None else json.dumps(body).encode()
    return Request(method, path, {}, raw, params, BASE, via="hq")


def tagged(ctx: Context, vpg_id: str) -> list[tuple[str, str]]:
    """(checkpoint id, tag) of every tagged checkpoint the ZVM lists for the VPG."""
    answer = handlers.checkpoints_list(
        ctx, request("GET", f"/v1/vpgs/{vpg_id}/checkpoints", vpg_id=vpg_id)
    )
    return [(c["CheckpointIdentifier"], c["Tag"]) for c in answer.body if c["Tag"]]


def listed_ids(ctx: Context, vpg_id: str) -> list[str]:
    answer = handlers.checkpoints_list(
        ctx, request("GET", f"/v1/vpgs/{vpg_id}/checkpoints", vpg_id=vpg_id)
    )
    return [c["CheckpointIdentifier"] for c in answer.body]


def set_fault(ctx: Context, body: dict[str, Any]) -> Any:
    return control.faults_set(ctx, request("POST", "/_sim/faults", body)).body


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sites(clock: Clock) -> dict[str, Context]:
    """hq-web-dr (listed by hq and dr) tagged once through hq, the tag landed."""
    contexts = site_contexts(clock)
    hq = contexts["hq"].backend
    hq.tag(hq.vpg_named("hq-web-dr"), "before-change")
    clock.now += 30
    return contexts


def vpg_id(sites: dict[str, Context], name: str) -> str:
    return sites["hq"].backend.vpg_named(name).identifier


def test_hide_tags_makes_one_zvm_list_the_vpg_without_the_tag_the_other_shows(
    sites: dict[str, Context],
) -> None:
    web = vpg_id(sites, "hq-web-dr")
    assert tagged(sites["dr"], web) == tagged(sites["hq"], web) != []
    listed = set_fault(sites["dr"], {"kind": "hide_tags", "vpg": "HQ-Web-DR"})
    assert listed["vpg"] == "hq-web-dr"
    assert tagged(sites["dr"], web) == []
    assert [tag for _id, tag in tagged(sites["hq"], web)] == ["before-change"]  # hq's own table
    assert listed_ids(sites["dr"], web) == listed_ids(sites["hq"], web)  # only the tag is gone


def test_move_tags_shows_the_tag_on_the_checkpoint_before_it(sites: dict[str, Context]) -> None:
    web = vpg_id(sites, "hq-web-dr")
    [(hq_cp, tag)] = tagged(sites["hq"], web)
    set_fault(sites["dr"], {"kind": "move_tags", "vpg": "hq-web-dr"})
    ids = listed_ids(sites["hq"], web)
    assert tagged(sites["dr"], web) == [(ids[ids.index(hq_cp) - 1], tag)]


def test_a_journal_fault_acts_on_its_vpg_alone_and_for_count_listings(
    sites: dict[str, Context], clock: Clock
) -> None:
    hq = sites["hq"].backend
    hq.tag(hq.vpg_named("hq-app-azure"), "app-tag")
    clock.now += 120
    web, app = vpg_id(sites, "hq-web-dr"), vpg_id(sites, "hq-app-azure")
    set_fault(sites["hq"], {"kind": "hide_tags", "vpg": "hq-web-dr", "count": 2})
    assert tagged(sites["hq"], app) != []
    assert tagged(sites["hq"], web) == []
    assert tagged(sites["hq"], web) == []
    assert [tag for _id, tag in tagged(sites["hq"], web)] == ["before-change"]  # spent
    assert control.faults_list(sites["hq"], request("GET", "/_sim/faults")).body == []


def test_a_journal_fault_without_vpg_parts_every_vpg_until_cleared(
    sites: dict[str, Context],
) -> None:
    web = vpg_id(sites, "hq-web-dr")
    set_fault(sites["dr"], {"kind": "hide_tags"})
    assert tagged(sites["dr"], web) == []
    sites["dr"].faults.clear()
    assert [tag for _id, tag in tagged(sites["dr"], web)] == ["before-change"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "hide_tags", "route": "*"}, "only vpg and count"),
        ({"kind": "move_tags", "delay_s": 1}, "only vpg and count"),
        ({"kind": "hide_tags", "vpg": ""}, "vpg must be a VPG name"),
        ({"kind": "hide_tags", "count": 0}, "count must be a positive integer"),
        ({"kind": "hide_tags", "count": True}, "count must be a positive integer"),
    ],
)
def test_a_bad_journal_fault_is_refused_naming_the_key(body: dict[str, Any], message: str) -> None:
    with pytest.raises(SimError) as refused:
        parse_fault(body)
    assert refused.value.status == 400
    assert message in str(refused.value)


def test_a_journal_fault_on_an_unknown_vpg_is_404(sites: dict[str, Context]) -> None:
    with pytest.raises(SimError) as refused:
        set_fault(sites["dr"], {"kind": "hide_tags", "vpg": "no-such-vpg"})
    assert refused.value.status == 404
    assert sites["dr"].faults.faults == []


def test_a_journal_fault_never_answers_a_request_itself() -> None:
    """Route dispatch passes it by: only the checkpoint listing applies it."""
    table = FaultTable()
    table.add(parse_fault({"kind": "move_tags"}))
    assert table.take("checkpoints.list", "GET", "/v1/vpgs/x/checkpoints") is None
    assert table.journal_view("any-vpg") == "move_tags"


def cp(identifier: str, tag: str | None = None) -> Checkpoint:
    return Checkpoint(identifier, float(identifier), tag, TAGGED if tag else AUTOMATIC)


@pytest.mark.parametrize(
    ("listed", "moved"),
    [
        ([cp("1"), cp("2", "t")], [cp("1", "t"), cp("2")]),
        ([cp("1", "t"), cp("2")], [cp("1"), cp("2", "t")]),
        ([cp("1", "t")], [cp("1")]),
        ([cp("1"), cp("2", "a"), cp("3", "b")], [cp("1", "a"), cp("2", "b"), cp("3")]),
        ([], []),
    ],
)
def test_move_tags_puts_each_tag_on_a_neighbour(
    listed: list[Checkpoint], moved: list[Checkpoint]
) -> None:
    assert parted_view("move_tags", listed) == moved
    assert parted_view("hide_tags", listed) == [cp(c.identifier) for c in listed]
