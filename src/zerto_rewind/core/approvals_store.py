"""The one protocol both approval stores keep, and the rules they share.

:class:`ApprovalStore` is what a door needs of a store; ``approvals_file`` and
``approvals_redis`` implement it over the same model (``approvals_model``) and
apply the same rules from here, each under its own lock or transaction, so the
two cannot drift.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .approvals_model import (
    _ID_ALPHABET,
    APPROVED,
    DEFAULT_MAX_OPEN,
    DENIED,
    PENDING,
    ApprovalError,
    ApprovalLimitError,
    ApprovalRequest,
)
from .record_mac import RecordMac

__all__ = [
    "MAX_KEPT_ENDED",
    "MAX_OPEN_TOTAL",
    "ApprovalStore",
    "UsedApprovals",
    "check_id",
    "check_open_cap",
    "decide_request",
    "latest_ended",
    "oldest_pending",
    "open_request_record",
    "over_kept",
]

# Bounds on the store whatever the number of principals: open requests in all, and
# ended (decided, used, expired) ones kept for the page; the oldest ended go first.
MAX_OPEN_TOTAL = 1000
MAX_KEPT_ENDED = 1000


def oldest_pending(requests: Iterable[ApprovalRequest]) -> list[ApprovalRequest]:
    """The pending requests, oldest first: what ``ApprovalStore.pending`` returns."""
    return sorted((r for r in requests if r.state == PENDING), key=lambda r: r.created)


def latest_ended(requests: Iterable[ApprovalRequest], limit: int) -> list[ApprovalRequest]:
    """The ended requests, the latest done first, at most ``limit``: ``ApprovalStore.recent``."""
    ended = [r for r in requests if r.state != PENDING]
    ended.sort(key=lambda r: r.done_at, reverse=True)
    return ended[:limit]


class ApprovalStore(Protocol):
    """Where the service keeps approval requests; every method is atomic."""

    def open_request(
        self, template: ApprovalRequest, max_open: int = DEFAULT_MAX_OPEN
    ) -> tuple[ApprovalRequest, bool]:
        """The live request for the same principal and call, else ``template`` stored.

        Returns ``(request, created)``: a retried call joins its own open request.
        ApprovalLimitError, and nothing stored, if the principal already holds
        ``max_open`` live requests (or the store MAX_OPEN_TOTAL).
        """

    def get(self, request_id: str) -> ApprovalRequest | None: ...

    def pending(self) -> list[ApprovalRequest]: ...

    def recent(self, limit: int = 50) -> list[ApprovalRequest]:
        """Decided, used and expired requests, newest first."""

    def decide(
        self, request_id: str, approve: bool, approver: str, note: str | None = None
    ) -> ApprovalRequest:
        """Approve or deny a pending request; ApprovalError if it is not pending."""

    def consume(
        self, principal: str, tool: str, digest: str, request_id: str | None = None
    ) -> ApprovalRequest | None:
        """Use an approved, unexpired request for this exact call, once; else None."""

    def sweep(self) -> list[ApprovalRequest]:
        """Record requests whose expiry passed as ``expired``; those changed by this call.

        Reads show an expired request as expired without writing it; only the sweep
        writes, so each expiry is reported (and logged) once, by one replica.
        """

    def check(self) -> None:
        """Raise StateError if the store cannot be used."""


def open_request_record(mac: RecordMac, request_id: str, raw: Any) -> ApprovalRequest | None:
    """The request stored as ``raw`` under ``request_id``; None if absent, damaged or forged.

    A request whose MAC fails (changed, copied from another id, or written without
    the guard's key, as records of earlier versions were) is absent: never approved.
    """
    data = mac.open("approval", request_id, raw)
    if data is None:
        return None
    try:
        request = ApprovalRequest.from_json(data)
    except TypeError:
        return None
    return request if request.id == request_id else None


class UsedApprovals:
    """The approvals this process used, until they expire: a replay is not used twice.

    The MAC proves who wrote a request, not that it is the latest version: whoever
    can write the store could put back an approved request after its use. An
    approval never outlives its (MAC-covered) expiry, so remembering each used id
    that long closes that replay in this process; another replica is covered by
    the store's authentication (docs/threat-model.md).
    """

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def seen(self, request: ApprovalRequest, now: float) -> bool:
        with self._lock:
            if self._until:
                self._until = {k: v for k, v in self._until.items() if v > now}
            return request.id in self._until

    def add(self, request: ApprovalRequest) -> None:
        with self._lock:
            self._until[request.id] = request.expires


def decide_request(
    request: ApprovalRequest | None,
    request_id: str,
    approve: bool,
    approver: str,
    note: str | None,
    now: float,
    save: Callable[[ApprovalRequest], None],
) -> ApprovalRequest:
    """The one decide rule both stores apply (under their own lock or transaction)."""
    if request is None:
        msg = f"no approval request {request_id}"
        raise ApprovalError(msg)
    request.settle(now)  # an expired request is not decided; the sweep records the expiry
    if request.state != PENDING:
        msg = f"request {request_id} is {request.state}, not pending; nothing was changed"
        raise ApprovalError(msg)
    request.state = APPROVED if approve else DENIED
    request.decided_by, request.decided_at = approver, now
    request.note = (note or "").strip()[:500] or None
    save(request)
    return request


def check_open_cap(principal: str, live: list[ApprovalRequest], max_open: int) -> None:
    """ApprovalLimitError if ``principal``'s live requests (of ``live``, all) reach a cap."""
    if sum(1 for r in live if r.principal == principal) >= max_open:
        raise ApprovalLimitError(principal, max_open)
    if len(live) >= MAX_OPEN_TOTAL:
        raise ApprovalLimitError(principal, MAX_OPEN_TOTAL, total=True)


def over_kept(requests: list[ApprovalRequest]) -> list[ApprovalRequest]:
    """Ended requests beyond the newest MAX_KEPT_ENDED: removed before their retention."""
    ended = [r for r in requests if r.state not in (PENDING, APPROVED)]
    if len(ended) <= MAX_KEPT_ENDED:
        return []
    ended.sort(key=lambda r: r.done_at, reverse=True)
    return ended[MAX_KEPT_ENDED:]


def check_id(request_id: str) -> None:
    """ApprovalError unless ``request_id`` has the form of a request id (both stores refuse
    the same ones, before it reaches a path or a key)."""
    if not request_id or any(ch not in _ID_ALPHABET + "-" for ch in request_id):
        msg = f"{request_id!r} is not an approval request id"
        raise ApprovalError(msg)
