"""``zerto-rewind log``: values shown literally; ``--verify`` against anchors, ``--anchor``."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from zerto_rewind.cli import log_cmd
from zerto_rewind.cli.log_cmd import _print_line, _table, visible
from zerto_rewind.core import decisions_log, log_anchor
from zerto_rewind.core.decisions_log import register_anchor, write_record

HOSTILE = [
    "[/]",
    "[bold]x[/bold]",
    "\x1b[2J\x1b[1;1Hweb-01",
    "a\rb",
    "report-\u202egol.sh",
    "z\u200bw",
]


def render(records: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    _table(Console(file=out, width=200, force_terminal=True), records, {}, "/var/log/[red]zr.log")
    return out.getvalue()


def test_markup_in_a_vm_name_is_shown_not_interpreted() -> None:
    """A VM named `[/]` made rich raise MarkupError for every reader of the log."""
    text = render([{"time": "2026-01-01T00:00:00Z", "tool": "t[/]", "vms": HOSTILE[:2],
                    "row": "vm_unknown", "decision": "prompt", "reason": "[/]"}])  # fmt: skip
    assert "[/]" in text
    assert "[bold]x[/bold]" in text
    assert "t[/]" in text
    assert "/var/log/[red]zr.log" in text


def test_control_and_format_characters_are_made_visible() -> None:
    text = render([{"time": "2026-01-01T00:00:00Z", "tool": "t", "vms": HOSTILE[2:],
                    "row": "vm_unknown", "decision": "prompt"}])  # fmt: skip
    assert "\\x1b[2J\\x1b[1;1Hweb-01" in text
    assert "a\\x0db" in text
    assert "report-<U+202E>gol.sh" in text
    assert "z<U+200B>w" in text
    # the only ESC bytes left are rich's own styling (SGR: ESC [ … m), never the name's
    assert "\x1b[2J" not in text
    assert "\x1b[1;1H" not in text
    assert "\r" not in text
    assert "\u202e" not in text
    assert "\u200b" not in text


def test_visible_keeps_plain_text_and_escapes_c1_and_del() -> None:
    assert visible("web-01 [x]") == "web-01 [x]"
    assert visible("a\x7fb\x9bc\u2066") == "a\\x7fb\\x9bc<U+2066>"


def test_follow_prints_hostile_lines_literally() -> None:
    out = io.StringIO()
    line = json.dumps({"time": "T", "tool": "[/]", "vms": ["\x1b]0;owned\x07"], "row": "r",
                       "decision": "deny"})  # fmt: skip
    _print_line(Console(file=out, width=200, force_terminal=True), line, as_json=False)
    _print_line(Console(file=out), "[1, 2]", as_json=False)  # JSON, but not a record
    assert "[/]" in out.getvalue()
    assert "\\x1b]0;owned\\x07" in out.getvalue()
    assert "\x07" not in out.getvalue()


def test_old_and_new_shape_records_show_alike() -> None:
    old = {"time": "2025-01-01T10:00:00Z", "tool": "mcp__v__off", "vms": ["a"],
           "row": "confirmed", "decision": "context", "checkpoint_ids": ["cp-old"],
           "seq": 1, "prev": "0" * 64}  # fmt: skip
    new = decisions_log.audit_record(
        {**old, "time": "2025-01-01T10:00:01Z", "checkpoint_ids": ["cp-new"]}
    )
    text = render([old, new])
    assert "cp-old" in text
    assert "cp-new" in text
    assert "10:00:00" in text
    assert "10:00:01" in text


# --------------------------------------------------------------------------- --verify


@pytest.fixture
def guard_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[log_anchor.AnchorPolicy]:
    """A log anchored at every line, where a config-less `log --verify` finds it."""
    state, log = tmp_path / "state", tmp_path / "decisions.log"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ZERTO_REWIND_STATE_DIR", str(state))
    monkeypatch.setenv("ZERTO_HOOK_LOG", str(log))
    monkeypatch.delenv("ZERTO_REWIND_CONFIG", raising=False)
    policy = log_anchor.AnchorPolicy(
        str(log), log_anchor.default_anchor_path(str(state), str(log)),
        str(state / log_anchor.KEY_FILE), every_lines=1,
    )  # fmt: skip
    register_anchor(policy)
    yield policy
    decisions_log._ANCHORING.pop(str(log), None)


def verify_line(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = log_cmd.main(["--verify", *args])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line, whatever the finding
    return code, out.strip()


def write(policy: log_anchor.AnchorPolicy, n: int) -> list[bytes]:
    for i in range(n):
        write_record(
            policy.log_path, {"tool": "t", "row": "confirmed", "decision": "context", "n": i}
        )
    return Path(policy.log_path).read_bytes().splitlines()


def test_verify_names_a_cut_tail_in_one_line(
    guard_log: log_anchor.AnchorPolicy, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = write(guard_log, 6)
    assert verify_line(capsys)[1].startswith("log OK: 6 lines, chain intact; anchored at seq 6")
    Path(guard_log.log_path).write_bytes(b"".join(line + b"\n" for line in lines[:3]))
    code, out = verify_line(capsys)
    assert code == 1
    assert out.startswith("log CUT: the log ends at seq 3, but the anchor of ")
    assert "3 lines cut from its end" in out


def test_anchor_option_checks_a_copy_kept_elsewhere(
    guard_log: log_anchor.AnchorPolicy, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = write(guard_log, 4)
    copy = tmp_path / "elsewhere" / "anchor.json"
    copy.parent.mkdir()
    shutil.copy(guard_log.anchor_path, copy)
    # the guard's own anchor moves on to seq 5; with --anchor only the copy (seq 4) counts
    write(guard_log, 1)
    Path(guard_log.log_path).write_bytes(b"".join(line + b"\n" for line in lines[:2]))
    code, out = verify_line(capsys, "--anchor", str(copy))
    assert (code, out.split(":")[0]) == (1, "log CUT")
    assert "vouches for seq 4" in out
    code, out = verify_line(capsys, "--anchor", str(tmp_path / "nothing.json"))
    assert (code, out) == (
        1,
        f"log NOT CHECKED: there is no anchor copy {tmp_path / 'nothing.json'}",
    )


def test_verify_names_a_forged_anchor(
    guard_log: log_anchor.AnchorPolicy, capsys: pytest.CaptureFixture[str]
) -> None:
    write(guard_log, 3)
    anchor = json.loads(Path(guard_log.anchor_path).read_text())
    Path(guard_log.anchor_path).write_text(json.dumps({**anchor, "seq": 2}))
    code, out = verify_line(capsys)
    assert code == 1
    assert out.startswith("log ANCHOR FORGED: the anchor of ")


def test_verify_names_a_missing_anchor(
    guard_log: log_anchor.AnchorPolicy, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions_log._ANCHORING.pop(guard_log.log_path)
    for i in range(100):  # log_anchor.every_lines's default, with no config
        write_record(guard_log.log_path, {"tool": "t", "decision": "deny", "n": i})
    code, out = verify_line(capsys)
    assert code == 1
    assert out.startswith("log NOT ANCHORED: no anchor at ")


def test_verify_reports_an_unreadable_anchor(
    guard_log: log_anchor.AnchorPolicy, capsys: pytest.CaptureFixture[str]
) -> None:
    write(guard_log, 1)
    Path(guard_log.anchor_path).write_text("not json")
    code, out = verify_line(capsys)
    assert code == 1
    assert out.startswith("log NOT CHECKED: ")
    assert "not a zerto-rewind log anchor" in out
