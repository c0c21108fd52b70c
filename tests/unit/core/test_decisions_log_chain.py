"""The decision log's hash chain: ``seq``/``prev`` on each line, ``verify`` (decisions_log.py)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.core.decisions_log import (
    GENESIS,
    VerifyReport,
    iter_records,
    tail,
    verify,
    write_record,
)
from zerto_rewind.errors import StateError


def decision(n: int, **extra: Any) -> dict[str, Any]:
    """A small log record, numbered so tests can tell lines apart."""
    return {"time": f"2025-05-01T12:00:{n:02d}.000Z", "tool": "mcp__vsphere__power_off",
            "row": "pending", "decision": "deny", "vms": [f"vm-{n}"], **extra}  # fmt: skip


def chain(path: Path, n: int) -> list[bytes]:
    """Write ``n`` records through write_record; the file's lines, without newlines."""
    for i in range(1, n + 1):
        write_record(str(path), decision(i))
    return path.read_bytes().splitlines()


def rewrite(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def sha(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def broken(report: VerifyReport, line: int, kind: str) -> str:
    """Assert the report names ``line`` and ``kind``; return its text for further checks."""
    assert report.problem is not None, report
    assert (report.problem.line, report.problem.kind) == (line, kind), report.problem
    assert report.lines == line
    assert not report.ok
    return f"{report.problem.what} — {report.problem.todo}"


# --------------------------------------------------------------------------- writing


def test_each_line_carries_seq_and_the_hash_of_the_line_before(tmp_path: Path) -> None:
    """seq counts from 1; prev is the SHA-256 of the previous line's bytes, zeros first."""
    lines = chain(tmp_path / "log", 5)
    records = [json.loads(line) for line in lines]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert records[0]["prev"] == GENESIS == "0" * 64
    for before, record in zip(lines, records[1:], strict=False):
        assert record["prev"] == sha(before)
    assert records[2]["vms"] == ["vm-3"]  # the record itself is kept as given


def test_a_new_log_is_private_and_its_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "decisions.log"
    write_record(str(path), decision(1))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_an_unwritable_log_is_a_state_error(tmp_path: Path) -> None:
    """The contract of write_record is unchanged: StateError, pointing at ZERTO_HOOK_LOG."""
    (tmp_path / "dir").mkdir()
    with pytest.raises(StateError, match="ZERTO_HOOK_LOG"):
        write_record(str(tmp_path / "dir"), decision(1))  # a directory is not a log


def test_the_last_line_is_found_from_the_end_across_chunks(tmp_path: Path) -> None:
    """Lines longer than one backwards read (4 KiB) still chain on their exact bytes."""
    path = tmp_path / "log"
    write_record(str(path), decision(1, reason="é" * 9000))
    write_record(str(path), decision(2, reason="x" * 5000))
    write_record(str(path), decision(3))
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[2])["prev"] == sha(lines[1])
    assert json.loads(lines[1])["prev"] == sha(lines[0])
    assert verify(str(path)).ok


def test_a_torn_last_line_gets_its_newline_and_is_reported(tmp_path: Path) -> None:
    """A last line without a newline (a torn write) stays a line of its own."""
    path = tmp_path / "log"
    chain(path, 2)
    with open(path, "ab") as fh:
        fh.write(b'{"seq":3,"pre')
    write_record(str(path), decision(4))
    lines = path.read_bytes().splitlines()
    assert len(lines) == 4
    assert json.loads(lines[3])["prev"] == sha(b'{"seq":3,"pre')
    broken(verify(str(path)), 3, "not_json")


def test_legacy_lines_before_the_chain_are_legal(tmp_path: Path) -> None:
    """Lines written before chaining: the first chained line hashes the last of them,
    and its seq is 1 (an unchained predecessor counts as seq 0)."""
    path = tmp_path / "log"
    legacy = [json.dumps(decision(i)).encode() for i in (1, 2, 3)]
    rewrite(path, legacy)
    lines = chain(path, 2)[3:]
    first = json.loads(lines[0])
    assert (first["seq"], first["prev"]) == (1, sha(legacy[-1]))
    report = verify(str(path))
    assert report.ok
    assert (report.lines, report.legacy) == (5, 3)
    # Editing the last legacy line is caught by the first chained line's prev.
    rewrite(path, [*legacy[:2], legacy[2].replace(b"deny", b"none"), *lines])
    assert "line 3" in broken(verify(str(path)), 4, "prev_mismatch")


def test_iter_records_and_tail_still_read_chained_lines(tmp_path: Path) -> None:
    path = tmp_path / "log"
    chain(path, 4)
    assert [r["vms"] for r in tail(str(path), 2)] == [["vm-3"], ["vm-4"]]
    assert [r["seq"] for r in iter_records(str(path))] == [1, 2, 3, 4]


# -------------------------------------------------------------------------- verify


def test_an_intact_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "log"
    chain(path, 30)
    report = verify(str(path))
    assert report.ok
    assert (report.exists, report.lines, report.legacy, report.problem) == (True, 30, 0, None)


def test_a_missing_log_is_not_ok_and_an_empty_one_is(tmp_path: Path) -> None:
    missing = verify(str(tmp_path / "nope"))
    assert (missing.exists, missing.ok) == (False, False)
    (tmp_path / "empty").write_bytes(b"")
    empty = verify(str(tmp_path / "empty"))
    assert (empty.ok, empty.lines) == (True, 0)


def test_an_edited_line_is_caught_at_the_next_line(tmp_path: Path) -> None:
    """deny → none on line 3: line 4's prev no longer matches."""
    path = tmp_path / "log"
    lines = chain(path, 6)
    lines[2] = lines[2].replace(b'"decision":"deny"', b'"decision":"none"')
    rewrite(path, lines)
    text = broken(verify(str(path)), 4, "prev_mismatch")
    assert "line 3" in text
    assert "edited" in text


def test_a_deleted_middle_line_is_a_seq_gap(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 6)
    rewrite(path, lines[:2] + lines[3:])
    assert "the line with seq 3 is missing" in broken(verify(str(path)), 3, "gap")


def test_several_deleted_lines_are_named_as_a_range(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 8)
    rewrite(path, lines[:2] + lines[5:])
    assert "lines with seq 3..5 are missing" in broken(verify(str(path)), 3, "gap")


def test_deleted_first_lines_are_a_gap_at_line_one(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 5)
    rewrite(path, lines[2:])
    assert "lines with seq 1..2 are missing" in broken(verify(str(path)), 1, "gap")


def test_two_swapped_lines_are_reordered_not_missing(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 6)
    lines[2], lines[3] = lines[3], lines[2]
    rewrite(path, lines)
    text = broken(verify(str(path)), 3, "reordered")
    assert "seq 4 comes before seq 3 (line 4)" in text


def test_a_forged_line_without_chain_fields_is_unchained(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 4)
    forged = json.dumps(decision(9, decision="context")).encode()
    rewrite(path, [*lines[:2], forged, *lines[2:]])
    assert "no seq/prev" in broken(verify(str(path)), 3, "unchained")


def test_a_forged_line_with_a_well_made_link_breaks_the_next_one(tmp_path: Path) -> None:
    """A forger who can hash the line before still cannot fit the line after."""
    path = tmp_path / "log"
    lines = chain(path, 4)
    forged = json.dumps(decision(9, seq=3, prev=sha(lines[1]))).encode()
    rewrite(path, [*lines[:2], forged, *lines[2:]])
    assert "seq 3 comes after seq 3" in broken(verify(str(path)), 4, "reordered")


def test_a_forged_line_with_a_wrong_prev_is_caught_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 3)
    forged = json.dumps(decision(9, seq=4, prev="ab" * 32)).encode()
    rewrite(path, [*lines, forged])
    assert "line 3" in broken(verify(str(path)), 4, "prev_mismatch")


def test_a_first_line_whose_prev_is_not_zeros(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 2)
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "prev": "1" * 64}).encode()
    rewrite(path, lines)
    assert "64 zeros" in broken(verify(str(path)), 1, "prev_mismatch")


def test_a_non_json_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 4)
    lines[1] = b"this is not json"
    rewrite(path, lines)
    assert "not a JSON object" in broken(verify(str(path)), 2, "not_json")


def test_malformed_chain_fields_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "log"
    lines = chain(path, 3)
    lines[2] = json.dumps({**json.loads(lines[2]), "seq": "3"}).encode()
    rewrite(path, lines)
    broken(verify(str(path)), 3, "malformed")


def test_what_a_chain_cannot_see_a_cut_off_tail(tmp_path: Path) -> None:
    """Documented limit: removing the last lines leaves a valid, shorter chain."""
    path = tmp_path / "log"
    lines = chain(path, 5)
    rewrite(path, lines[:3])
    assert verify(str(path)).ok


# --------------------------------------------------------------------- concurrency

_WRITER = textwrap.dedent(
    """
    import sys
    from zerto_rewind.core.decisions_log import write_record
    who = sys.argv[2]
    for i in range(50):
        write_record(sys.argv[1], {"who": who, "i": i, "reason": who * 3000})
    """
)


def test_concurrent_writers_never_fork_the_chain(tmp_path: Path) -> None:
    """Four processes writing 50 records each at once: seq 1..200, once each, chain intact."""
    path = tmp_path / "log"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), w]) for w in "abcd"]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    records = list(iter_records(str(path)))
    assert [r["seq"] for r in records] == list(range(1, 201))
    assert sorted((r["who"], r["i"]) for r in records) == [
        (w, i) for w in "abcd" for i in range(50)
    ]
    report = verify(str(path))
    assert report.ok, report.problem
    assert report.lines == 200
