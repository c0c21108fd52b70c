"""Approval requests as JSON files under the state directory (one file each, one ``flock``)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from ..fsutil import atomic_write_json, ensure_private_dir, file_lock, read_json
from .approvals_model import (
    APPROVED,
    DEFAULT_MAX_OPEN,
    USED,
    ApprovalRequest,
    join_wait,
)
from .approvals_store import (
    UsedApprovals,
    check_id,
    check_open_cap,
    decide_request,
    latest_ended,
    oldest_pending,
    open_request_record,
    over_kept,
)
from .record_mac import RecordMac

__all__ = ["FileApprovalStore"]

_LOCK_TIMEOUT_S = 10.0


class FileApprovalStore:
    """Approval requests as JSON files under ``<state_dir>/approvals``, under one ``flock``.

    The state directory is the guard owner's: in a service, another user's; for
    a standalone hook, the agent's own, which is why a standalone queue is only
    as strong as a single-user install (docs/approvals.md).
    """

    def __init__(
        self, state_dir: str, *, clock: Any = time.time, mac: RecordMac | None = None
    ) -> None:
        self.root = os.path.join(state_dir, "approvals")
        self._clock = clock
        self.mac = mac if mac is not None else RecordMac.for_state_dir(state_dir)
        self._used = UsedApprovals()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        ensure_private_dir(self.root)
        with file_lock(os.path.join(self.root, ".lock"), timeout_s=_LOCK_TIMEOUT_S):
            yield

    def _path(self, request_id: str) -> str:
        check_id(request_id)
        return os.path.join(self.root, f"{request_id}.json")

    def _load(self, path: str) -> ApprovalRequest | None:
        request_id = os.path.basename(path).removesuffix(".json")
        return open_request_record(self.mac, request_id, read_json(path))

    def _save(self, request: ApprovalRequest) -> None:
        sealed = self.mac.seal("approval", request.id, request.to_json())
        atomic_write_json(self._path(request.id), sealed)

    def _all(self) -> list[ApprovalRequest]:
        """Every request, expired ones shown settled, old ones removed (call under the lock)."""
        now = self._clock()
        found: list[ApprovalRequest] = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        for name in names:
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.root, name)
            request = self._load(path)
            if request is None:
                continue
            if request.retired(now):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                continue
            found.append(request)
        for request in over_kept(found):
            with contextlib.suppress(OSError):
                os.unlink(self._path(request.id))
            found.remove(request)
        return found

    def sweep(self) -> list[ApprovalRequest]:
        now = self._clock()
        changed: list[ApprovalRequest] = []
        with self._locked():
            for request in self._all():
                if request.settle(now):
                    self._save(request)
                    changed.append(request)
        return changed

    def _view(self, request: ApprovalRequest) -> ApprovalRequest:
        request.settle(self._clock())  # shown as expired; the sweep records it
        return request

    def open_request(
        self, template: ApprovalRequest, max_open: int = DEFAULT_MAX_OPEN
    ) -> tuple[ApprovalRequest, bool]:
        now = self._clock()
        with self._locked():
            live = [r for r in self._all() if r.live(now)]
            for request in live:
                if request.matches(template.principal, template.tool, template.args_digest):
                    if join_wait(request, template):
                        self._save(request)
                    return request, False
            check_open_cap(template.principal, live, max_open)
            self._save(template)
            return template, True

    def get(self, request_id: str) -> ApprovalRequest | None:
        path = self._path(request_id)
        with self._locked():
            request = self._load(path)
        return None if request is None else self._view(request)

    def pending(self) -> list[ApprovalRequest]:
        with self._locked():
            return oldest_pending(map(self._view, self._all()))

    def recent(self, limit: int = 50) -> list[ApprovalRequest]:
        with self._locked():
            return latest_ended(map(self._view, self._all()), limit)

    def decide(
        self, request_id: str, approve: bool, approver: str, note: str | None = None
    ) -> ApprovalRequest:
        path = self._path(request_id)
        with self._locked():
            request = self._load(path)
            return decide_request(
                request, request_id, approve, approver, note, self._clock(), self._save
            )

    def consume(
        self, principal: str, tool: str, digest: str, request_id: str | None = None
    ) -> ApprovalRequest | None:
        now = self._clock()
        with self._locked():
            for request in self._all():
                if request_id is not None and request.id != request_id:
                    continue
                live = request.live(now) and not self._used.seen(request, now)
                if live and request.state == APPROVED and request.matches(principal, tool, digest):
                    request.state, request.used_at = USED, now
                    self._save(request)
                    self._used.add(request)
                    return request
        return None

    def check(self) -> None:
        with self._locked():
            pass
