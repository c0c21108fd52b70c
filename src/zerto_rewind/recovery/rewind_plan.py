"""Which checkpoint puts each VM a session changed back: the log's side of a rewind plan.

Pure: the decision log's lines come in as :class:`Change` values (read by
:func:`read_changes`, the one function that knows the log's shape), and
:func:`select` says, for each VM, which change's checkpoint is its rewind point,
what the rewind would also undo, and what cannot be rewound. What the ZVM says
about those checkpoints is added by :mod:`.rewind_build`.

The rewind point of a VM is the checkpoint the session's *first* change to that
VM recorded: the guard tagged it before letting that change through, so the
journal holds the VM as it was before the session touched it. A change let
through with no checkpoint (a prompt a person approved, a tag that had not landed)
has no rewind point: it is listed as what cannot be rewound.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..core.log_line import lines_holding
from ..core.sessions import kind_of
from ..errors import StateError, UsageError

if TYPE_CHECKING:
    from ..core.log_index import LogIndex
    from ..core.record_mac import RecordMac

__all__ = [
    "Change",
    "Scope",
    "Selection",
    "Unrewindable",
    "Wanted",
    "epoch_of",
    "is_change",
    "plan_changes",
    "read_changes",
    "scope_needles",
    "select",
]


@dataclass(frozen=True)
class Change:
    """One call the guard let through, as its decision-log line tells it."""

    line: int  # the record's place in the log, 1-based: the order calls were decided in
    time: str
    session_id: str | None
    tool: str
    vms: tuple[str, ...]
    vpg_names: tuple[str, ...]
    vpg_ids: tuple[str, ...]
    checkpoint_ids: tuple[str, ...]
    tags: tuple[str, ...]
    landed_at: str | None
    decision: str
    approver: str | None
    # SHA-256 of the line's bytes as written (the index hands back the same bytes as the
    # log): a plan id covers the lines it used
    digest: str

    def rewind_points(self) -> dict[str, tuple[str, str | None]]:
        """VPG id -> (checkpoint id, tag) the guard recorded before this change.

        The log lists checkpoints only for the VPGs that got one, so they are paired
        with VPGs only when every VPG got one (or there is one of each)."""
        if not self.checkpoint_ids or len(self.checkpoint_ids) != len(self.vpg_ids):
            return {}
        tags: list[str | None] = list(self.tags)
        if len(tags) != len(self.checkpoint_ids):
            tags = [None] * len(self.checkpoint_ids)
        return {
            vpg: (cp, tag)
            for vpg, cp, tag in zip(self.vpg_ids, self.checkpoint_ids, tags, strict=True)
        }

    def to_json(self) -> dict[str, Any]:
        """What a plan shows of the change (ids and names, never an argument value)."""
        return {
            "time": self.time,
            "session_id": self.session_id,
            "tool": self.tool,
            "vms": list(self.vms),
            "vpgs": list(self.vpg_names),
            "checkpoint_ids": list(self.checkpoint_ids),
            "decision": self.decision,
            "approver": self.approver,
        }


def is_change(record: dict[str, Any]) -> bool:
    """Whether a log record is a call the guard let through: what a session's timeline
    counts as a change (:func:`~zerto_rewind.core.sessions.kind_of`)."""
    return kind_of(record) == "change"


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str) and v)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def change_of(line: int, record: dict[str, Any], raw: bytes) -> Change:
    """A log record (``raw``: its line as written) as a :class:`Change`."""
    return Change(
        line=line,
        time=str(record.get("time") or ""),
        session_id=_text(record.get("session_id")),
        tool=str(record.get("tool") or ""),
        vms=_strings(record.get("vms")),
        vpg_names=_strings(record.get("vpgs")),
        vpg_ids=_strings(record.get("vpg_ids")),
        checkpoint_ids=_strings(record.get("checkpoint_ids")),
        tags=_strings(record.get("tags")),
        landed_at=_text(record.get("landed_at")),
        decision=str(record.get("decision") or ""),
        approver=_text(record.get("approver")),
        digest=hashlib.sha256(raw.rstrip(b"\r\n")).hexdigest(),
    )


def read_changes(log_path: str, needles: Iterable[str] = ()) -> list[Change]:
    """The changes in the decision log, oldest first, read front to back.

    With ``needles`` (session ids, VM names, VPG ids), only the changes naming one of
    them as their session, a VM or a VPG id: a line that holds none of them as a JSON
    string is not even parsed, and a plan over a long log then costs about the size of
    the log in bytes, not in lines. Approval events are not calls; a line that is not
    JSON is skipped. :func:`plan_changes` reads the same through the log's index.
    """
    keys = {json.dumps(n, ensure_ascii=a).encode() for n in needles for a in (False, True)}
    try:
        fh = open(log_path, "rb")  # noqa: SIM115  # closed below
    except FileNotFoundError:
        return []
    except OSError as exc:
        msg = f"cannot read the decision log {log_path}: {exc.strerror}; run as its owner"
        raise StateError(msg) from exc
    with fh:
        lines = lines_holding(fh, lambda: keys) if keys else enumerate(fh, start=1)
        return _changes(lines, frozenset(needles))


def plan_changes(log_path: str, scope: Scope, *, mac: RecordMac | None = None) -> list[Change]:
    """The changes a plan for ``scope`` rests on: those naming its session or VM, then
    those naming the VMs and VPGs its changes named (:func:`scope_needles`).

    With ``mac`` (the state's MAC key), through the log's index (:mod:`..core.log_index`)
    when it can be used: only the lines filed under those names are read, so the cost
    follows what the plan names, not the log's size. Otherwise, or if the index cannot
    be used (another user, no key, a row that does not verify), the log is searched
    front to back. Both give the same changes, digests included (the index hands back
    each line's bytes)."""
    if mac is not None:
        changes = _indexed_changes(log_path, scope, mac)
        if changes is not None:
            return changes
    return read_changes(log_path, scope_needles(log_path, scope))


def _indexed_changes(log_path: str, scope: Scope, mac: RecordMac) -> list[Change] | None:
    from ..core.log_index import open_index

    index = open_index(log_path, mac)
    if index is None:
        return None
    with index:
        first = _first_needle(scope)
        found = _through(index, log_path, {first})
        if found is None:
            return None
        return _through(index, log_path, _needles_of(first, _in_scope(found, scope)))


def _through(index: LogIndex, log_path: str, needles: set[str]) -> list[Change] | None:
    """The changes naming one of ``needles``, read through the index; None: read the log."""
    from ..core.log_index import SESSION, VM, VPG

    keys = [(kind, name) for name in sorted(needles) for kind in (SESSION, VM, VPG)]
    lines = index.raw_lines(log_path, keys)
    return None if lines is None else _changes(lines, frozenset(needles))


def _changes(lines: Iterable[tuple[int, bytes]], needles: frozenset[str]) -> list[Change]:
    """The changes among ``lines`` naming one of ``needles`` (all of them if none)."""
    changes: list[Change] = []
    for number, raw in lines:
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict) or not is_change(record):
            continue
        change = change_of(number, record, raw)
        if not needles or _names_one(change, needles):
            changes.append(change)
    return changes


def _names_one(change: Change, needles: frozenset[str]) -> bool:
    """Whether the change names a needle as its session, a VM or a VPG id (what the
    index files a line under; a needle met elsewhere in a line does not count)."""
    return change.session_id in needles or not needles.isdisjoint((*change.vms, *change.vpg_ids))


def scope_needles(log_path: str, scope: Scope) -> set[str]:
    """What to look for in the log for ``scope``: its session or VM, then its VMs and VPGs."""
    first = _first_needle(scope)
    return _needles_of(first, _in_scope(read_changes(log_path, (first,)), scope))


def _first_needle(scope: Scope) -> str:
    first = scope.session_id if scope.session_id is not None else scope.vm
    assert first is not None  # Scope checks
    return first


def _needles_of(first: str, in_scope: list[Change]) -> set[str]:
    return (
        {first}
        | {vm for c in in_scope for vm in c.vms}
        | {vpg for c in in_scope for vpg in c.vpg_ids}
    )


def epoch_of(text: str) -> float:
    """An ISO-8601 time (``Z`` or an offset; no zone means UTC) as seconds since the epoch."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        msg = f"{text!r} is not an ISO-8601 time, e.g. 2026-12-03T14:05:00Z"
        raise UsageError(msg) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


# ---------------------------------------------------------------- selection


@dataclass(frozen=True)
class Scope:
    """What to rewind: one session's changes, or one VM's changes from a time on."""

    session_id: str | None = None
    vm: str | None = None
    before: str | None = None  # ISO time: the VM's first change at or after it

    def __post_init__(self) -> None:
        if (self.session_id is None) == (self.vm is None):
            msg = "name a session (--session ID), or a VM and a time (--vm VM --before TIME)"
            raise UsageError(msg)
        if self.vm is not None and self.before is None:
            msg = "--vm needs --before TIME: the VM is put back as it was before that time"
            raise UsageError(msg)

    def to_json(self) -> dict[str, str]:
        """The scope as a saved plan keeps it."""
        fields = {"session_id": self.session_id, "vm": self.vm, "before": self.before}
        return {k: v for k, v in fields.items() if v is not None}

    @classmethod
    def from_json(cls, data: Any) -> Scope:
        """A saved plan's scope; UsageError if it is not one."""
        if not isinstance(data, dict):
            msg = "the saved plan has no scope: build the plan again"
            raise UsageError(msg)
        return cls(_text(data.get("session_id")), _text(data.get("vm")), _text(data.get("before")))

    def describe(self) -> str:
        if self.session_id is not None:
            return f"session {self.session_id}"
        return f"VM {self.vm} before {self.before}"


@dataclass(frozen=True)
class Wanted:
    """One VM to put back, as the log tells it."""

    vm: str
    first: Change  # the first change to the VM in scope
    point: Change  # the change whose checkpoint is the rewind point
    own: tuple[Change, ...]  # the changes in scope to the VM
    others: tuple[Change, ...]  # later changes to it by other sessions: undone too

    def points(self) -> dict[str, tuple[str, str | None]]:
        return self.point.rewind_points()


@dataclass(frozen=True)
class Unrewindable:
    """A change in scope that no checkpoint undoes, and why."""

    change: Change
    why: str


@dataclass(frozen=True)
class Selection:
    """What :func:`select` found."""

    wanted: tuple[Wanted, ...]
    unrewindable: tuple[Unrewindable, ...]
    used: tuple[Change, ...]  # every log line the selection rests on


def select(changes: Iterable[Change], scope: Scope) -> Selection:
    """The VMs to put back and the changes that cannot be; UsageError if nothing is in scope."""
    every = list(changes)
    in_scope = _in_scope(every, scope)
    if not in_scope:
        msg = (
            f"the decision log holds no change by {scope.describe()}: check the id with "
            "`zerto-rewind sessions` (or `zerto-rewind log --session ID`)"
        )
        raise UsageError(msg)
    unrewindable = [Unrewindable(c, "the call names no VM") for c in in_scope if not c.vms]
    wanted: list[Wanted] = []
    for vm in _vms_in_order(in_scope):
        own = tuple(c for c in in_scope if vm in c.vms)
        point = next((c for c in own if c.rewind_points()), None)
        before = own if point is None else tuple(c for c in own if c.line < point.line)
        unrewindable += [Unrewindable(c, _no_point(c)) for c in before]
        if point is None:
            continue
        others = tuple(
            c
            for c in every
            if vm in c.vms and c.line > point.line and c not in own and _other(c, scope)
        )
        wanted.append(Wanted(vm, own[0], point, own, others))
    unique = {(u.change.line, u.why): u for u in unrewindable}
    used = {c.line: c for c in in_scope}
    used.update({c.line: c for w in wanted for c in w.others})
    lines = tuple(used[k] for k in sorted(used))
    return Selection(tuple(wanted), tuple(unique.values()), lines)


def _in_scope(changes: list[Change], scope: Scope) -> list[Change]:
    if scope.session_id is not None:
        return [c for c in changes if c.session_id == scope.session_id]
    vm, before = scope.vm, scope.before
    assert vm is not None  # Scope checks
    assert before is not None
    since = epoch_of(before)
    return [c for c in changes if vm in c.vms and _at(c) >= since]


def _at(change: Change) -> float:
    """When the change was decided; a line whose time does not parse counts as long ago."""
    try:
        return epoch_of(change.time)
    except UsageError:
        return float("-inf")


def _other(change: Change, scope: Scope) -> bool:
    return scope.session_id is None or change.session_id != scope.session_id


def _vms_in_order(changes: list[Change]) -> list[str]:
    seen: dict[str, None] = {}
    for change in changes:
        for vm in change.vms:
            seen.setdefault(vm)
    return list(seen)


def _no_point(change: Change) -> str:
    if change.decision == "prompt":
        who = change.approver or "a person at the host"
        return f"no rewind point: approved by {who}"
    return "no rewind point recorded (the checkpoint had not landed when the call ran)"
