"""A call's decision line found again after the call, and the result line shaped from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.core import call_lookup as lookup
from zerto_rewind.core.decision import ToolCall

DECISION = {
    "time": "2026-12-03T10:00:00.000Z",
    "session_id": "s1",
    "tool_use_id": "toolu_1",
    "tool": "mcp__vsphere__power_off_vm",
    "row": "confirmed",
    "decision": "context",
    "vms": ["web-01"],
    "vpgs": ["vpg-web"],
    "vpg_ids": ["vpg-1"],
    "checkpoint_ids": ["cp-9"],
    "tags": ["zr s=s1"],
    "landed_at": "2026-12-03T10:00:01.000Z",
    "reason": "",
}


def write_log(path: Path, records: list[dict[str, Any]], filler: int = 0) -> str:
    lines = [json.dumps({"tool_use_id": f"other-{i}", "session_id": "s0"}) for i in range(filler)]
    lines += [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_the_last_decision_line_of_the_call_is_found(tmp_path: Path) -> None:
    """Result and approval lines of the same id are skipped; another session's is too."""
    older = {**DECISION, "decision": "deny"}
    log = write_log(
        tmp_path / "log",
        [
            older,
            DECISION,
            {**DECISION, "session_id": "s2", "decision": "deny"},
            {**DECISION, "event_type": "tool_call.result", "result": "failed"},
            {**DECISION, "decision": "approval"},
        ],
    )
    assert lookup.find_decision(log, "s1", "toolu_1") == DECISION
    assert lookup.find_decision(log, "s1", "toolu_2") is None
    assert lookup.find_decision(str(tmp_path / "absent"), "s1", "toolu_1") is None


def test_a_line_across_chunk_boundaries_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small chunks: a line cut by a chunk's start is joined with the next chunk read."""
    monkeypatch.setattr(lookup, "_CHUNK", 17)
    log = write_log(tmp_path / "log", [DECISION], filler=50)
    assert lookup.find_decision(log, "s1", "toolu_1") == DECISION
    log = write_log(tmp_path / "log2", [DECISION, *([{"x": 1}] * 30)], filler=3)
    assert lookup.find_decision(log, "s1", "toolu_1") == DECISION


def test_a_line_beyond_the_scan_window_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the log's last SCAN_BYTES are read."""
    log = write_log(tmp_path / "log", [DECISION, *([{"x": "y" * 50}] * 20)])
    monkeypatch.setattr(lookup, "SCAN_BYTES", 200)
    assert lookup.find_decision(log, "s1", "toolu_1") is None


def test_the_result_line_names_what_the_decision_line_names() -> None:
    """VMs, VPGs, checkpoint (id, tag, landed), principal and host; no argument value."""
    call = ToolCall("mcp__vsphere__power_off_vm", {"name": "web-01", "secret": "x"},
                    session_id="s1", tool_use_id="toolu_1")  # fmt: skip
    line = lookup.result_line(DECISION, call, "succeeded", client="hook:ann", host="claude-code")
    assert line["event_type"] == "tool_call.result"
    assert line["result"] == "succeeded"
    assert (line["session_id"], line["tool_use_id"]) == ("s1", "toolu_1")
    assert line["vms"] == ["web-01"]
    assert line["vpgs"] == ["vpg-web"]
    assert line["checkpoint_ids"] == ["cp-9"]
    assert line["tags"] == ["zr s=s1"]
    assert line["landed_at"] == DECISION["landed_at"]
    assert (line["client"], line["host"]) == ("hook:ann", "claude-code")
    assert "secret" not in json.dumps(line)


def test_an_approved_change_carries_its_approver() -> None:
    """No rewind point: the approval and who gave it."""
    approved = {**DECISION, "decision": "prompt", "answer": "approved", "approval_id": "a1",
                "approver": "bob", "checkpoint_ids": [], "tags": []}  # fmt: skip
    call = ToolCall("t", {}, session_id="s1", tool_use_id="toolu_1")
    line = lookup.result_line(approved, call, "failed", client="hook:ann", host="claude-code")
    assert (line["approver"], line["approval_id"], line["answer"]) == ("bob", "a1", "approved")


def test_the_call_key_hides_the_arguments_and_tells_calls_apart() -> None:
    """Same session, tool and arguments: the same key; any of them differs: another."""
    key = lookup.call_key("s1", "t", {"name": "web-01"})
    assert key == lookup.call_key("s1", "t", {"name": "web-01"})
    assert key.startswith("args-")
    assert "web-01" not in key
    assert key != lookup.call_key("s2", "t", {"name": "web-01"})
    assert key != lookup.call_key("s1", "u", {"name": "web-01"})
    assert key != lookup.call_key("s1", "t", {"name": "web-02"})


def test_find_call_says_whether_a_result_follows_the_decision(tmp_path: Path) -> None:
    """A result line after the decision line is seen; one before it (an earlier call that
    shared the id) is not."""
    result = {**DECISION, "event_type": "tool_call.result", "result": "succeeded"}
    log = write_log(tmp_path / "log", [DECISION])
    assert lookup.find_call(log, "s1", "toolu_1") == (DECISION, False)
    log = write_log(tmp_path / "log2", [DECISION, result])
    assert lookup.find_call(log, "s1", "toolu_1") == (DECISION, True)
    log = write_log(tmp_path / "log3", [result, DECISION])
    assert lookup.find_call(log, "s1", "toolu_1") == (DECISION, False)
    assert lookup.find_call(log, "s2", "toolu_1") == (None, False)
