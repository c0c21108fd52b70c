"""Injected faults: per route, a status, a delay, a malformed body, a drop, a hang or a 401;
per ZVM, ``down`` (connections refused) or ``wrong_cert`` (a certificate its CA did not sign);
per ZVM and VPG, ``hide_tags`` or ``move_tags`` (its view of the shared journal parts from
the other ZVMs': its checkpoint listings show no tag, or each tag on a neighbouring checkpoint).

A route fault targets a route name (``vms.list``), ``"*"`` (every API and token
route) or ``"METHOD path-regex"`` (``"GET /v1/vpgs/.*"``) and affects ``count``
requests (None: until cleared). A connection fault has no route and lasts until
the faults are cleared. A journal fault has no route either: it changes what
``GET /v1/vpgs/{id}/checkpoints`` lists for one VPG (``vpg``, a name; omitted: every
VPG) on this ZVM alone, for ``count`` listings. It is how a test shows the guard's
second witness a ZVM that disagrees with another about one journal, as a proxy on
one ZVM's path that moved a tag would. Each ZVM of a multi-site estate has its own table.
Hangs and delays wait on a condition, so clearing the faults or stopping the
server releases them at once.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from zerto_rewind.sim.errors import bad_request
from zerto_rewind.sim.journal import AUTOMATIC, TAGGED, Checkpoint
from zerto_rewind.sim.routes import ROUTE_NAMES

ROUTE_KINDS = ("status", "delay", "malformed", "drop", "hang", "unauthorized")
# Whole-ZVM faults, applied before a request exists: when a connection arrives.
CONNECTION_KINDS = ("down", "wrong_cert")
# One ZVM's view of a VPG's journal, applied by the checkpoint listing itself.
JOURNAL_KINDS = ("hide_tags", "move_tags")
KINDS = ROUTE_KINDS + CONNECTION_KINDS + JOURNAL_KINDS
ALL_ROUTES = "*"


@dataclass
class Fault:
    """One injected fault."""

    target: str
    kind: str
    status: int = 503
    delay_s: float = 0.0
    remaining: int | None = None
    method: str | None = None
    pattern: re.Pattern[str] | None = None
    vpg: str | None = None  # a journal fault's VPG name, lowercased (None: every VPG)

    def matches(self, route_name: str, method: str, path: str) -> bool:
        """Whether this fault applies to a request."""
        if self.kind in CONNECTION_KINDS or self.kind in JOURNAL_KINDS:
            return False
        if self.pattern is None:
            return self.target in (route_name, ALL_ROUTES)
        return self.method in (None, method) and self.pattern.fullmatch(path) is not None

    def to_json(self) -> dict[str, Any]:
        """As listed by ``GET /_sim/faults``."""
        answer = {
            "route": self.target,
            "kind": self.kind,
            "status": self.status,
            "delay_s": self.delay_s,
            "count": self.remaining,
        }
        if self.kind in JOURNAL_KINDS:
            answer["vpg"] = self.vpg
        return answer


def parse_fault(body: Any) -> Fault:
    """Validate a ``POST /_sim/faults`` body."""
    if not isinstance(body, dict):
        msg = "fault must be a JSON object"
        raise bad_request(msg)
    target, kind = body.get("route"), body.get("kind")
    if kind not in KINDS:
        msg = f"kind must be one of {', '.join(KINDS)}"
        raise bad_request(msg)
    if kind in CONNECTION_KINDS:
        if set(body) - {"kind", "route"} or target not in (None, ALL_ROUTES):
            msg = f"a {kind} fault is for the whole ZVM until cleared: no route, count or delay"
            raise bad_request(msg)
        return Fault(ALL_ROUTES, kind)
    if kind in JOURNAL_KINDS:
        return _journal_fault(body)
    if not isinstance(target, str) or not target:
        msg = "route is required: a route name or 'METHOD path-regex'"
        raise bad_request(msg)
    fault = Fault(target, kind, int(body.get("status", 503)), float(body.get("delay_s", 0.0)))
    count = body.get("count")
    fault.remaining = None if count is None else int(count)
    if target not in ROUTE_NAMES and target != ALL_ROUTES:
        method, _, regex = target.partition(" ")
        if not regex:
            method, regex = "", target
        try:
            fault.pattern = re.compile(regex, re.IGNORECASE)
        except re.error as exc:
            msg = f"route {target!r} is neither a route name nor a regex"
            raise bad_request(msg) from exc
        fault.method = method.upper() or None
    return fault


def _journal_fault(body: dict[str, Any]) -> Fault:
    kind, vpg, count = body["kind"], body.get("vpg"), body.get("count")
    if set(body) - {"kind", "vpg", "count"}:
        msg = f"a {kind} fault is for the checkpoint listing: only vpg and count, no route"
        raise bad_request(msg)
    if vpg is not None and (not isinstance(vpg, str) or not vpg):
        msg = "vpg must be a VPG name"
        raise bad_request(msg)
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        msg = "count must be a positive integer or null"
        raise bad_request(msg)
    return Fault("checkpoints.list", kind, remaining=count, vpg=vpg.lower() if vpg else None)


def parted_view(kind: str, listed: list[Checkpoint]) -> list[Checkpoint]:
    """A checkpoint listing as a ZVM whose view of the journal parts from the others' shows
    it: ``hide_tags``, no tag at all; ``move_tags``, each tag on the checkpoint before its
    own (after it, when its own is the first listed; dropped when it is the only one)."""
    untagged = [replace(c, tag=None, type=AUTOMATIC) if c.tag else c for c in listed]
    if kind == "hide_tags":
        return untagged
    for i, cp in enumerate(listed):
        if not cp.tag:
            continue
        to = i - 1 if i > 0 else i + 1
        if to < len(untagged):
            untagged[to] = replace(untagged[to], tag=cp.tag, type=TAGGED)
    return untagged


class FaultTable:
    """Active faults, plus the condition that hangs and delays wait on."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.changed = threading.Condition()
        self.generation = 0
        self.stopping = False
        # Called with the connection fault in force (or None) whenever it changes.
        self.on_connection: Callable[[str | None], None] | None = None

    @property
    def connection(self) -> str | None:
        """The connection fault in force (``down`` wins over ``wrong_cert``), or None."""
        kinds = {f.kind for f in self.faults if f.kind in CONNECTION_KINDS}
        return next((k for k in CONNECTION_KINDS if k in kinds), None)

    def add(self, fault: Fault) -> None:
        """Activate a fault."""
        with self.changed:
            before = self.connection
            self.faults.append(fault)
            after = self.connection
        self._connection_changed(before, after)

    def clear(self) -> None:
        """Remove every fault and release requests held by them."""
        with self.changed:
            before = self.connection
            self.faults.clear()
            self.generation += 1
            self.changed.notify_all()
        self._connection_changed(before, None)

    def _connection_changed(self, before: str | None, after: str | None) -> None:
        # Outside the condition: the callback stops or starts a listener.
        if before != after and self.on_connection is not None:
            self.on_connection(after)

    def stop(self) -> None:
        """Release every held request for good (server shutdown)."""
        with self.changed:
            self.stopping = True
            self.changed.notify_all()

    def take(self, route_name: str, method: str, path: str) -> Fault | None:
        """The first fault matching a request, counting it down."""
        with self.changed:
            for fault in self.faults:
                if fault.matches(route_name, method, path):
                    self._count_down(fault)
                    return fault
        return None

    def journal_view(self, vpg_name: str) -> str | None:
        """The journal fault on a listing of this VPG's checkpoints, if any, counting it down."""
        with self.changed:
            for fault in self.faults:
                if fault.kind in JOURNAL_KINDS and fault.vpg in (None, vpg_name.lower()):
                    self._count_down(fault)
                    return fault.kind
        return None

    def _count_down(self, fault: Fault) -> None:
        # Under self.changed: one more request taken by a fault with a count.
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                self.faults.remove(fault)

    def wait(self, seconds: float | None) -> None:
        """Sleep ``seconds`` (None: forever) unless faults are cleared or we stop."""
        with self.changed:
            start = self.generation
            self.changed.wait_for(
                lambda: self.stopping or self.generation != start, timeout=seconds
            )
