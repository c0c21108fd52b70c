"""Approval requests in Redis, shared by gateway replicas (``state.url``).

Same protocol (``approvals_store.ApprovalStore``), model and rules as the file store
(:class:`~zerto_rewind.core.approvals_file.FileApprovalStore`):
a retried call joins its own open request, a request is decided once while it
is pending and unexpired, an approval is used once, and only the sweep records
an expiry, so each expiry is reported by one replica.

Why WATCH/MULTI and not a Lua script: the rules are the stores' shared Python
(:meth:`ApprovalRequest.live`, ``settle``, ``matches`` and ``approvals_store.decide_request``),
applied here between a WATCH and an EXEC, so there is one copy of them and the
two stores cannot drift; a Lua script would be a second copy in another
language. A transaction whose watched keys another replica changed meanwhile is
not applied and is run again on what that replica wrote: two replicas racing
to open the same call create one request, and two racing to use one approval
make one winner. Requests are answered at a human's pace, so retries are rare;
they are bounded all the same.

Layout (``<prefix>`` is ``zerto-rewind:`` unless configured)::

    <prefix>approvals:req:<id>           ApprovalRequest as JSON
    <prefix>approvals:call:<hash>        id of the newest request for (principal, tool, digest)
    <prefix>approvals:ids                sorted set: request ids by creation time
    <prefix>approvals:open               sorted set: ids of open requests, by expiry
    <prefix>approvals:open:<hash>        the same, for one principal (its cap)

Each request is stored with a MAC bound to its id (``record_mac``); one that
does not verify is absent, so whoever else can write to this Redis cannot
approve a request, and an approval used here is not used again if put back
(:class:`~zerto_rewind.core.approvals_store.UsedApprovals`).

A live request's key lasts until its expiry plus ``RETENTION_S`` (the sweep
normally marks it first); a decided, used or expired one is dropped by Redis
``RETENTION_S`` after that, as the file store deletes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from ..errors import StateError
from ..zvm.redis_conn import RedisStore, read_json, redis_errors_as_state_errors, stored_json
from .approvals_model import (
    APPROVED,
    DEFAULT_MAX_OPEN,
    PENDING,
    RETENTION_S,
    USED,
    ApprovalError,
    ApprovalLimitError,
    ApprovalRequest,
    join_wait,
)
from .approvals_store import (
    MAX_OPEN_TOTAL,
    UsedApprovals,
    check_id,
    decide_request,
    latest_ended,
    oldest_pending,
    open_request_record,
    over_kept,
)
from .record_mac import RecordMac

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline

__all__ = ["RedisApprovalStore"]

# A transaction that lost a race this many times in a row means something is
# rewriting the key in a loop: refuse rather than spin.
_MAX_ATTEMPTS = 50
_MGET_CHUNK = 200
_T = TypeVar("_T")


class RedisApprovalStore(RedisStore):
    """Approval requests in one Redis database; safe for many replicas and threads."""

    def __init__(
        self,
        url: str,
        *,
        mac: RecordMac,
        prefix: str | None = None,
        clock: Callable[[], float] = time.time,
        client: redis.Redis | None = None,
    ) -> None:
        super().__init__(url, prefix, client)
        self._clock = clock
        self.mac = mac
        self._used = UsedApprovals()

    # ------------------------------------------------------------------ the protocol

    def open_request(
        self, template: ApprovalRequest, max_open: int = DEFAULT_MAX_OPEN
    ) -> tuple[ApprovalRequest, bool]:
        check_id(template.id)
        call_key = self._call_key(template.principal, template.tool, template.args_digest)
        # Both open sets are WATCHed: two replicas opening past a cap at once cannot
        # both pass it; the one whose EXEC loses counts again.
        mine, everyone = self._open_key(template.principal), f"{self.prefix}approvals:open"

        def body(pipe: Pipeline) -> tuple[ApprovalRequest, bool]:
            existing = _text(pipe.get(call_key))
            request = None if existing is None else self._watched(pipe, existing)
            now = self._clock()
            same = template.principal, template.tool, template.args_digest
            if request is not None and request.live(now) and request.matches(*same):
                if join_wait(request, template):  # a retry waits again: say until when
                    pipe.multi()
                    self._queue_save(pipe, request, now)
                    pipe.execute()
                return request, False
            self._check_cap(pipe, mine, template.principal, max_open, now)
            self._check_cap(pipe, everyone, template.principal, MAX_OPEN_TOTAL, now, total=True)
            pipe.multi()
            self._queue_save(pipe, template, now)
            pipe.set(call_key, template.id, ex=_seconds(template.expires - now + RETENTION_S))
            pipe.zadd(self._ids_key, {template.id: template.created})
            for key in (mine, everyone):
                pipe.zremrangebyscore(key, "-inf", now)
                pipe.zadd(key, {template.id: template.expires})
                pipe.expire(key, _seconds(template.expires - now + 60))
            pipe.execute()
            return template, True

        with self._errors(f"opening an approval request for {template.tool}"):
            return self._transact([call_key, mine, everyone], body)

    def _check_cap(
        self,
        pipe: Pipeline,
        key: str,
        principal: str,
        cap: int,
        now: float,
        *,
        total: bool = False,
    ) -> None:
        """ApprovalLimitError if the open set ``key`` holds ``cap`` live requests.

        The set holds ids until their expiry; a decided one stays in it, so only a
        set at its cap is read request by request (decisions free a place).
        """
        ids = [i for i in map(_text, pipe.zrangebyscore(key, now, "+inf")) if i]
        if len(ids) < cap:
            return
        raws = pipe.mget([self._req_key(i) for i in ids])
        parsed = (self._parse(i, raw) for i, raw in zip(ids, raws, strict=True))
        live = [r for r in parsed if r is not None and r.live(now)]
        if len(live) >= cap:
            raise ApprovalLimitError(principal, cap, total=total)

    def get(self, request_id: str) -> ApprovalRequest | None:
        check_id(request_id)
        with self._errors(f"reading approval request {request_id}"):
            request = self._parse(request_id, self._redis.get(self._req_key(request_id)))
        return None if request is None else self._view(request)

    def pending(self) -> list[ApprovalRequest]:
        with self._errors("listing pending approval requests"):
            return oldest_pending(map(self._view, self._all()))

    def recent(self, limit: int = 50) -> list[ApprovalRequest]:
        with self._errors("listing recent approval requests"):
            return latest_ended(map(self._view, self._all()), limit)

    def decide(
        self, request_id: str, approve: bool, approver: str, note: str | None = None
    ) -> ApprovalRequest:
        check_id(request_id)
        key = self._req_key(request_id)

        def body(pipe: Pipeline) -> ApprovalRequest:
            request = self._parse(request_id, pipe.get(key))
            now = self._clock()

            def save(changed: ApprovalRequest) -> None:
                pipe.multi()
                self._queue_save(pipe, changed, now)
                pipe.execute()

            # The file store's rule: ApprovalError, and nothing written, unless pending.
            return decide_request(request, request_id, approve, approver, note, now, save)

        with self._errors(f"deciding approval request {request_id}"):
            return self._transact([key], body)

    def consume(
        self, principal: str, tool: str, digest: str, request_id: str | None = None
    ) -> ApprovalRequest | None:
        if request_id is not None:
            try:
                check_id(request_id)
            except ApprovalError:
                return None  # no such request, nothing to use: as the file store answers
        call_key = self._call_key(principal, tool, digest)

        def body(pipe: Pipeline) -> ApprovalRequest | None:
            # Without an id, the call's newest request: an approved, unused request is
            # live, and no request is opened for a call while one is live, so the
            # approval of this call, if there is one, is the request the index names.
            wanted = request_id or _text(pipe.get(call_key))
            if wanted is None:
                return None
            request = self._watched(pipe, wanted)
            now = self._clock()
            if (
                request is None
                or request.state != APPROVED
                or not request.live(now)
                or not request.matches(principal, tool, digest)
                or self._used.seen(request, now)
            ):
                return None
            request.state, request.used_at = USED, now
            pipe.multi()
            self._queue_save(pipe, request, now)
            pipe.execute()
            self._used.add(request)
            return request

        with self._errors(f"using an approval of {tool}"):
            return self._transact([call_key], body)

    def sweep(self) -> list[ApprovalRequest]:
        def settle(request_id: str) -> Callable[[Pipeline], ApprovalRequest | None]:
            def body(pipe: Pipeline) -> ApprovalRequest | None:
                request = self._parse(request_id, pipe.get(self._req_key(request_id)))
                now = self._clock()
                # Another replica's sweep, a use or a decision may have come first.
                if request is None or not request.settle(now):
                    return None
                pipe.multi()
                self._queue_save(pipe, request, now)
                pipe.execute()
                return request

            return body

        changed: list[ApprovalRequest] = []
        with self._errors("recording expired approval requests"):
            now = self._clock()
            for request in self._all():
                if request.state in (PENDING, APPROVED) and now >= request.expires:
                    key = self._req_key(request.id)
                    expired = self._transact([key], settle(request.id))
                    if expired is not None:
                        changed.append(expired)
        return changed

    def check(self) -> None:
        """Raise StateError unless Redis answers a PING."""
        with self._errors("checking the approval requests' store"):
            self._redis.ping()

    # ------------------------------------------------------------------ helpers

    @property
    def _ids_key(self) -> str:
        return f"{self.prefix}approvals:ids"

    def _req_key(self, request_id: str) -> str:
        return f"{self.prefix}approvals:req:{request_id}"

    def _open_key(self, principal: str) -> str:
        raw = stored_json([principal]).encode()
        return f"{self.prefix}approvals:open:{hashlib.sha256(raw).hexdigest()[:32]}"

    def _call_key(self, principal: str, tool: str, digest: str) -> str:
        # Hashed: a principal or tool name is not a safe key part, and is not needed in it.
        raw = stored_json([principal, tool, digest]).encode()
        return f"{self.prefix}approvals:call:{hashlib.sha256(raw).hexdigest()[:32]}"

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """A Redis failure as a StateError saying what failed, and where (no password)."""
        try:
            with redis_errors_as_state_errors(self.url):
                yield
        except StateError as exc:
            msg = f"{what} failed: {exc}"
            raise StateError(msg) from exc

    def _transact(self, watch: list[str], body: Callable[[Pipeline], _T]) -> _T:
        """``body(pipe)`` with ``watch`` WATCHed, again each time its EXEC lost a race.

        ``body`` reads (and may WATCH more keys), then either returns without
        writing or queues its writes after ``pipe.multi()`` and executes them.
        """
        from redis.exceptions import WatchError

        for _attempt in range(_MAX_ATTEMPTS):
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.watch(*watch)  # type: ignore[no-untyped-call]
                try:
                    return body(pipe)
                except WatchError:
                    continue  # another replica wrote first: decide again on what it wrote
        msg = (
            f"approval requests in the shared state at {self.location} changed under "
            f"{_MAX_ATTEMPTS} transactions in a row; nothing was changed"
        )
        raise StateError(msg)

    def _watched(self, pipe: Pipeline, request_id: str) -> ApprovalRequest | None:
        """The request ``request_id``, its key WATCHed too (inside :meth:`_transact`)."""
        key = self._req_key(request_id)
        pipe.watch(key)  # type: ignore[no-untyped-call]
        return self._parse(request_id, pipe.get(key))

    def _parse(self, request_id: str, raw: object) -> ApprovalRequest | None:
        # Missing, damaged or forged (its MAC fails): absent, as in the file store.
        return open_request_record(self.mac, request_id, read_json(raw))

    def _queue_save(self, pipe: Pipeline, request: ApprovalRequest, now: float) -> None:
        if request.state in (PENDING, APPROVED):
            keep = request.expires - now + RETENTION_S
        else:
            keep = request.done_at - now + RETENTION_S
        sealed = self.mac.seal("approval", request.id, request.to_json())
        pipe.set(self._req_key(request.id), stored_json(sealed), ex=_seconds(keep))

    def _all(self) -> list[ApprovalRequest]:
        """Every stored request, not yet settled; those past their retention are deleted."""
        now = self._clock()
        ids = [_text(m) for m in self._redis.zrange(self._ids_key, 0, -1)]
        found: list[ApprovalRequest] = []
        gone: list[str] = []
        retired: list[str] = []
        for start in range(0, len(ids), _MGET_CHUNK):
            chunk = [i for i in ids[start : start + _MGET_CHUNK] if i]
            if not chunk:
                continue
            raws = self._redis.mget([self._req_key(i) for i in chunk])
            for request_id, raw in zip(chunk, raws, strict=True):
                request = self._parse(request_id, raw)
                if request is None:
                    if raw is None:
                        gone.append(request_id)
                    continue
                # Redis drops the key after the retention on its own clock; this is ours.
                if request.retired(now):
                    gone.append(request_id)
                    retired.append(self._req_key(request_id))
                    continue
                found.append(request)
        for request in over_kept(found):  # the store's bound, whatever the principals
            found.remove(request)
            gone.append(request.id)
            retired.append(self._req_key(request.id))
        if retired:
            self._redis.delete(*retired)
        if gone:
            self._redis.zrem(self._ids_key, *gone)
        return found

    def _view(self, request: ApprovalRequest) -> ApprovalRequest:
        request.settle(self._clock())  # shown as expired; the sweep records it
        return request


def _text(raw: object) -> str | None:
    if isinstance(raw, bytes):
        return raw.decode()
    return raw if isinstance(raw, str) else None


def _seconds(keep_s: float) -> int:
    return max(1, math.ceil(keep_s))
