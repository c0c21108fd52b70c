"""An allow never rests on the state directory alone (issue 11, "forge state").

The state directory belongs to the agent's own user on a standalone install, so a
"landed" tag recorded there is only reused once the ZVM journal bears it out. These
tests forge such records the way an agent would: by writing the JSON file that
GuardState writes, then show that the next mutating call is not allowed on it.

Records carry a MAC (``record_mac``). Most forgeries below are sealed with the
state's own key, as an agent that owns a standalone state directory (and so its
key) can: the journal check must hold even then. Those without the key are read
as absent (the last tests here).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from unit.core.guard_fakes import Rig
from zerto_rewind.core.decision import Outcome, Row
from zerto_rewind.core.state import _safe_name

FORGED_TAG = "zerto-rewind mcp__vsphere__power_off_vm jp-ubuntu s=forged 2027-01-15T07:59:00Z"


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path, timeout_s=20.0)


def forge(rig: Rig, vpg_name: str, *, sealed: bool = True, **tag: Any) -> str:
    """Write a VPG record whose tag 'landed' a second ago and covers any call
    (with a valid MAC when ``sealed``: the forger holds the key)."""
    vpg_id = rig.zvm.vpg_id(vpg_name)
    now = rig.clock.wall()
    record = {
        "vpg_id": vpg_id,
        "vpg_name": vpg_name,
        "allowed_since_landing": 0,
        "tag": {
            "name": FORGED_TAG,
            "requested_at": now - 60.0,
            "expected_at": now - 55.0,
            "overdue_at": now + 3600.0,
            "state": "landed",
            "checkpoint_id": "forged-checkpoint",
            "landed_at": now - 1.0,
            **tag,
        },
    }
    if sealed:
        record = rig.state.mac.seal("vpg", vpg_id, record)
    path = os.path.join(rig.settings.state_dir, "vpgs", f"{_safe_name(vpg_id)}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    return vpg_id


def test_a_forged_landed_record_is_not_reused_the_call_is_tagged_anew(rig: Rig) -> None:
    vpg_id = forge(rig, "jp-local")
    decision = rig.decide("jp-ubuntu")
    # Confirmed, but on a tag the guard requested and saw land now, never on the forgery.
    assert (decision.row, decision.outcome) == (Row.CONFIRMED, Outcome.CONTEXT)
    out = decision.vpgs[0]
    assert out.tag != FORGED_TAG
    assert out.checkpoint_id != "forged-checkpoint"
    assert out.tag in rig.zvm.tags("jp-local")
    assert rig.zvm.tag_requests("jp-local") == 1
    assert "forged-checkpoint" not in decision.context
    record = rig.state.peek_vpg(vpg_id)
    assert record.history[-1]["name"] == FORGED_TAG
    assert record.history[-1]["state"] == "failed"


def test_a_forged_record_on_a_slow_vpg_gives_pending_never_allow(rig: Rig) -> None:
    """AWS cadence: the new tag cannot land within the budget, so pending, not an allow."""
    forge(rig, "CMH-AWS-1")
    decision = rig.decide("win2019-1")
    assert (decision.row, decision.outcome) == (Row.PENDING, Outcome.DENY)
    assert decision.vpgs[0].tag != FORGED_TAG
    assert rig.zvm.tag_requests("CMH-AWS-1") == 1


def test_a_real_tag_with_a_forged_checkpoint_id_is_not_reused(rig: Rig) -> None:
    first = rig.decide("jp-ubuntu", consume=False)  # a real landed tag, unused
    assert first.row == Row.CONFIRMED
    forge(rig, "jp-local", name=first.vpgs[0].tag)  # same name, wrong checkpoint id
    rig.clock.advance(2.0)
    decision = rig.decide("jp-ubuntu")
    assert decision.row == Row.CONFIRMED
    assert decision.vpgs[0].tag != first.vpgs[0].tag
    assert rig.zvm.tag_requests("jp-local") == 2


def test_an_older_real_tag_made_to_look_unused_is_not_reused(rig: Rig) -> None:
    """The record is rolled back to an earlier real tag; the journal shows a later guard
    tag, so calls were allowed since it: tag again."""
    old = rig.decide("jp-ubuntu").vpgs[0]
    rig.clock.advance(10.0)
    assert rig.decide("jp-ubuntu").vpgs[0].tag != old.tag  # a second tag, used
    rig.clock.advance(10.0)
    forge(
        rig,
        "jp-local",
        name=old.tag,
        checkpoint_id=old.checkpoint_id,
        requested_at=old.requested_at,
        landed_at=old.landed_at,
    )
    decision = rig.decide("jp-ubuntu")
    assert decision.row == Row.CONFIRMED
    assert decision.vpgs[0].tag != old.tag
    assert rig.zvm.tag_requests("jp-local") == 3


def test_a_genuine_reuse_costs_one_checkpoint_listing_and_no_tag(rig: Rig) -> None:
    confirmed = rig.decide("jp-ubuntu", consume=False)
    rig.clock.advance(5.0)
    before = list(rig.zvm.calls)
    change = rig.decide("jp-ubuntu")
    calls = rig.zvm.calls[len(before) :]
    assert change.row == Row.CONFIRMED
    assert change.vpgs[0].tag == confirmed.vpgs[0].tag
    assert calls.count("list_checkpoints jp-local") == 1
    assert not any(c.startswith("tag ") for c in calls)


# --------------------------------------------------------------- without the key: absent


def test_a_forged_record_without_the_key_is_absent_and_the_call_is_tagged_anew(rig: Rig) -> None:
    vpg_id = forge(rig, "jp-local", sealed=False)
    assert rig.state.peek_vpg(vpg_id).tag is None  # read as absent, not as landed
    decision = rig.decide("jp-ubuntu")
    assert (decision.row, decision.outcome) == (Row.CONFIRMED, Outcome.CONTEXT)
    assert decision.vpgs[0].tag != FORGED_TAG
    assert decision.vpgs[0].checkpoint_id != "forged-checkpoint"
    assert rig.zvm.tag_requests("jp-local") == 1
    assert all(h.get("name") != FORGED_TAG for h in rig.state.peek_vpg(vpg_id).history)


def test_a_genuine_record_changed_by_one_field_is_absent(rig: Rig) -> None:
    first = rig.decide("jp-ubuntu", consume=False)
    vpg_id = rig.zvm.vpg_id("jp-local")
    path = os.path.join(rig.settings.state_dir, "vpgs", f"{_safe_name(vpg_id)}.json")
    with open(path, encoding="utf-8") as fh:
        record = json.load(fh)
    assert record["tag"]["state"] == "landed"
    record["allowed_since_landing"] = 0
    record["tag"]["landed_at"] += 0.5  # the MAC is still the genuine one
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    assert rig.state.peek_vpg(vpg_id).tag is None
    rig.clock.advance(2.0)
    decision = rig.decide("jp-ubuntu")
    assert decision.row == Row.CONFIRMED
    assert decision.vpgs[0].tag != first.vpgs[0].tag
    assert rig.zvm.tag_requests("jp-local") == 2
