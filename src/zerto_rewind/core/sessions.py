"""Agent sessions as the decision log records them: the list, and one session's timeline.

The list reads the log once, front to back, a line at a time (never the whole file in
memory), as ``zerto-rewind log`` does: the one file the config names, no rotated
copies (zerto-rewind does not rotate its log; a copy rotated away by another tool
is not read). The timeline does too, unless it is given the state's MAC key: then it
reads only the lines the log's index (:mod:`.log_index`) names.

What a line counts as (:func:`kind_of`), for a person asking "what did this
session change?":

- ``change``: the guard let the call through: ``none`` / ``context`` (a rewind
  point was made or pending), or ``prompt`` answered ``approved``, or ``prompt`` with
  no answer recorded (a hook asked the person at the host; it may have run, so it
  counts);
- ``denied``: the guard refused it (``deny``); shown in the timeline, not a change;
- ``not run``: a prompt nobody approved (declined, timed out, no approver…);
- ``deferred``: a headless run paused (``defer``); a resumed call writes its own line.

Read-only calls write no line, so they are never seen. Approval events
(``decision: approval``) are not calls: they name who approved a prompt that the
call's own line may not (a hook's line, for one). Result events
(:mod:`.call_result`) give a change its ``result``; a change without one shows
``not recorded``. Lines without a ``session_id`` belong to no session and are left
out of both views (``zerto-rewind log`` shows them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from ..errors import StateError, UsageError
from .call_result import RESULT_EVENT
from .log_line import lines_holding, log_record

if TYPE_CHECKING:
    from .record_mac import RecordMac

__all__ = [
    "NOT_RECORDED",
    "Entry",
    "Later",
    "SessionSummary",
    "Timeline",
    "kind_of",
    "list_sessions",
    "parse_since",
    "read_timeline",
]

NOT_RECORDED = "not recorded"
_FORWARDED_ANSWERS = frozenset({"approved", "used"})


def kind_of(record: dict[str, Any]) -> str:
    """``change``, ``denied``, ``not run`` or ``deferred``: see the module's docstring."""
    decision = str(record.get("decision") or "")
    if decision in ("none", "context"):
        return "change"
    if decision == "prompt":
        answer = str(record.get("answer") or "")
        return "change" if not answer or answer in _FORWARDED_ANSWERS else "not run"
    if decision == "defer":
        return "deferred"
    return "denied"


@dataclass(frozen=True)
class Later:
    """A change to one of the session's VMs by another session, after the session's own."""

    time: str
    session_id: str
    tool: str
    vms: tuple[str, ...]
    line: int

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "session_id": self.session_id,
            "tool": self.tool,
            "vms": list(self.vms),
        }


@dataclass
class Entry:
    """One call of a session, as its decision line (and result line, if any) tell it."""

    line: int  # 1-based line in the log: the order calls were decided in
    record: dict[str, Any]
    result: str = NOT_RECORDED
    later: list[Later] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return kind_of(self.record)

    @property
    def time(self) -> str:
        return str(self.record.get("time") or "")

    @property
    def tool(self) -> str:
        return str(self.record.get("tool") or "")

    @property
    def vms(self) -> tuple[str, ...]:
        return _strings(self.record.get("vms"))

    @property
    def decision(self) -> str:
        """The decision as a person says it: ``allowed``, ``denied``, ``prompt: approved``…"""
        decision = str(self.record.get("decision") or "")
        answer = str(self.record.get("answer") or "")
        if decision == "prompt":
            return f"prompt: {answer}" if answer else "prompt: asked at the host"
        return {"none": "allowed", "context": "allowed", "deny": "denied"}.get(decision, decision)

    @property
    def checkpoint(self) -> dict[str, Any] | None:
        """The rewind point: checkpoint id(s), tag(s), when it landed; None without one."""
        ids, tags = _strings(self.record.get("checkpoint_ids")), _strings(self.record.get("tags"))
        if not ids and not tags:
            return None
        return {
            "checkpoint_ids": list(ids),
            "tags": list(tags),
            "landed_at": self.record.get("landed_at"),
            "vpgs": list(_strings(self.record.get("vpgs"))),
            "row": self.record.get("row"),
        }

    @property
    def rewind_point(self) -> str:
        """One line: the checkpoint it can be rewound to, or why there is none."""
        point = self.checkpoint
        if point is not None and point["checkpoint_ids"]:
            landed = point["landed_at"] or "time not recorded"
            tags = ", ".join(point["tags"])
            return f"checkpoint {', '.join(point['checkpoint_ids'])} ({tags}, landed {landed})"
        if point is not None:
            return f"tag {', '.join(point['tags'])} requested, not landed when the call ran"
        if self.kind != "change":
            return ""
        approver = self.record.get("approver")
        return f"no rewind point, approved by {approver}" if approver else "no rewind point"

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "time": self.time,
            "tool": self.tool,
            "vms": list(self.vms),
            "kind": self.kind,
            "decision": self.decision,
            "row": self.record.get("row"),
            "result": self.result if self.kind == "change" else None,
            "checkpoint": self.checkpoint,
            "rewind_point": self.rewind_point,
            "approver": self.record.get("approver"),
            "tool_use_id": self.record.get("tool_use_id"),
            "later_by_other_sessions": [later.to_json() for later in self.later],
        }


@dataclass
class SessionSummary:
    """One session in the list."""

    session_id: str
    principal: str = ""
    host: str = ""
    first: str = ""  # the first change (empty if the session changed nothing)
    last: str = ""
    last_seen: str = ""  # the session's latest line of any kind: the list's order
    changes: int = 0
    refused: int = 0  # denied, not run or deferred
    vms: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "principal": self.principal,
            "host": self.host,
            "first_change": self.first or None,
            "last_change": self.last or None,
            "last_seen": self.last_seen,
            "changes": self.changes,
            "refused": self.refused,
            "vms": self.vms,
        }


@dataclass
class Timeline:
    """One session's calls, in the order they were decided."""

    session_id: str
    principal: str
    host: str
    entries: list[Entry]

    @property
    def changes(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "change"]

    def to_json(self) -> dict[str, Any]:
        changes = self.changes
        return {
            "session_id": self.session_id,
            "principal": self.principal,
            "host": self.host,
            "first_change": changes[0].time if changes else None,
            "last_change": changes[-1].time if changes else None,
            "changes": len(changes),
            "entries": [e.to_json() for e in self.entries],
        }


# --------------------------------------------------------------------------- reading


def _open(path: str) -> BinaryIO | None:
    try:
        return open(path, "rb")  # the caller closes it
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"cannot read log {path}: {exc.strerror}; run as the user that owns it"
        raise StateError(msg) from exc


def _lines(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for every readable line; damaged lines are skipped."""
    fh = _open(path)
    if fh is None:
        return
    with fh:
        for number, line in enumerate(fh, start=1):
            record = log_record(line)
            if record is not None:
                yield number, record


def _matching(
    path: str, needles: Callable[[], list[bytes]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for the lines holding one of ``needles()``, in order
    (:func:`~.log_line.lines_holding`); damaged lines are skipped."""
    fh = _open(path)
    if fh is None:
        return
    with fh:
        for number, line in lines_holding(fh, needles):
            record = log_record(line)
            if record is not None:
                yield number, record


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _is_result(record: dict[str, Any]) -> bool:
    return record.get("event_type") == RESULT_EVENT


def _is_approval(record: dict[str, Any]) -> bool:
    return record.get("decision") == "approval"


def _principal(record: dict[str, Any]) -> str:
    return str(record.get("client") or record.get("principal_id") or "")


def _host(record: dict[str, Any]) -> str:
    return str(record.get("host") or record.get("origin") or "")


def parse_since(text: str, now: float) -> str:
    """``--since``: ``30m``, ``12h``, ``7d`` ago, or an ISO date/time (UTC); as a log time."""
    from .decision import fmt_time

    units = {"m": 60, "h": 3600, "d": 86400}
    raw = text.strip()
    if raw[:-1].isdigit() and raw[-1:] in units:
        return fmt_time(now - int(raw[:-1]) * units[raw[-1]])
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        msg = f"--since {text!r} is not a time; give 30m, 12h, 7d or 2026-12-01T08:00"
        raise UsageError(msg) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return fmt_time(moment.timestamp())


def list_sessions(path: str, *, since: str = "", limit: int = 20) -> list[SessionSummary]:
    """The sessions seen since ``since`` (a log time; all if empty), latest activity first."""
    found: dict[str, SessionSummary] = {}
    for _, record in _lines(path):
        session_id = record.get("session_id")
        if not session_id or _is_result(record) or _is_approval(record):
            continue
        when = str(record.get("time") or "")
        if since and when < since:
            continue
        summary = found.get(str(session_id))
        if summary is None:
            summary = found[str(session_id)] = SessionSummary(str(session_id))
        _count(summary, record, when)
    ordered = sorted(found.values(), key=lambda s: s.last_seen, reverse=True)
    return ordered[: max(0, limit)]


def _count(summary: SessionSummary, record: dict[str, Any], when: str) -> None:
    summary.principal = summary.principal or _principal(record)
    summary.host = summary.host or _host(record)
    summary.last_seen = max(summary.last_seen, when)
    if kind_of(record) != "change":
        summary.refused += 1
        return
    summary.changes += 1
    summary.first = summary.first or when
    summary.last = when
    for vm in _strings(record.get("vms")):
        if vm not in summary.vms:
            summary.vms.append(vm)


def read_timeline(path: str, prefix: str, *, mac: RecordMac | None = None) -> Timeline:
    """The session whose id is ``prefix`` or starts with it; UsageError if none or several.

    With ``mac`` (the state's MAC key), the log's index (:mod:`.log_index`) is used,
    made or brought up to date, so only the session's lines and its VMs' are read;
    without it, or when the index cannot be used, the log is read front to back."""
    prefix = prefix.strip()
    if not prefix:
        msg = "no session id given; `zerto-rewind sessions` lists them"
        raise UsageError(msg)
    reader = _TimelineReader(prefix)
    lines = _indexed(path, prefix, mac) if mac is not None else None
    for number, record in _matching(path, reader.needles) if lines is None else lines:
        reader.take(number, record)
    return reader.timeline(path)


def _indexed(path: str, prefix: str, mac: RecordMac) -> list[tuple[int, dict[str, Any]]] | None:
    from .log_index import open_index

    index = open_index(path, mac)
    if index is None:
        return None
    with index:
        return index.lines_for(path, prefix, _watched)


def _watched(record: dict[str, Any]) -> tuple[str, ...]:
    """The VMs a line makes ``session show`` watch for later changes, if it is the session's."""
    if _is_result(record) or _is_approval(record) or kind_of(record) != "change":
        return ()
    return _strings(record.get("vms"))


class _TimelineReader:
    """Collects, in one pass, the calls of every session matching a prefix, and the
    other sessions' changes to the VMs those sessions changed before them."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.candidates: dict[str, list[Entry]] = {}
        self.vms: set[str] = set()  # VMs the candidates changed so far
        self.others: list[Entry] = []  # other sessions' changes to those VMs, after
        self.results: dict[tuple[str, str], str] = {}
        self.approvers: dict[str, str] = {}  # approval id -> who approved it
        self._needles = [json.dumps(prefix, ensure_ascii=False)[:-1].encode()]

    def needles(self) -> list[bytes]:
        return self._needles

    def take(self, number: int, record: dict[str, Any]) -> None:
        session_id = str(record.get("session_id") or "")
        mine = bool(session_id) and session_id.startswith(self.prefix)
        if _is_approval(record):
            if record.get("answer") == "approved" and record.get("approval_id"):
                self.approvers[str(record["approval_id"])] = str(record.get("approver") or "")
            return
        if _is_result(record):
            if mine and record.get("tool_use_id"):
                key = (session_id, str(record["tool_use_id"]))
                self.results[key] = str(record.get("result") or "unknown")
            return
        entry = Entry(number, record)
        if mine:
            self.candidates.setdefault(session_id, []).append(entry)
            if entry.kind == "change":
                self._watch(entry.vms)
        elif session_id and entry.kind == "change" and self.vms.intersection(entry.vms):
            self.others.append(entry)

    def _watch(self, vms: tuple[str, ...]) -> None:
        for vm in vms:
            if vm not in self.vms:
                self.vms.add(vm)
                self._needles.append(json.dumps(vm, ensure_ascii=False).encode())

    def timeline(self, path: str) -> Timeline:
        if not self.candidates:
            msg = (
                f"no session {self.prefix!r} in {path}; `zerto-rewind sessions` lists the "
                "sessions it holds (check --log or --config if it should be there)"
            )
            raise UsageError(msg)
        if self.prefix in self.candidates:  # a whole id wins over the longer ids it starts
            session_id = self.prefix
        elif len(self.candidates) == 1:
            (session_id,) = self.candidates
        else:
            some = ", ".join(sorted(self.candidates)[:5])
            msg = f"{self.prefix!r} starts several session ids ({some}); give more of the id"
            raise UsageError(msg)
        entries = self.candidates.pop(session_id)
        for rest in self.candidates.values():  # the other matches are other sessions
            self.others.extend(e for e in rest if e.kind == "change")
        self.others.sort(key=lambda e: e.line)
        for entry in entries:
            self._complete(session_id, entry)
        first = entries[0].record
        return Timeline(session_id, _principal(first), _host(first), entries)

    def _complete(self, session_id: str, entry: Entry) -> None:
        if entry.kind != "change":
            return
        use_id = entry.record.get("tool_use_id")
        if use_id:
            entry.result = self.results.get((session_id, str(use_id)), NOT_RECORDED)
        request = entry.record.get("approval_id")
        if not entry.record.get("approver") and request and self.approvers.get(str(request)):
            entry.record["approver"] = self.approvers[str(request)]
        mine = set(entry.vms)
        entry.later = [
            Later(o.time, str(o.record.get("session_id")), o.tool, o.vms, o.line)
            for o in self.others
            if o.line > entry.line and mine.intersection(o.vms)
        ]
