"""core.sessions: the session list and one session's timeline, read from a real log file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.core import log_line, sessions
from zerto_rewind.core.call_result import result_record
from zerto_rewind.core.decision import ToolCall
from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.core.sessions import (
    NOT_RECORDED,
    kind_of,
    list_sessions,
    parse_since,
    read_timeline,
)
from zerto_rewind.errors import UsageError


def _line(path: Path, session: str | None, minute: int, **fields: Any) -> None:
    record: dict[str, Any] = {
        "time": f"2026-12-01T08:{minute:02d}:00.000Z",
        "origin": "service",
        "session_id": session,
        "tool": "vm_power_off",
        "row": "confirmed",
        "decision": "context",
        "vms": ["web-01"],
        "client": "token:agent",
    }
    record.update(fields)
    write_record(str(path), record)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.jsonl"
    _line(path, "sess-aaa", 1, tool_use_id="t1", checkpoint_ids=["101"], tags=["zr-1"],
          landed_at="2026-12-01T08:01:02.000Z", vpgs=["vpg-web"])  # fmt: skip
    _line(path, "sess-bbb", 2, vms=["db-01"], client="token:other", host="codex")
    _line(path, "sess-aaa", 3, decision="deny", row="vm_unknown", vms=["ghost"])
    _line(path, "sess-aaa", 4, decision="prompt", row="no_vm", vms=["db-01"], answer="approved",
          approver="alice", tool_use_id="t2")  # fmt: skip
    _line(path, "sess-bbb", 5, vms=["web-01"], tool="vm_reconfigure")
    _line(path, "sess-aaa", 6, decision="prompt", row="no_vm", answer="declined")
    _line(path, None, 7)
    call = ToolCall("vm_power_off", {}, session_id="sess-aaa", tool_use_id="t1")
    write_record(str(path), result_record(call, ["web-01"], "succeeded"))
    return path


def test_kind_of_each_decision() -> None:
    assert kind_of({"decision": "none"}) == "change"
    assert kind_of({"decision": "context"}) == "change"
    assert kind_of({"decision": "deny"}) == "denied"
    assert kind_of({"decision": "prompt", "answer": "approved"}) == "change"
    assert kind_of({"decision": "prompt"}) == "change"  # asked at the host: may have run
    assert kind_of({"decision": "prompt", "answer": "timeout"}) == "not run"
    assert kind_of({"decision": "defer"}) == "deferred"


def test_list_sessions_latest_first_with_counts(log: Path) -> None:
    found = list_sessions(str(log))
    assert [s.session_id for s in found] == ["sess-aaa", "sess-bbb"]
    aaa, bbb = found
    assert (aaa.changes, aaa.refused) == (2, 2)
    assert aaa.vms == ["web-01", "db-01"]
    assert aaa.first == "2026-12-01T08:01:00.000Z"
    assert aaa.last == "2026-12-01T08:04:00.000Z"
    assert aaa.principal == "token:agent"
    assert aaa.host == "service"
    assert (bbb.principal, bbb.host, bbb.changes) == ("token:other", "codex", 2)


def test_list_sessions_since_and_limit(log: Path) -> None:
    late = list_sessions(str(log), since="2026-12-01T08:04:30.000Z")
    assert [(s.session_id, s.changes, s.refused) for s in late] == [
        ("sess-aaa", 0, 1),
        ("sess-bbb", 1, 0),
    ]
    assert len(list_sessions(str(log), limit=1)) == 1


def test_timeline_in_order_with_results_and_rewind_points(log: Path) -> None:
    timeline = read_timeline(str(log), "sess-a")  # a unique prefix
    assert timeline.session_id == "sess-aaa"
    entries = timeline.entries
    assert [e.time[14:16] for e in entries] == ["01", "03", "04", "06"]
    assert [e.kind for e in entries] == ["change", "denied", "change", "not run"]
    first, denied, approved, declined = entries
    assert first.result == "succeeded"
    assert first.rewind_point == ("checkpoint 101 (zr-1, landed 2026-12-01T08:01:02.000Z)")
    assert approved.result == NOT_RECORDED
    assert approved.rewind_point == "no rewind point, approved by alice"
    assert denied.rewind_point == ""
    assert denied.decision == "denied"
    assert declined.decision == "prompt: declined"
    assert [c.line for c in timeline.changes] == [first.line, approved.line]


def test_later_changes_by_other_sessions_only_after(log: Path) -> None:
    first, _, approved, _ = read_timeline(str(log), "sess-aaa").entries
    # sess-bbb changed db-01 at :02, before sess-aaa's change at :04: not "later"
    assert approved.later == []
    assert [(o.session_id, o.tool, o.time[14:16]) for o in first.later] == [
        ("sess-bbb", "vm_reconfigure", "05")
    ]


def test_timeline_json_shape(log: Path) -> None:
    out = read_timeline(str(log), "sess-aaa").to_json()
    assert out["changes"] == 2
    assert out["first_change"] == "2026-12-01T08:01:00.000Z"
    first = out["entries"][0]
    assert first["checkpoint"]["checkpoint_ids"] == ["101"]
    assert first["later_by_other_sessions"][0]["session_id"] == "sess-bbb"
    assert out["entries"][1]["result"] is None  # a denied call has no result


def test_unknown_and_ambiguous_ids_are_usage_errors(log: Path) -> None:
    with pytest.raises(UsageError, match="zerto-rewind sessions"):
        read_timeline(str(log), "nope")
    with pytest.raises(UsageError, match="several session ids"):
        read_timeline(str(log), "sess-")
    with pytest.raises(UsageError, match="no session id"):
        read_timeline(str(log), " ")


def test_a_whole_id_wins_over_longer_ids(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _line(path, "s1", 1)
    _line(path, "s10", 2)
    timeline = read_timeline(str(path), "s1")
    assert timeline.session_id == "s1"
    assert [o.session_id for o in timeline.entries[0].later] == ["s10"]


def test_approver_from_the_approval_event(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _line(path, "s1", 1, decision="approval", answer="approved", approval_id="r1",
          approver="bob", origin="approvals")  # fmt: skip
    _line(path, "s1", 2, decision="prompt", answer="approved", approval_id="r1", row="no_vm")
    (entry,) = read_timeline(str(path), "s1").entries
    assert entry.rewind_point == "no rewind point, approved by bob"


def test_pending_tag_and_damaged_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _line(path, "s1", 1, row="pending", tags=["zr-9"])
    with path.open("a") as fh:
        fh.write("not json\n[1]\n")
    (entry,) = read_timeline(str(path), "s1").entries
    assert entry.rewind_point == "tag zr-9 requested, not landed when the call ran"


def test_missing_log_lists_nothing(tmp_path: Path) -> None:
    assert list_sessions(str(tmp_path / "none.jsonl")) == []


def test_parse_since() -> None:
    now = 1_764_576_000.0  # 2025-12-01T08:00:00Z
    assert parse_since("2h", now) == "2025-12-01T06:00:00.000Z"
    assert parse_since("2026-12-01", now) == "2026-12-01T00:00:00.000Z"
    assert parse_since("2026-12-01T08:00Z", now) == "2026-12-01T08:00:00.000Z"
    with pytest.raises(UsageError, match="--since"):
        parse_since("yesterday", now)


def test_small_chunks_find_the_same_lines_with_the_same_numbers(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunked search gives what reading every line gives, whatever the chunk size."""
    whole = read_timeline(str(log), "sess-aaa").to_json()
    for size in (7, 64, 333):
        monkeypatch.setattr(log_line, "_CHUNK", size)
        assert read_timeline(str(log), "sess-aaa").to_json() == whole
    lines = [n for n, r in sessions._lines(str(log)) if r.get("session_id") == "sess-aaa"]
    assert [e["line"] for e in whole["entries"]] == lines[:4]


def test_a_last_line_without_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _line(path, "s1", 1)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert len(read_timeline(str(path), "s1").entries) == 1
