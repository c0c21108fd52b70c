"""The guard's shared state in Redis, so gateway replicas behave as one guard.

Same records and the same rule as the state directory (``state.py``): every
read-modify-write of a VPG's record runs under that VPG's lock, so two
replicas agree on whether to request a tag or join one, and a retry that
reaches another replica finds the pending tag and is allowed once it landed.

The lock is redis-py's, with a lease: a replica that dies holding it blocks
the VPG for at most ``lock_lease_s``. While the block runs, a helper thread
renews the lease, because the block may wait on the ZVM for longer than that;
before writing, the lease is renewed once more, and a lock that was lost
meanwhile (Redis unreachable, the process stalled) means the write is refused
rather than made over another replica's.

Layout (``<prefix>`` is ``zerto-rewind:`` unless configured)::

    <prefix>vpg:<vpg id>             VpgRecord as JSON
    <prefix>vpgs                     set of the VPG ids that have a record
    <prefix>lock:vpg:<vpg id>        redis-py lock
    <prefix>cache:<kind>:<hash>      {"key", "stored_at", "value"}, expires after _CACHE_KEEP_S
    <prefix>token:<identity>         the ZVM token cache (``zvm.token_redis``)

VPG records and cache entries carry a MAC (``record_mac``) under a key that
only the guard's user reads; one that does not verify is read as absent, so
whoever else can write to this Redis cannot make a tag look landed.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..errors import StateError
from ..zvm.redis_conn import RedisStore, read_json, redis_errors_as_state_errors, stored_json
from .record_mac import RecordMac
from .state import LOCK_TIMEOUT_S, VpgRecord, _safe_name, cache_value

if TYPE_CHECKING:
    import redis
    from redis.lock import Lock

    from ..zvm.token_redis import RedisTokenCache

__all__ = ["LOCK_LEASE_S", "RedisGuardState"]

# A dead replica's lock frees itself after this; a live one renews it every third of it.
LOCK_LEASE_S = 15.0
# Caches are judged by age when read (each reader has its own TTL); Redis
# drops them after this so that stale lookups do not pile up.
_CACHE_KEEP_S = 2 * 86_400


class RedisGuardState(RedisStore):
    """The guard's state in one Redis database; safe for many replicas and threads."""

    def __init__(
        self,
        url: str,
        *,
        mac: RecordMac,
        prefix: str | None = None,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
        lock_lease_s: float = LOCK_LEASE_S,
        client: redis.Redis | None = None,
    ) -> None:
        super().__init__(url, prefix, client)
        self.lock_timeout_s = lock_timeout_s
        self.lock_lease_s = lock_lease_s
        self.mac = mac

    # ---- VPG records

    @contextlib.contextmanager
    def vpg(self, vpg_id: str) -> Iterator[VpgRecord]:
        """Lock the VPG's record, yield it, and save what the block changed."""
        # The lease keeper renews it from its own thread.
        lock = self._acquired(self._key("lock:vpg", vpg_id), self.lock_lease_s, self.lock_timeout_s)
        if lock is None:
            msg = (
                f"timed out after {self.lock_timeout_s:.1f}s waiting for the lock on VPG "
                f"{vpg_id} in the shared state at {self.location}; another replica holds it "
                f"(the lock of a replica that died frees itself within {self.lock_lease_s:.0f}s)"
            )
            raise StateError(msg)
        keeper = _LeaseKeeper(lock, self.lock_lease_s / 3)
        keeper.start()
        try:
            record = self.peek_vpg(vpg_id)
            before = asdict(record)
            yield record
            after = asdict(record)
            keeper.stop()
            if after != before:
                self._save(lock, vpg_id, after)
        finally:
            keeper.stop()
            self._release(lock)

    def peek_vpg(self, vpg_id: str) -> VpgRecord:
        """Read a VPG's record without locking (for display and previews)."""
        with redis_errors_as_state_errors(self.url):
            raw = self._redis.get(self._key("vpg", vpg_id))
        # A record whose MAC fails is absent: the guard starts over and tags anew.
        return VpgRecord.from_json(vpg_id, self.mac.open("vpg", vpg_id, read_json(raw)))

    def _save(self, lock: Lock, vpg_id: str, record: dict[str, Any]) -> None:
        from redis.exceptions import LockNotOwnedError

        with redis_errors_as_state_errors(self.url):
            try:
                # Renewing proves the lock is still ours, and makes it last a
                # whole lease more: far longer than the write below takes.
                lock.reacquire()
            except LockNotOwnedError:
                msg = (
                    f"lost the lock on VPG {vpg_id} in the shared state at {self.location} "
                    f"(its {self.lock_lease_s:.0f}s lease ran out: Redis was unreachable or this "
                    "process stalled); the change to its record was not saved"
                )
                raise StateError(msg) from None
            pipe = self._redis.pipeline(transaction=True)
            pipe.set(self._key("vpg", vpg_id), stored_json(self.mac.seal("vpg", vpg_id, record)))
            pipe.sadd(f"{self.prefix}vpgs", vpg_id)
            pipe.execute()

    # ---- short-lived caches

    def cached(self, kind: str, key: str, ttl_s: float) -> Any | None:
        """A cached value younger than ``ttl_s``, else None."""
        with redis_errors_as_state_errors(self.url):
            raw = read_json(self._redis.get(self._cache_key(kind, key)))
        return cache_value(self.mac.open(f"cache:{kind}", key, raw), key, ttl_s)

    def store(self, kind: str, key: str, value: Any) -> None:
        """Cache ``value`` under (kind, key)."""
        payload = self.mac.seal(
            f"cache:{kind}", key, {"key": key, "stored_at": time.time(), "value": value}
        )
        with redis_errors_as_state_errors(self.url):
            self._redis.set(self._cache_key(kind, key), stored_json(payload), ex=_CACHE_KEEP_S)

    # ---- beside the records

    def token_cache(self) -> RedisTokenCache:
        """The ZVM token cache in the same Redis, over the same connections."""
        from ..zvm.token_redis import RedisTokenCache

        return RedisTokenCache(self.url, prefix=self.prefix, client=self._redis)

    def check(self) -> None:
        """Raise StateError unless Redis answers a PING."""
        with redis_errors_as_state_errors(self.url):
            self._redis.ping()

    def _key(self, kind: str, vpg_id: str) -> str:
        return f"{self.prefix}{kind}:{_safe_name(vpg_id)}"

    def _cache_key(self, kind: str, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        return f"{self.prefix}cache:{kind}:{digest}"


class _LeaseKeeper(threading.Thread):
    """Renews a lock's lease while the block that holds it runs."""

    def __init__(self, lock: Lock, every_s: float) -> None:
        super().__init__(name="zerto-rewind-lock-lease", daemon=True)
        self._lock = lock
        self._every_s = every_s
        self._stopped = threading.Event()

    def run(self) -> None:
        from redis.exceptions import RedisError

        while not self._stopped.wait(self._every_s):
            try:
                self._lock.reacquire()
            except RedisError:
                return  # lost or unreachable: the renewal before the write will say so

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive():
            self.join()
