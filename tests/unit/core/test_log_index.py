"""core.log_index: the sealed index beside the decision log, on real files and SQLite.

Every test compares what ``session show`` reads through the index with what it
reads from the whole log: the index may only make it faster, never different.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.core.log_index import SESSION, index_path, open_index
from zerto_rewind.core.record_mac import RecordMac
from zerto_rewind.core.sessions import read_timeline
from zerto_rewind.errors import UsageError

MAC = RecordMac(key=b"k" * 32)


def _line(path: Path, session: str, minute: int, vms: list[str], **fields: Any) -> None:
    record: dict[str, Any] = {
        "time": f"2026-12-01T08:{minute:02d}:00.000Z",
        "origin": "service",
        "session_id": session,
        "tool": "vm_power_off",
        "row": "confirmed",
        "decision": "context",
        "vms": vms,
        "client": "token:agent",
        "tool_use_id": f"t{minute}",
    }
    record.update(fields)
    write_record(str(path), record)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.jsonl"
    _line(path, "sess-a", 1, ["web-01"], checkpoint_ids=["101"], tags=["zr-1"])
    _line(path, "sess-b", 2, ["db-01"])
    _line(path, "sess-a", 3, ["db-01"], decision="deny", row="vm_unknown")
    _line(path, "sess-b", 4, ["web-01"], tool="vm_reconfigure")
    _line(path, "sess-c", 5, ["app-01"])
    return path


def _both(path: Path, prefix: str) -> dict[str, Any]:
    """The timeline through the index; asserted equal to the one read from the whole log."""
    indexed = read_timeline(str(path), prefix, mac=MAC).to_json()
    assert indexed == read_timeline(str(path), prefix).to_json()
    return indexed


def _index_id(path: Path) -> str:
    index = open_index(str(path), MAC)
    assert index is not None
    with index:
        return index.meta.index_id


def test_built_private_and_read_through(log: Path) -> None:
    out = _both(log, "sess-a")
    assert [e["line"] for e in out["entries"]] == [1, 3]
    assert out["entries"][0]["later_by_other_sessions"][0]["session_id"] == "sess-b"
    info = os.stat(index_path(str(log)))
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.geteuid()
    index = open_index(str(log), MAC)
    assert index is not None
    with index:
        assert index.lines == 5
        assert index.through == log.stat().st_size
        assert set(index.sessions("sess-") or {}) == {"sess-a", "sess-b", "sess-c"}
        assert [n for _, n in index.vm("web-01") or []] == [1, 4]


def test_extended_from_where_it_stopped(log: Path) -> None:
    before = _index_id(log)
    _line(log, "sess-d", 6, ["web-01"])
    _line(log, "sess-a", 7, ["app-01"])
    out = _both(log, "sess-a")
    assert [e["line"] for e in out["entries"]] == [1, 3, 7]
    assert [x["session_id"] for x in out["entries"][0]["later_by_other_sessions"]] == [
        "sess-b",
        "sess-d",
    ]
    assert _index_id(log) == before  # extended, not rebuilt


def test_lines_written_after_opening_are_still_read(log: Path) -> None:
    index = open_index(str(log), MAC)
    assert index is not None
    _line(log, "sess-a", 6, ["web-01"])
    with index:
        lines = index.lines_for(str(log), "sess-a", lambda r: ())
    assert lines is not None
    assert [n for n, _ in lines] == [1, 3, 6]


@pytest.mark.parametrize("keep", [0, 2])
def test_cut_log_rebuilds(log: Path, keep: int) -> None:
    before = _index_id(log)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:keep]))
    if keep == 0:
        with pytest.raises(UsageError):
            read_timeline(str(log), "sess-a", mac=MAC)
    else:
        assert [e["line"] for e in _both(log, "sess-a")["entries"]] == [1]
    assert _index_id(log) != before


def test_rewritten_last_line_rebuilds(log: Path) -> None:
    before = _index_id(log)
    data = log.read_bytes()
    # Same size, another session: only the last line's hash tells.
    log.write_bytes(data.replace(b'"sess-c"', b'"sess-a"'))
    out = _both(log, "sess-a")
    assert [e["line"] for e in out["entries"]] == [1, 3, 5]
    assert _index_id(log) != before


def test_replaced_log_file_rebuilds(log: Path, tmp_path: Path) -> None:
    before = _index_id(log)
    copy = tmp_path / "copy"
    copy.write_bytes(log.read_bytes())
    os.replace(copy, log)  # the same bytes in another file (inode)
    _both(log, "sess-a")
    assert _index_id(log) != before


def _forge_row(log: Path, session: str, lines: list[tuple[int, int]]) -> None:
    """Rewrite a session's row as someone without the key would: offsets, old MAC."""
    import array

    with sqlite3.connect(index_path(str(log))) as db:
        blob = array.array("q", [v for pair in lines for v in pair]).tobytes()
        db.execute(
            "UPDATE keys SET offsets = ? WHERE kind = ? AND key = ?",
            (blob, SESSION, session.encode()),
        )


def test_forged_row_is_not_believed(log: Path) -> None:
    _both(log, "sess-a")
    _forge_row(log, "sess-a", [(0, 1)])  # line 3 left out
    assert [e["line"] for e in _both(log, "sess-a")["entries"]] == [1, 3]
    _line(log, "sess-a", 6, ["web-01"])  # extending over a forged row rebuilds the index
    assert [e["line"] for e in _both(log, "sess-a")["entries"]] == [1, 3, 6]
    index = open_index(str(log), MAC)
    assert index is not None
    with index:
        assert [n for _, n in index.sessions("sess-a")["sess-a"]] == [1, 3, 6]  # type: ignore[index]


def test_forged_header_or_other_key_rebuilds(log: Path) -> None:
    before = _index_id(log)
    with sqlite3.connect(index_path(str(log))) as db:
        (body,) = db.execute("SELECT body FROM meta").fetchone()
        header = json.loads(body)
        header["through"] = log.stat().st_size + 1000  # claims lines that are not indexed
        db.execute("UPDATE meta SET body = ?", (json.dumps(header),))
    _both(log, "sess-a")
    rebuilt = _index_id(log)
    assert rebuilt != before
    other = RecordMac(key=b"o" * 32)  # sealed with another key: not believed either
    assert read_timeline(str(log), "sess-a", mac=other).to_json() == _both(log, "sess-a")
    assert _index_id(log) != rebuilt


def test_loose_mode_or_other_owner_rebuilds(log: Path) -> None:
    before = _index_id(log)
    os.chmod(index_path(str(log)), 0o644)
    _both(log, "sess-a")
    assert stat.S_IMODE(os.stat(index_path(str(log))).st_mode) == 0o600
    second = _index_id(log)
    assert second != before
    if os.geteuid() == 0:  # only root can give a file away
        os.chown(index_path(str(log)), 4321, -1)
        _both(log, "sess-a")
        assert os.stat(index_path(str(log))).st_uid == 0
        assert _index_id(log) != second


def test_garbage_file_rebuilds(log: Path) -> None:
    Path(index_path(str(log))).write_bytes(b"not a database" * 100)
    os.chmod(index_path(str(log)), 0o600)
    _both(log, "sess-a")
    assert open_index(str(log), MAC) is not None


def test_unwritable_index_falls_back_to_the_log(log: Path) -> None:
    os.mkdir(index_path(str(log)))  # the place cannot hold the index file
    assert open_index(str(log), MAC) is None
    assert [e["line"] for e in _both(log, "sess-a")["entries"]] == [1, 3]


def test_reader_not_the_log_owner_uses_no_index(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: log.stat().st_uid + 1)
    assert open_index(str(log), MAC) is None
    assert not os.path.exists(index_path(str(log)))
    assert [e["line"] for e in _both(log, "sess-a")["entries"]] == [1, 3]


def test_torn_last_line_and_damaged_lines(log: Path) -> None:
    with open(log, "ab") as fh:
        fh.write(b"not json\n")
    _line(log, "sess-a", 7, ["web-01"])
    _both(log, "sess-a")  # indexed, damaged line 6 skipped
    with open(log, "ab") as fh:
        fh.write(json.dumps({"session_id": "sess-a", "decision": "none", "vms": []}).encode())
    out = _both(log, "sess-a")  # the line without its newline is read too
    assert [e["line"] for e in out["entries"]] == [1, 3, 7, 8]


_SESSIONS = st.sampled_from(["a", "ab", "abc", "b", "ba", "c"])
_VMS = st.lists(st.sampled_from(["vm-1", "vm-2", "vm-3", "vm-é"]), max_size=2, unique=True)
_DECISIONS = st.sampled_from(["none", "context", "deny", "defer", "prompt"])


@st.composite
def _records(draw: st.DrawFn) -> dict[str, Any]:
    session = draw(_SESSIONS)
    record: dict[str, Any] = {
        "time": f"2026-12-01T08:{draw(st.integers(0, 59)):02d}:00.000Z",
        "session_id": session,
        "tool": "vm_power_off",
        "decision": draw(_DECISIONS),
        "vms": draw(_VMS),
        "tool_use_id": f"{session}-{draw(st.integers(0, 3))}",
    }
    shape = draw(st.sampled_from(["call", "call", "call", "result", "approval", "nosession"]))
    if shape == "result":
        record.update(event_type="tool_call.result", result=draw(st.sampled_from(["ok", "x"])))
    elif shape == "approval":
        record.update(decision="approval", answer="approved", approver="alice")
        record["approval_id"] = f"{session}-req"
    elif shape == "nosession":
        record["session_id"] = None
    elif record["decision"] == "prompt":
        record.update(answer=draw(st.sampled_from(["", "approved", "declined"])))
        record["approval_id"] = f"{session}-req"
    return record


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.lists(_records(), max_size=25),
    then=st.lists(_records(), max_size=10),
    prefix=_SESSIONS,
)
def test_same_as_the_whole_log_on_random_logs(
    tmp_path_factory: pytest.TempPathFactory,
    first: list[dict[str, Any]],
    then: list[dict[str, Any]],
    prefix: str,
) -> None:
    path = tmp_path_factory.mktemp("random") / "decisions.jsonl"
    path.touch()
    for batch in (first, then):  # indexed after the first batch, extended after the second
        for record in batch:
            write_record(str(path), dict(record))
        assert _outcome(path, prefix, MAC) == _outcome(path, prefix, None)
    if first:
        assert os.path.isfile(index_path(str(path)))  # the index was read, not passed by


def _outcome(path: Path, prefix: str, mac: RecordMac | None) -> Any:
    try:
        return read_timeline(str(path), prefix, mac=mac).to_json()
    except UsageError as exc:
        return str(exc)


def test_no_log_no_index(tmp_path: Path) -> None:
    assert open_index(str(tmp_path / "none.jsonl"), MAC) is None
    assert not (tmp_path / "none.jsonl.index").exists()


def test_header_not_text_rebuilds(log: Path) -> None:
    before = _index_id(log)
    with sqlite3.connect(index_path(str(log))) as db:
        db.execute("UPDATE meta SET body = 42")
    _both(log, "sess-a")
    assert _index_id(log) != before
