"""``zerto-rewind sessions`` / ``session show`` / ``log --session``: tables, JSON, errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from zerto_rewind.cli import main as cli_main
from zerto_rewind.cli import sessions_cmd
from zerto_rewind.cli.log_cmd import _table as log_table
from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.core.sessions import list_sessions, read_timeline

LONG_VM = "web-prod-frontend-0001.datacenter-east.example.internal"


def _write(path: Path, session: str, minute: int, **fields: Any) -> None:
    record = {
        "time": f"2026-12-01T08:{minute:02d}:00.000Z",
        "origin": "service",
        "session_id": session,
        "tool": "mcp__vsphere__power_off_vm",
        "row": "confirmed",
        "decision": "context",
        "vms": [LONG_VM],
        "checkpoint_ids": ["5001"],
        "tags": ["zerto-rewind t1"],
        "landed_at": f"2026-12-01T08:{minute:02d}:03.000Z",
        "client": "token:agent-1",
        **fields,
    }
    write_record(str(path), record)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.log"
    _write(path, "0b7c-aaaa", 1)
    _write(path, "0b7c-aaaa", 2, decision="deny", row="vm_unknown", vms=["evil\x1b[2J[/]"])
    _write(path, "9f00-bbbb", 3, tool="reconfigure\x07")
    return path


def _render(fn: Any, *args: Any, width: int = 80) -> str:
    out = io.StringIO()
    fn(Console(file=out, width=width, force_terminal=False), *args)
    return out.getvalue()


def test_sessions_table_folds_long_names_never_cuts_them(log: Path) -> None:
    text = _render(sessions_cmd._sessions_table, list_sessions(str(log)), str(log))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert LONG_VM not in text  # folded onto two lines at 80 columns…
    assert "…" not in text  # …but never cut
    lines = text.splitlines()
    column = next(line.index("VMs") for line in lines if "VMs" in line)
    vm_column = "".join(line[column:].strip() for line in lines if len(line) > column)
    assert vm_column.count(LONG_VM) == 2  # each row's VM whole, over several lines
    assert "(+1" in text
    assert "refused)" in text


def test_sessions_through_a_pipe_keep_each_session_on_one_line(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["sessions", "--log", str(log)]) == 0  # captured: not a terminal
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "-aaaa" in line or "-bbbb" in line]
    assert len(rows) == 2
    assert all(LONG_VM in row for row in rows)


def test_timeline_escapes_what_the_agent_named(log: Path) -> None:
    text = _render(sessions_cmd._timeline_table, read_timeline(str(log), "0b7c"), width=320)
    assert "\x1b" not in text
    assert "evil\\x1b[2J[/]" in text  # shown as written, markup not interpreted
    assert "checkpoint 5001 (zerto-rewind t1, landed 2026-12-01T08:01:03.000Z)" in text
    assert "not recorded" in text  # no result line was written for the change
    # the other session's later change to the same VM, its tool escaped
    assert "9f00-bbbb reconfigure\\x07" in text


def test_cli_json_and_prefix(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["sessions", "--log", str(log), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["session_id"] for s in listed] == ["9f00-bbbb", "0b7c-aaaa"]
    assert cli_main(["session", "show", "0b7c", "--log", str(log), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session_id"] == "0b7c-aaaa"
    assert [e["kind"] for e in shown["entries"]] == ["change", "denied"]
    assert shown["entries"][0]["later_by_other_sessions"][0]["session_id"] == "9f00-bbbb"


def test_unknown_session_is_one_line_with_what_to_do(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["session", "show", "nope", "--log", str(log)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zerto-rewind session show: UsageError: no session 'nope' in ")
    assert "`zerto-rewind sessions` lists the sessions it holds" in err
    assert len(err.splitlines()) == 1


def test_bad_since_is_a_usage_error(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["sessions", "--log", str(log), "--since", "soon"]) == 1
    assert "give 30m, 12h, 7d" in capsys.readouterr().err


def test_log_session_filter_and_columns(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["log", "--log", str(log), "--session", "9f00", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["session_id"] for line in lines] == ["9f00-bbbb"]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    text = _render(log_table, records, {}, str(log), width=160)
    header = next(line for line in text.splitlines() if "date" in line)
    assert header.split()[:3] == ["date", "time", "session"]
    assert text.count("2026-12-01") == 3
    result = {"event_type": "tool_call.result", "result": "failed", "time": "x", "tool": "t"}
    assert "result: failed" in _render(log_table, [result], {}, str(log), width=160)


def test_session_show_uses_the_index_once_the_state_key_exists(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from zerto_rewind.core.keys import load_or_create_key
    from zerto_rewind.core.log_index import index_path
    from zerto_rewind.core.record_mac import state_key_path

    monkeypatch.delenv("ZERTO_REWIND_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ZERTO_REWIND_STATE_DIR", str(tmp_path / "state"))
    show = ["session", "show", "0b7c", "--log", str(log), "--json"]
    assert cli_main(show) == 0
    whole = json.loads(capsys.readouterr().out)
    assert not Path(index_path(str(log))).exists()  # no key: the log is read whole, no index
    load_or_create_key(state_key_path(str(tmp_path / "state")))
    assert cli_main(show) == 0
    assert json.loads(capsys.readouterr().out) == whole
    assert Path(index_path(str(log))).stat().st_mode & 0o777 == 0o600
