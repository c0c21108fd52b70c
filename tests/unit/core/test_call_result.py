"""core.call_result: the one shape of a forwarded call's result line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from zerto_rewind.core.call_result import RESULT_EVENT, RESULTS, result_record
from zerto_rewind.core.decision import ToolCall
from zerto_rewind.core.decisions_log import audit_record, write_record


def _call() -> ToolCall:
    return ToolCall("vm_power_off", {"vm": "web-01", "secret": "s3"}, "sess-1", "tu-1", "mcp")


def test_shape_names_the_call_never_its_arguments() -> None:
    record = result_record(_call(), ["web-01"], "failed", client="token:a", host="codex", now=0)
    assert record == {
        "event_type": RESULT_EVENT,
        "outcome": "allowed",
        "time": "1970-01-01T00:00:00.000Z",
        "origin": "mcp",
        "session_id": "sess-1",
        "tool_use_id": "tu-1",
        "tool": "vm_power_off",
        "vms": ["web-01"],
        "result": "failed",
        "client": "token:a",
        "host": "codex",
    }
    assert "s3" not in json.dumps(record)


def test_every_result_is_accepted_and_others_refused() -> None:
    for result in RESULTS:
        assert result_record(_call(), [], result)["result"] == result
    with pytest.raises(ValueError, match="succeeded, failed, unknown"):
        result_record(_call(), [], "ok")


def test_audit_fields_keep_the_result_event(tmp_path: Path) -> None:
    shaped = audit_record(result_record(_call(), ["web-01"], "unknown", client="token:a"))
    assert shaped["event_type"] == RESULT_EVENT
    assert shaped["outcome"] == "allowed"
    assert shaped["principal_id"] == "token:a"
    path = tmp_path / "log.jsonl"
    write_record(str(path), result_record(_call(), ["web-01"], "unknown"))
    line = json.loads(path.read_text())
    assert (line["event_type"], line["result"], line["seq"]) == (RESULT_EVENT, "unknown", 1)


def test_the_documented_shape_is_the_one_built() -> None:
    """docs/rewind.md shows the result line: the same keys as result_record makes."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "rewind.md").read_text()
    found = re.search(r"```text\n(\{\"event_type\": \"tool_call\.result\".*?)```", doc, re.S)
    assert found, "docs/rewind.md lost its example of the result line"
    shown = json.loads(found.group(1).replace("…", "x"))
    built = result_record(_call(), ["web-01"], "succeeded", client="token:a", host="codex")
    assert set(shown) == set(built)
    assert shown["event_type"] == RESULT_EVENT
    assert shown["result"] in RESULTS
