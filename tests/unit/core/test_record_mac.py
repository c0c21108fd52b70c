"""The MAC on the state's records: any change, a copy under another id, or no MAC is absent."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.core.approvals import (
    APPROVED,
    ApprovalRequest,
    FileApprovalStore,
    arguments_digest,
    new_request,
)
from zerto_rewind.core.record_mac import MAC_FIELD, RecordMac, state_key_path
from zerto_rewind.core.state import GuardState, TagRecord
from zerto_rewind.errors import KeyFileError

MAC = RecordMac(b"k" * 32)
RECORD = {"vpg_id": "vpg-1", "tag": {"state": "landed", "landed_at": 1700000000.25}, "n": [1, 2]}


def test_a_sealed_record_opens_to_what_was_sealed() -> None:
    sealed = MAC.seal("vpg", "vpg-1", RECORD)
    assert sealed[MAC_FIELD].startswith("v1:")
    # through JSON and back, keys in another order: the canonical form is the same
    again = json.loads(json.dumps(dict(reversed(list(sealed.items())))))
    assert MAC.open("vpg", "vpg-1", again) == RECORD


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.__setitem__("n", [1, 3]),
        lambda r: r["tag"].__setitem__("state", "requested"),
        lambda r: r["tag"].__setitem__("landed_at", 1700000000.5),
        lambda r: r.__setitem__("extra", None),
        lambda r: r.pop("n"),
        lambda r: r.pop(MAC_FIELD),
        lambda r: r.__setitem__(MAC_FIELD, "v1:" + "0" * 64),
        lambda r: r.__setitem__(MAC_FIELD, 7),
    ],
    ids=["value", "nested", "number", "added", "removed", "no-mac", "wrong-mac", "not-text"],
)
def test_any_change_makes_the_record_absent(change: Any) -> None:
    sealed = json.loads(json.dumps(MAC.seal("vpg", "vpg-1", RECORD)))
    change(sealed)
    assert MAC.open("vpg", "vpg-1", sealed) is None


def test_a_record_under_another_id_kind_or_key_is_absent() -> None:
    sealed = MAC.seal("vpg", "vpg-1", RECORD)
    assert MAC.open("vpg", "vpg-2", sealed) is None
    assert MAC.open("approval", "vpg-1", sealed) is None
    assert RecordMac(b"j" * 32).open("vpg", "vpg-1", sealed) is None
    assert MAC.open("vpg", "vpg-1", "not a record") is None


def test_the_key_is_made_under_the_state_dir_on_first_use(tmp_path: Path) -> None:
    mac = RecordMac.for_state_dir(str(tmp_path))
    assert not os.path.exists(state_key_path(str(tmp_path)))
    sealed = mac.seal("vpg", "v", {"a": 1})
    assert os.stat(state_key_path(str(tmp_path))).st_mode & 0o777 == 0o600
    assert RecordMac.for_state_dir(str(tmp_path)).open("vpg", "v", sealed) == {"a": 1}


def test_a_loose_key_file_stops_the_state_with_a_state_error(tmp_path: Path) -> None:
    state = GuardState(str(tmp_path))
    with state.vpg("vpg-1") as record:
        record.vpg_name = "A"
    os.chmod(state_key_path(str(tmp_path)), 0o644)
    fresh = GuardState(str(tmp_path))
    with pytest.raises(KeyFileError, match="mode 0644"):
        fresh.peek_vpg("vpg-1")


# ------------------------------------------------------------------ the file stores


def write(path: Path, raw: dict[str, Any]) -> None:
    path.write_text(json.dumps(raw), encoding="utf-8")


def landed_state(tmp_path: Path) -> tuple[GuardState, Path]:
    state = GuardState(str(tmp_path))
    with state.vpg("vpg-1") as record:
        record.tag = TagRecord("t", 1.0, 2.0, 3.0, state="landed", checkpoint_id="cp-1")
    return state, tmp_path / "vpgs" / "vpg-1.json"


def test_a_tag_record_changed_in_the_file_store_is_absent(tmp_path: Path) -> None:
    state, path = landed_state(tmp_path)
    raw = json.loads(path.read_text())
    raw["tag"]["checkpoint_id"] = "cp-forged"
    write(path, raw)
    assert state.peek_vpg("vpg-1").tag is None
    with state.vpg("vpg-1") as record:
        assert record.tag is None  # the guard starts over: it tags anew


def test_a_tag_record_copied_to_another_vpg_is_absent(tmp_path: Path) -> None:
    state, path = landed_state(tmp_path)
    write(tmp_path / "vpgs" / "vpg-2.json", json.loads(path.read_text()))
    assert state.peek_vpg("vpg-1").tag is not None
    assert state.peek_vpg("vpg-2").tag is None


def test_a_tag_record_without_a_mac_as_earlier_versions_wrote_is_absent(tmp_path: Path) -> None:
    state, path = landed_state(tmp_path)
    raw = json.loads(path.read_text())
    raw.pop(MAC_FIELD)
    write(path, raw)
    assert state.peek_vpg("vpg-1").tag is None


def test_a_changed_cache_entry_is_a_miss(tmp_path: Path) -> None:
    state = GuardState(str(tmp_path))
    state.store("vms", "web01", [["vm-1", "vpg-1", "VPG One"]])
    (path,) = (tmp_path / "cache").iterdir()
    raw = json.loads(path.read_text())
    raw["value"] = [["vm-1", "vpg-9", "Protected elsewhere"]]
    write(path, raw)
    assert state.cached("vms", "web01", ttl_s=60) is None


def a_request(path: str) -> ApprovalRequest:
    return new_request(
        tool="delete_file",
        tool_input={"path": path},
        vms=[],
        row="prompt",
        why="a file on the host",
        principal="token:agent",
    )


def approved_store(tmp_path: Path) -> tuple[FileApprovalStore, str, Path]:
    store = FileApprovalStore(str(tmp_path))
    request, _ = store.open_request(a_request("/a"))
    return store, request.id, tmp_path / "approvals" / f"{request.id}.json"


def test_a_request_set_to_approved_in_the_file_store_is_absent(tmp_path: Path) -> None:
    store, request_id, path = approved_store(tmp_path)
    raw = json.loads(path.read_text())
    raw.update(state=APPROVED, decided_by="unix:alice", decided_at=raw["created"])
    write(path, raw)
    assert store.get(request_id) is None
    assert store.consume("token:agent", "delete_file", arguments_digest({"path": "/a"})) is None
    assert store.pending() == []


def test_a_request_copied_under_another_id_is_absent(tmp_path: Path) -> None:
    store, request_id, path = approved_store(tmp_path)
    store.decide(request_id, True, "unix:alice")
    other, _ = store.open_request(a_request("/b"))
    # the approved record of /a put in the place of the pending request for /b
    write(path.with_name(f"{other.id}.json"), json.loads(path.read_text()))
    assert store.get(other.id) is None
    assert store.consume("token:agent", "delete_file", arguments_digest({"path": "/b"})) is None


def test_an_approval_put_back_after_its_use_is_not_used_again(tmp_path: Path) -> None:
    """Replay: the approved record, saved before its use, restored after it."""
    store, request_id, path = approved_store(tmp_path)
    store.decide(request_id, True, "unix:alice")
    approved = path.read_text()
    digest = arguments_digest({"path": "/a"})
    used = store.consume("token:agent", "delete_file", digest)
    assert used is not None
    assert used.id == request_id
    path.write_text(approved)  # a valid MAC: the replay itself verifies
    replayed = store.get(request_id)
    assert replayed is not None
    assert replayed.state == APPROVED
    assert store.consume("token:agent", "delete_file", digest) is None


def test_infinite_and_unicode_values_round_trip_through_json() -> None:
    """What JSON stores (Infinity, NaN, any text) verifies after a round trip."""
    record = {"lag_s": float("inf"), "name": "vm-\u00e9\u202e", "cadence_s": float("nan")}
    stored = json.loads(json.dumps(MAC.seal("vpg", "vpg-\u00e9", record)))
    opened = MAC.open("vpg", "vpg-\u00e9", stored)
    assert opened is not None
    assert opened["lag_s"] == float("inf")
    assert opened["name"] == "vm-\u00e9\u202e"
