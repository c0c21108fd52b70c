"""rewind_plan: which change's checkpoint is each VM's rewind point, and what else is undone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerto_rewind.errors import UsageError
from zerto_rewind.recovery.rewind_build import changed_facts, plan_id
from zerto_rewind.recovery.rewind_plan import (
    Change,
    Scope,
    change_of,
    is_change,
    read_changes,
    scope_needles,
    select,
)


def change(
    line: int,
    session: str | None,
    vms: tuple[str, ...],
    *,
    cp: str | None = None,
    vpg: str = "vpg-web",
    decision: str = "context",
    approver: str | None = None,
    time: str | None = None,
) -> Change:
    """A change at ``line``; ``cp``: the checkpoint the guard recorded for VPG ``vpg``."""
    return Change(
        line=line,
        time=time or f"2026-12-03T10:{line:02d}:00.000Z",
        session_id=session,
        tool="vm_reconfigure",
        vms=vms,
        vpg_names=(vpg,) if vms else (),
        vpg_ids=(f"id-{vpg}",) if vms else (),
        checkpoint_ids=(cp,) if cp else (),
        tags=(f"zr {cp}",) if cp else (),
        landed_at=None,
        decision=decision,
        approver=approver,
        digest=f"{line:064x}",
    )


def test_is_change_counts_calls_let_through():
    """Allowed calls and approved or host-asked prompts are changes; denials, events are not."""
    assert is_change({"decision": "none"})
    assert is_change({"decision": "context"})
    assert is_change({"decision": "prompt"})
    assert is_change({"decision": "prompt", "answer": "used"})
    assert not is_change({"decision": "prompt", "answer": "denied"})
    assert not is_change({"decision": "deny"})
    assert not is_change({"decision": "approval", "answer": "approved"})
    assert not is_change({"decision": "rewind"})


def test_change_of_pairs_checkpoints_with_vpgs_only_when_aligned():
    """A checkpoint is tied to its VPG only when every VPG of the line got one."""
    one = {"decision": "context", "vms": ["a"], "vpg_ids": ["v1"], "checkpoint_ids": ["9"]}
    aligned = change_of(1, one, json.dumps(one).encode())
    assert aligned.rewind_points() == {"v1": ("9", None)}
    two = {**one, "vpg_ids": ["v1", "v2"]}
    partial = change_of(2, two, json.dumps(two).encode())
    assert partial.rewind_points() == {}
    assert aligned.digest != partial.digest


def test_read_changes_parses_only_lines_naming_a_needle(tmp_path: Path):
    """With needles, lines about other sessions and VMs are left out; line numbers stay."""
    log = tmp_path / "log.jsonl"
    lines = [
        {"decision": "context", "session_id": "s1", "vms": ["web-01"]},
        "not json",
        {"decision": "context", "session_id": "s2", "vms": ["db-01"]},
        {"decision": "context", "session_id": "s2", "vms": ["web-01"]},
        {"decision": "deny", "session_id": "s1", "vms": ["web-01"]},
    ]
    log.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    assert [c.line for c in read_changes(str(log))] == [1, 3, 4]
    assert [c.line for c in read_changes(str(log), ["web-01"])] == [1, 4]
    assert scope_needles(str(log), Scope(session_id="s1")) == {"s1", "web-01"}


def test_rewind_point_is_the_sessions_first_change_to_each_vm():
    """Two changes to web-01: the first one's checkpoint is the rewind point."""
    log = [
        change(1, "s1", ("web-01",), cp="100"),
        change(2, "s1", ("web-01",), cp="101"),
        change(3, "s1", ("db-01",), cp="200", vpg="vpg-db"),
    ]
    found = select(log, Scope(session_id="s1"))
    assert [(w.vm, w.point.line) for w in found.wanted] == [("web-01", 1), ("db-01", 3)]
    assert found.wanted[0].points() == {"id-vpg-web": ("100", "zr 100")}
    assert len(found.wanted[0].own) == 2
    assert found.unrewindable == ()


def test_later_changes_by_other_sessions_are_named():
    """A second session's change to the same VM after the rewind point is undone too."""
    log = [
        change(1, "s2", ("web-01",), cp="90"),  # before: not undone
        change(2, "s1", ("web-01",), cp="100"),
        change(3, "s2", ("web-01",), cp="110"),
        change(4, "s3", ("db-01",), cp="300", vpg="vpg-db"),  # another VM: not undone
    ]
    found = select(log, Scope(session_id="s1"))
    (web,) = found.wanted
    assert [c.line for c in web.others] == [3]
    assert [c.line for c in found.used] == [2, 3]


def test_what_cannot_be_rewound():
    """A call naming no VM, and an approved prompt before any checkpoint, are listed with why."""
    log = [
        change(1, "s1", ()),
        change(2, "s1", ("web-01",), decision="prompt", approver="web:alice"),
        change(3, "s1", ("web-01",), cp="100"),
        change(4, "s1", ("app-01",), decision="prompt"),
    ]
    found = select(log, Scope(session_id="s1"))
    assert [w.vm for w in found.wanted] == ["web-01"]
    reasons = {u.change.line: u.why for u in found.unrewindable}
    assert reasons[1] == "the call names no VM"
    assert "approved by web:alice" in reasons[2]
    assert "a person at the host" in reasons[4]


def test_vm_before_time_scope():
    """--vm VM --before TIME: the VM's first change at or after TIME is the rewind point."""
    log = [
        change(5, "s1", ("web-01",), cp="100"),
        change(10, "s2", ("web-01",), cp="110"),
        change(12, "s3", ("web-01",), cp="120"),
    ]
    found = select(log, Scope(vm="web-01", before="2026-12-03T10:07:00Z"))
    (web,) = found.wanted
    assert web.point.line == 10
    assert [c.line for c in web.own] == [10, 12]


def test_nothing_in_scope_and_bad_scopes_are_usage_errors():
    """An unknown session, a scope naming both or neither, and a bad time are refused."""
    with pytest.raises(UsageError, match="no change by session nope"):
        select([change(1, "s1", ("a",), cp="1")], Scope(session_id="nope"))
    with pytest.raises(UsageError):
        Scope()
    with pytest.raises(UsageError, match="--before"):
        Scope(vm="a")
    with pytest.raises(UsageError, match="ISO-8601"):
        select([change(1, "s1", ("a",), cp="1")], Scope(vm="a", before="yesterday"))


def test_plan_id_and_changed_facts_name_what_moved():
    """The id follows the facts; changed_facts names the moved ones of the VMs asked about."""
    scope = Scope(session_id="s1")
    before = {"web-01: journal": "checkpoint 100 in the journal", "db-01: VPG": "protecting"}
    now = {"web-01: journal": "checkpoint 100 gone", "db-01: VPG": "paused"}
    assert plan_id(scope, before) == plan_id(scope, dict(before))
    assert plan_id(scope, before) != plan_id(scope, now)
    assert changed_facts(before, now, {"web-01"}) == [
        "web-01: journal: was 'checkpoint 100 in the journal', now 'checkpoint 100 gone'"
    ]
    assert len(changed_facts(before, now, {"web-01", "db-01"})) == 2


def test_the_chunked_search_agrees_with_reading_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Lines split across chunks, and a last line with no newline, are found whole."""
    from zerto_rewind.core import log_line

    log = tmp_path / "log.jsonl"
    records = [
        {"decision": "context", "session_id": f"s{i % 3}", "vms": [f"vm-{i % 4}"], "n": i}
        for i in range(39)
    ]
    log.write_text("\n".join(json.dumps(r) for r in records))
    every = [c for c in read_changes(str(log)) if "vm-1" in c.vms or c.session_id == "s2"]
    monkeypatch.setattr(log_line, "_CHUNK", 7)
    assert read_changes(str(log), ["vm-1", "s2"]) == every
    assert every[-1].line == 39
