"""rewind_plan.plan_changes: a plan's changes read through the log's index, on real files.

Every test compares the changes read through the index with those read from the
whole log, digests included: the index may only make a plan faster, never change
it or its id.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.core.keys import load_or_create_key
from zerto_rewind.core.log_index import SESSION, VM, index_path, open_index, state_mac
from zerto_rewind.core.record_mac import RecordMac, state_key_path
from zerto_rewind.recovery.rewind_plan import (
    Change,
    Scope,
    plan_changes,
    read_changes,
    scope_needles,
)

MAC = RecordMac(key=b"k" * 32)


def _line(path: Path, session: str | None, vms: list[str], **fields: Any) -> None:
    record: dict[str, Any] = {
        "time": "2026-12-03T10:00:00.000Z",
        "session_id": session,
        "tool": "vm_reconfigure",
        "decision": "context",
        "vms": vms,
        "vpg_ids": [f"id-{vm}" for vm in vms],
        "checkpoint_ids": [f"cp-{vm}" for vm in vms],
    }
    record.update(fields)
    write_record(str(path), record)


def _both(path: Path, scope: Scope) -> list[Change]:
    """The changes through the index, asserted equal to those read from the whole log."""
    indexed = plan_changes(str(path), scope, mac=MAC)
    assert indexed == plan_changes(str(path), scope)
    assert indexed == read_changes(str(path), scope_needles(str(path), scope))
    return indexed


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.jsonl"
    _line(path, "s1", ["web-01"])
    _line(path, "s2", ["db-01"])
    _line(path, "s2", ["web-01"], tool="vm_power_off")
    # Names web-01 only in its reason: not about it (for the index nor the search).
    _line(path, "s3", ["app-01"], reason="web-01 was busy")
    # Another VM of web-01's VPG: its checkpoint is the guard's, found by the VPG id.
    _line(path, "s4", ["web-02"], vpg_ids=["id-web-01"])
    _line(path, "s1", ["db-01"], decision="deny")
    return path


def test_read_through_the_index(log: Path) -> None:
    changes = _both(log, Scope(session_id="s1"))
    assert [c.line for c in changes] == [1, 3, 5]
    assert os.path.isfile(index_path(str(log)))
    assert [c.line for c in _both(log, Scope(vm="web-01", before="2026-12-03T09:00:00Z"))] == [
        1,
        3,
        5,
    ]


def test_the_index_is_extended_with_new_lines(log: Path) -> None:
    _both(log, Scope(session_id="s1"))
    _line(log, "s1", ["app-01"])
    _line(log, "s5", ["app-01"])
    changes = _both(log, Scope(session_id="s1"))
    assert [c.line for c in changes] == [1, 3, 4, 5, 7, 8]


def test_raw_lines_as_written_and_those_after_opening(log: Path) -> None:
    index = open_index(str(log), MAC)
    assert index is not None
    _line(log, "s1", ["app-01"])  # after the index was opened: not in it, read all the same
    with index:
        lines = index.raw_lines(str(log), [(SESSION, "s1"), (VM, "nowhere")])
    assert lines is not None
    written = log.read_bytes().splitlines(keepends=True)
    assert lines == [(1, written[0]), (6, written[5]), (7, written[6])]


def test_forged_row_is_not_believed(log: Path) -> None:
    """A row rewritten without the key (line 3 left out of web-01's): the log is read."""
    import array
    import sqlite3

    _both(log, Scope(session_id="s1"))
    with sqlite3.connect(index_path(str(log))) as db:
        blob = array.array("q", [0, 1]).tobytes()
        db.execute("UPDATE keys SET offsets = ? WHERE kind = ? AND key = ?", (blob, VM, b"web-01"))
    assert [c.line for c in _both(log, Scope(session_id="s1"))] == [1, 3, 5]


def test_not_the_logs_owner_reads_the_log(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: log.stat().st_uid + 1)
    assert [c.line for c in _both(log, Scope(session_id="s1"))] == [1, 3, 5]
    assert not os.path.exists(index_path(str(log)))


def test_no_log_no_changes(tmp_path: Path) -> None:
    assert plan_changes(str(tmp_path / "none.jsonl"), Scope(session_id="s1"), mac=MAC) == []


def test_state_mac_only_once_the_guard_made_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert state_mac(str(state)) is None
    assert not os.path.exists(state_key_path(str(state)))  # never made by a reader
    load_or_create_key(state_key_path(str(state)))
    assert state_mac(str(state)) is not None
    os.chmod(state_key_path(str(state)), 0o644)  # others may read it: not used
    assert state_mac(str(state)) is None


def test_an_index_of_the_previous_version_is_rebuilt(log: Path) -> None:
    """Version 1 filed no VPG ids: believed, it would lose the guard's checkpoints."""
    import sqlite3

    _both(log, Scope(session_id="s1"))
    ident = os.path.realpath(index_path(str(log)))
    with sqlite3.connect(index_path(str(log))) as db:
        (body,) = db.execute("SELECT body FROM meta").fetchone()
        header = MAC.open("log-index", ident, json.loads(body))
        assert header is not None
        header["version"] = 1
        db.execute("UPDATE meta SET body = ?", (json.dumps(MAC.seal("log-index", ident, header)),))
        db.execute("DELETE FROM keys WHERE kind = 'g'")
    assert [c.line for c in _both(log, Scope(session_id="s1"))] == [1, 3, 5]
    index = open_index(str(log), MAC)
    assert index is not None
    with index:
        assert [n for _, n in index.filed("g", "id-web-01") or []] == [1, 3, 5]


_SESSIONS = st.sampled_from(["a", "ab", "b", "é"])
_VMS = st.lists(st.sampled_from(["vm-1", "vm-2", "vm-é", "a"]), max_size=2, unique=True)
_DECISIONS = st.sampled_from(["none", "context", "deny", "defer", "prompt", "approval"])


@st.composite
def _records(draw: st.DrawFn) -> dict[str, Any]:
    vms = draw(_VMS)
    record: dict[str, Any] = {
        "time": f"2026-12-03T10:{draw(st.integers(0, 59)):02d}:00.000Z",
        "session_id": draw(st.one_of(_SESSIONS, st.none())),
        "tool": "vm_reconfigure",
        "decision": draw(_DECISIONS),
        "answer": draw(st.sampled_from(["", "approved", "declined"])),
        "vms": vms,
        "vpg_ids": draw(st.lists(st.sampled_from([f"id-{v}" for v in vms] + ["id-x"]))),
        "checkpoint_ids": draw(st.lists(st.sampled_from(["1", "2", "3"]), max_size=2)),
        "reason": draw(st.sampled_from(["", "vm-1", "a"])),  # a name, not in a field
    }
    return record


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    """One line as some writer put it: compact or spaced, escaped or not, or damaged."""
    record = draw(_records())
    shape = draw(st.sampled_from(["guard", "ascii", "spaced", "damaged", "crlf"]))
    if shape == "damaged":
        return json.dumps(record).encode()[: draw(st.integers(0, 20))] + b"\n"
    if shape == "guard":
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    end = b"\r\n" if shape == "crlf" else b"\n"
    return json.dumps(record, ensure_ascii=shape != "spaced").encode() + end


_SCOPES = st.one_of(
    st.builds(Scope, session_id=_SESSIONS),
    st.builds(
        Scope, vm=st.sampled_from(["vm-1", "vm-é", "a"]), before=st.just("2026-12-03T10:30Z")
    ),
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=st.lists(_lines(), max_size=25), then=st.lists(_lines(), max_size=8), scope=_SCOPES)
def test_same_plan_as_the_whole_log_on_random_logs(
    tmp_path_factory: pytest.TempPathFactory, first: list[bytes], then: list[bytes], scope: Scope
) -> None:
    path = tmp_path_factory.mktemp("random") / "decisions.jsonl"
    path.touch()
    for batch in (first, then):  # indexed after the first batch, extended after the second
        with open(path, "ab") as fh:
            fh.write(b"".join(batch))
        _both(path, scope)
    if first:
        assert os.path.isfile(index_path(str(path)))  # the index was read, not passed by
