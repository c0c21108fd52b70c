"""The ZVM token cache in Redis, shared by gateway replicas.

Same contract as the file cache (:class:`~zerto_rewind.zvm.auth.TokenCache`):
one entry per ZVM identity, fetched under a per-identity lock with a re-check,
so replicas starting together make one token request. A token is a secret: it
is stored under ``<prefix>token:<identity hash>`` with a Redis expiry at the
token's own, and never appears in a message or a log. Whoever can read the
Redis can read the tokens: protect it (ACL user and password, ``rediss://``).

Layout::

    <prefix>token:<identity>        {"access_token", "token_type", "expires_at", "refresh_at"}
    <prefix>lock:token:<identity>   redis-py lock
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import ZvmTimeout
from .auth import CachedToken
from .redis_conn import RedisStore, read_json, redis_errors_as_state_errors, stored_json

if TYPE_CHECKING:
    import redis

__all__ = ["RedisTokenCache"]

# The lock is held for one token request. Should a replica die holding it,
# the others wait at most this long; a lease that runs out under a slow
# request costs only a spare token, never a wrong one.
TOKEN_LOCK_LEASE_S = 30.0


class RedisTokenCache(RedisStore):
    """Tokens in Redis: one key per identity, expiring with the token."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str | None = None,
        wall_clock: Callable[[], float] = time.time,
        client: redis.Redis | None = None,
    ) -> None:
        super().__init__(url, prefix, client)
        self.wall_clock = wall_clock

    def load(self, key: str) -> CachedToken | None:
        """The cached token for ``key`` if it is still fresh."""
        with redis_errors_as_state_errors(self.url):
            raw = self._redis.get(self._key(key))
        token = CachedToken.from_json(read_json(raw))
        return token if token and token.fresh(self.wall_clock()) else None

    def store(self, key: str, token: CachedToken) -> None:
        """Replace the cached token for ``key``; Redis forgets it when it expires."""
        # Relative to our clock: the injected wall clock may not be Redis's.
        lifetime = max(1, math.ceil(token.expires_at - self.wall_clock()))
        payload = stored_json(token.to_json())
        with redis_errors_as_state_errors(self.url):
            self._redis.set(self._key(key), payload, ex=lifetime)

    def drop(self, key: str, access_token: str) -> None:
        """Delete the entry if it still holds ``access_token`` (call under :meth:`lock`)."""
        with redis_errors_as_state_errors(self.url):
            held = CachedToken.from_json(read_json(self._redis.get(self._key(key))))
            if held and held.access_token == access_token:
                self._redis.delete(self._key(key))

    @contextlib.contextmanager
    def lock(self, key: str, timeout_s: float | None) -> Iterator[None]:
        """Hold the per-identity lock; ZvmTimeout if it is not free within ``timeout_s``."""
        lock = self._acquired(f"{self.prefix}lock:token:{key}", TOKEN_LOCK_LEASE_S, timeout_s)
        if lock is None:
            msg = (
                "timed out waiting for another replica to fetch a ZVM token "
                f"(the shared state at {self.location})"
            )
            raise ZvmTimeout(msg)
        try:
            yield
        finally:
            self._release(lock)  # a lost token lock only ever costs a spare token

    def _key(self, key: str) -> str:
        return f"{self.prefix}token:{key}"
