"""Signed anchors of the decision log's head (log_anchor.py, decisions_log.write_record)."""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from zerto_rewind.config.loader import sha256_hex
from zerto_rewind.core import decisions_log, log_anchor
from zerto_rewind.core.decisions_log import anchor_now, register_anchor, verify, write_record
from zerto_rewind.core.log_anchor import AnchorPolicy, check, load_anchor, public_key
from zerto_rewind.errors import StateError


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    """Each test registers its own logs; the process-wide caches start empty."""
    saved = dict(decisions_log._ANCHORING), dict(log_anchor._LAST)
    decisions_log._ANCHORING.clear()
    log_anchor._LAST.clear()
    yield
    decisions_log._ANCHORING.clear()
    decisions_log._ANCHORING.update(saved[0])
    log_anchor._LAST.clear()
    log_anchor._LAST.update(saved[1])


def policy(
    tmp_path: Path, every_lines: int = 1, every_s: float = 3600.0, **kw: Any
) -> AnchorPolicy:
    state = tmp_path / "state"
    log = str(tmp_path / "logs" / "decisions.log")
    return AnchorPolicy(
        log_path=log,
        anchor_path=log_anchor.default_anchor_path(str(state), log),
        key_path=str(state / log_anchor.KEY_FILE),
        every_lines=every_lines,
        every_s=every_s,
        **kw,
    )


def decision(n: int) -> dict[str, Any]:
    return {"time": f"2026-05-01T12:00:{n:02d}.000Z", "tool": "mcp__vsphere__power_off",
            "row": "confirmed", "decision": "context", "vms": [f"vm-{n}"],
            "vpgs": ["vpg-a"], "checkpoint_ids": [f"cp-{n}"], "landed_at": "2026-05-01T12:00:00Z",
            "client": "unix:agent"}  # fmt: skip


def logged(p: AnchorPolicy, n: int) -> list[bytes]:
    register_anchor(p)
    for i in range(1, n + 1):
        write_record(p.log_path, decision(i))
    return Path(p.log_path).read_bytes().splitlines()


def checked(p: AnchorPolicy, anchors: list[dict[str, Any]] | None = None) -> log_anchor.AnchorCheck:
    assert verify(p.log_path).ok  # these tests are about what the chain alone cannot see
    found = [a for a in [load_anchor(p.anchor_path)] if a] if anchors is None else anchors
    return check(p.log_path, found, public_key(p.key_path), p)


# --------------------------------------------------------------------------- writing


def test_the_head_is_signed_and_kept_under_the_state_dir(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=3)
    lines = logged(p, 7)
    anchor = load_anchor(p.anchor_path)
    assert anchor is not None
    # the first line (no anchor yet), then every 3 lines: 1, 4, 7
    assert (anchor["seq"], anchor["hash"]) == (7, sha256_hex(lines[6]))
    assert not p.anchor_path.startswith(os.path.dirname(p.log_path))
    assert stat.S_IMODE(os.stat(p.key_path).st_mode) == 0o600
    assert os.path.exists(os.path.join(os.path.dirname(p.key_path), log_anchor.PUBLIC_KEY_FILE))
    found = checked(p)
    assert (found.kind, found.what.split(" (")[0]) == ("ok", "anchored at seq 7")


def test_lines_between_anchors_are_not_anchored_until_due(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=3)
    logged(p, 3)
    anchor = load_anchor(p.anchor_path)
    assert anchor is not None
    assert anchor["seq"] == 1
    assert checked(p).kind == "ok"  # lines 2-3 are vouched for by the chain alone


def test_an_anchor_is_due_after_every_s_seconds_whatever_the_lines(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=1000, every_s=60.0)
    log_anchor._LAST[p.anchor_path] = (10, 1000.0)
    assert not log_anchor.due(p, 11, 1059.0)
    assert log_anchor.due(p, 11, 1060.0)
    assert log_anchor.due(p, 1010, 1001.0)
    assert log_anchor.due(p, 3, 1001.0)  # the log restarted below its anchor


def test_a_process_reads_the_last_anchor_from_the_file(tmp_path: Path) -> None:
    """The hook is a process per call: it finds the last anchor in the file, not memory."""
    p = policy(tmp_path, every_lines=5)
    logged(p, 2)
    log_anchor._LAST.clear()
    assert not log_anchor.due(p, 3, time.time())
    assert log_anchor.due(p, 6, time.time())


def test_a_loose_key_is_refused_and_the_decision_is_still_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = policy(tmp_path)
    logged(p, 1)
    os.chmod(p.key_path, 0o640)
    with pytest.raises(StateError, match="not private"):
        log_anchor._private_key(p.key_path)
    with caplog.at_level(logging.WARNING, "zerto_rewind.log"):
        write_record(p.log_path, decision(2))
    assert "not anchored" in caplog.text
    assert "chmod 600" in caplog.text
    assert len(Path(p.log_path).read_bytes().splitlines()) == 2
    anchor = load_anchor(p.anchor_path)
    assert anchor is not None
    assert anchor["seq"] == 1


def test_anchor_now_covers_the_head_once(tmp_path: Path) -> None:
    """A clean stop anchors lines the last anchor did not cover, and only those."""
    p = policy(tmp_path, every_lines=100)
    published: list[dict[str, Any]] = []
    p = p._replace(publish=published.append)
    logged(p, 4)
    assert [a["seq"] for a in published] == [1]
    assert anchor_now(p) is not None
    assert anchor_now(p) is None
    assert [a["seq"] for a in published] == [1, 4]
    assert checked(p).what.startswith("anchored at seq 4")


def test_an_unregistered_log_is_chained_but_not_anchored(tmp_path: Path) -> None:
    p = policy(tmp_path)
    write_record(p.log_path, decision(1))
    assert not os.path.exists(p.anchor_path)
    assert not os.path.exists(p.key_path)


# --------------------------------------------------------------------------- checking


def test_a_cut_tail_is_named_with_the_lines_missing(tmp_path: Path) -> None:
    p = policy(tmp_path)
    lines = logged(p, 10)
    Path(p.log_path).write_bytes(b"".join(line + b"\n" for line in lines[:5]))
    found = checked(p)
    assert found.kind == "cut"
    assert "the log ends at seq 5" in found.what
    assert "vouches for seq 10" in found.what
    assert "5 lines cut from its end" in found.what


def test_a_chain_rewritten_with_recomputed_hashes(tmp_path: Path) -> None:
    """A whole new chain (every prev right) still differs from the anchored line."""
    p = policy(tmp_path, every_lines=4)
    logged(p, 5)  # anchored at 1 and 5
    forged = tmp_path / "forged.log"
    for i in range(1, 6):
        write_record(str(forged), {**decision(i), "decision": "none" if i == 3 else "context"})
    os.replace(forged, p.log_path)
    found = checked(p)
    assert found.kind == "rewritten"
    assert "the line with seq 5 is not the one anchored" in found.what


def test_a_cut_log_written_on_after_is_rewritten_not_ok(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=100)
    lines = logged(p, 1)
    write_record(p.log_path, decision(2))
    anchor_now(p)
    Path(p.log_path).write_bytes(lines[0] + b"\n")
    decisions_log._ANCHORING.clear()  # the cutter writes without the key
    write_record(p.log_path, decision(9))
    assert checked(p).kind == "rewritten"


def test_an_altered_anchor_fails_its_signature(tmp_path: Path) -> None:
    p = policy(tmp_path)
    logged(p, 6)
    anchor = load_anchor(p.anchor_path)
    assert anchor is not None
    lowered = {**anchor, "seq": 3, "hash": sha256_hex(b"x")}  # to hide a cut
    found = checked(p, [lowered])
    assert found.kind == "forged"
    assert "not signed by the guard's key" in found.what


def test_an_anchor_signed_by_another_key_is_forged(tmp_path: Path) -> None:
    p = policy(tmp_path)
    logged(p, 2)
    anchor = load_anchor(p.anchor_path)
    assert anchor is not None
    other = Ed25519PrivateKey.generate()
    body = {k: v for k, v in anchor.items() if k != "sig"}
    sig = other.sign(log_anchor._signed_bytes(body))
    assert checked(p, [{**body, "sig": base64.b64encode(sig).decode()}]).kind == "forged"


def test_the_latest_anchor_of_several_copies_is_the_one_checked(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=100)
    logged(p, 1)
    first = load_anchor(p.anchor_path)
    write_record(p.log_path, decision(2))
    anchor_now(p)
    latest = load_anchor(p.anchor_path)
    assert first is not None
    assert latest is not None
    lines = Path(p.log_path).read_bytes().splitlines()
    Path(p.log_path).write_bytes(lines[0] + b"\n")
    assert checked(p, [first]).kind == "ok"  # the old copy alone cannot see the cut
    assert checked(p, [first, latest]).kind == "cut"


def test_a_damaged_anchor_file_is_a_state_error(tmp_path: Path) -> None:
    p = policy(tmp_path)
    logged(p, 1)
    Path(p.anchor_path).write_text('{"seq": 1}')
    with pytest.raises(StateError, match="not a zerto-rewind log anchor"):
        load_anchor(p.anchor_path)


def test_a_verifier_without_the_private_key_uses_the_public_file(tmp_path: Path) -> None:
    p = policy(tmp_path)
    logged(p, 1)
    expected = public_key(p.key_path)
    os.rename(p.key_path, p.key_path + ".away")
    key = public_key(p.key_path)
    assert key is not None
    assert expected is not None
    assert key.public_bytes_raw() == expected.public_bytes_raw()
    assert checked(p).kind == "ok"


# --------------------------------------------------------------------------- no anchor


def test_a_short_young_log_without_anchor_is_not_yet_anchored(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=10, every_s=600.0)
    for i in range(1, 4):
        write_record(p.log_path, {**decision(i), "time": None})  # written now, unanchored
    found = checked(p)
    assert found.ok
    assert found.kind == "not_yet"
    assert "3 new lines" in found.what


def test_a_long_log_without_anchor_is_missing_its_anchor(tmp_path: Path) -> None:
    p = policy(tmp_path, every_lines=3, every_s=600.0)
    for i in range(1, 4):
        write_record(p.log_path, {**decision(i), "time": None})
    found = checked(p)
    assert (found.ok, found.kind) == (False, "missing")
    assert p.anchor_path in found.what


def test_an_old_log_without_anchor_is_missing_its_anchor(tmp_path: Path) -> None:
    """Few lines, but the first was written long ago (its occurred_at): past every_s."""
    p = policy(tmp_path, every_lines=10, every_s=60.0)
    write_record(p.log_path, decision(1))  # occurred in 2026-05, long before now
    assert checked(p).kind == "missing"


def test_a_log_from_before_anchoring_is_not_yet_anchored(tmp_path: Path) -> None:
    """Old-shape lines (chained, no event_id) predate anchoring: an upgrade is not tampering."""
    p = policy(tmp_path, every_lines=1, every_s=1.0)
    log = Path(p.log_path)
    log.parent.mkdir(parents=True)
    prev = decisions_log.GENESIS
    lines = []
    for n in range(1, 4):
        record = {"time": "2024-01-01T00:00:00Z", "tool": "t", "row": "confirmed",
                  "decision": "context", "seq": n, "prev": prev}  # fmt: skip
        line = json.dumps(record, separators=(",", ":"))
        lines.append(line)
        prev = sha256_hex(line.encode())
    log.write_text("".join(line + "\n" for line in lines))
    assert verify(p.log_path).ok
    found = checked(p)
    assert found.kind == "not_yet"
    assert "predates anchoring" in found.what
    register_anchor(p)
    write_record(p.log_path, decision(4))  # the upgrade's first line anchors it
    assert checked(p).what.startswith("anchored at seq 4")


# --------------------------------------------------------------------------- record shape


def test_each_line_has_the_audit_draft_fields_and_the_zerto_extension(tmp_path: Path) -> None:
    p = policy(tmp_path)
    logged(p, 1)
    line = json.loads(Path(p.log_path).read_bytes().splitlines()[0])
    assert len(line["event_id"]) == 32
    assert line["occurred_at"] == "2026-05-01T12:00:01.000Z"
    assert (line["principal_id"], line["event_type"]) == ("unix:agent", "tool_call.decision")
    assert (line["tool_name"], line["outcome"]) == ("mcp__vsphere__power_off", "allowed")
    assert line["extensions"]["zerto_rewind"] == {
        "vpgs": ["vpg-a"], "checkpoint_ids": ["cp-1"], "landed_at": "2026-05-01T12:00:00Z"
    }  # fmt: skip
    assert (line["tool"], line["decision"], line["seq"]) == (
        "mcp__vsphere__power_off",
        "context",
        1,
    )


@pytest.mark.parametrize(
    ("record", "outcome", "event_type", "principal"),
    [
        ({"decision": "deny", "row": "failed", "client": "c"}, "denied", "tool_call.decision", "c"),
        ({"decision": "prompt", "row": "unlisted"}, "deferred", "tool_call.decision", None),
        ({"decision": "defer", "row": "pending"}, "deferred", "tool_call.decision", None),
        ({"decision": "deny", "row": "error"}, "error", "tool_call.decision", None),
        ({"decision": "approval", "answer": "approved", "approver": "unix:boss", "client": "c"},
         "allowed", "approval.approved", "unix:boss"),
        ({"decision": "approval", "answer": "requested", "approver": None, "client": "c"},
         "deferred", "approval.requested", "c"),
        ({"decision": "approval", "answer": "expired", "client": "c"},
         "denied", "approval.expired", "c"),
    ],
)  # fmt: skip
def test_outcomes_and_principals(
    record: dict[str, Any], outcome: str, event_type: str, principal: str | None
) -> None:
    shaped = decisions_log.audit_record({"tool": "t", **record})
    assert (shaped["outcome"], shaped["event_type"]) == (outcome, event_type)
    if principal is None:  # the hook: the process's own user
        assert str(shaped["principal_id"]).startswith(("unix:", "uid:"))
    else:
        assert shaped["principal_id"] == principal
    assert decisions_log.audit_record(shaped) is shaped  # shaped once


def test_cryptography_is_imported_only_when_an_anchor_is_due(tmp_path: Path) -> None:
    """The hook's logging path, in a process of its own: no anchor due, no cryptography."""
    p = policy(tmp_path, every_lines=100)
    logged(p, 1)  # the first line's anchor exists now
    script = (
        "import sys\n"
        "from zerto_rewind.core.decisions_log import register_anchor, write_record\n"
        "from zerto_rewind.core.log_anchor import AnchorPolicy\n"
        f"p = AnchorPolicy({p.log_path!r}, {p.anchor_path!r}, {p.key_path!r}, 100, 3600.0)\n"
        "register_anchor(p)\n"
        "write_record(p.log_path, {'tool': 't', 'decision': 'deny'})\n"
        "print(any(m.startswith('cryptography') for m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
    assert len(Path(p.log_path).read_bytes().splitlines()) == 2
