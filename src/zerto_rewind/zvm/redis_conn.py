"""The Redis connection that gateway replicas share their state through.

Used by the shared token cache here and by the guard's shared state in
``core``: it lives in this lower layer so that both may use it. ``redis``
itself is imported only when a connection is opened, so nothing on the hook's
path loads it. Every Redis failure becomes a StateError naming the server
(password removed) and never a value read or written: tokens are stored there.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError, StateError

if TYPE_CHECKING:
    import redis
    from redis.lock import Lock

__all__ = [
    "DEFAULT_PREFIX",
    "RedisStore",
    "connect",
    "read_json",
    "redacted_url",
    "redis_errors_as_state_errors",
    "stored_json",
]

DEFAULT_PREFIX = "zerto-rewind:"
# A Redis that does not answer within these is as good as down: the guard
# must still answer (deny, with the reason) well within its budget.
CONNECT_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 3.0
_LOCK_POLL_S = 0.02  # how often a waiting replica asks for a lock again


class RedisStore:
    """What every store in a Redis database holds: its URL (``location``, the URL fit for
    messages), its keys' prefix, and its client (``client``: a test's, else one for ``url``)."""

    def __init__(self, url: str, prefix: str | None, client: redis.Redis | None) -> None:
        self.url = url
        self.location = redacted_url(url)
        self.prefix = DEFAULT_PREFIX if prefix is None else prefix
        self._redis = client if client is not None else connect(url)

    def close(self) -> None:
        """Close the connections to Redis."""
        self._redis.close()

    def _acquired(self, name: str, lease_s: float, timeout_s: float | None) -> Lock | None:
        """The lock ``name``, held for ``lease_s`` unless renewed; None if another replica
        still holds it after ``timeout_s``. Its token is shared between threads, so a
        lease keeper may renew it from its own."""
        lock = self._redis.lock(
            name,
            timeout=lease_s,
            sleep=_LOCK_POLL_S,
            blocking_timeout=timeout_s,
            thread_local=False,
        )
        with redis_errors_as_state_errors(self.url):
            return lock if lock.acquire() else None

    @staticmethod
    def _release(lock: Lock) -> None:
        """Let ``lock`` go; one that expired, or a Redis that went away, frees itself with
        its lease anyway."""
        from redis.exceptions import RedisError

        with contextlib.suppress(RedisError):
            lock.release()


def stored_json(obj: Any) -> str:
    """``obj`` as the stores keep it: compact JSON, its keys sorted."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def read_json(raw: object) -> Any | None:
    """A stored value read back; None if there is none or it is not JSON (damaged, not
    ours, or from an incompatible version: the caller starts over)."""
    if not isinstance(raw, bytes | str):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def redacted_url(url: str) -> str:
    """``url`` without its password and query (which may hold one): fit for messages."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "an unparseable Redis URL"
    if ":" in host:
        host = f"[{host}]"
    user = f"{parts.username}@" if parts.username else ""
    where = f"{host}:{port}" if port is not None else host
    return f"{parts.scheme}://{user}{where}{parts.path}"


def connect(url: str) -> redis.Redis:
    """A client for ``url`` (``redis://``, ``rediss://`` or ``unix://``); connects on first use."""
    import redis as redis_lib
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    try:
        return redis_lib.Redis.from_url(
            url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=COMMAND_TIMEOUT_S,
            # One quick retry rides out a dropped idle connection; the library's
            # default backoff (seconds, several times) would eat the guard's budget.
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
            health_check_interval=30,
        )
    except ValueError:
        # The library's message may quote the URL, password included.
        msg = (
            f"{redacted_url(url)} is not a Redis URL; "
            "use redis://[user:password@]host:port/db, rediss://… or unix:///path/to/socket"
        )
        raise ConfigError(msg, key="state.url") from None


@contextlib.contextmanager
def redis_errors_as_state_errors(url: str) -> Iterator[None]:
    """Turn any Redis failure inside the block into a StateError that names the server."""
    from redis import exceptions

    try:
        yield
    except exceptions.AuthenticationError as exc:
        where = redacted_url(url)
        msg = (
            f"the shared state at {where} refused the credentials in state.url: {_detail(url, exc)}"
        )
        raise StateError(msg) from exc
    except (exceptions.ConnectionError, exceptions.TimeoutError) as exc:
        msg = (
            f"the shared state at {redacted_url(url)} is unreachable: {_detail(url, exc)}; "
            "check that Redis is running there and that state.url names it"
        )
        raise StateError(msg) from exc
    except exceptions.RedisError as exc:
        msg = f"the shared state at {redacted_url(url)} failed: {_detail(url, exc)}"
        raise StateError(msg) from exc


def _detail(url: str, exc: Exception) -> str:
    """The library's message, without the URL's password should it ever quote it.

    The password is replaced only as a whole token (:func:`~zerto_rewind.redaction.whole_tokens`):
    a password ``user`` must not turn ``/home/newuser/redis.sock`` into ``/home/new***/…``.
    """
    from ..redaction import whole_tokens

    text = str(exc).strip().rstrip(".") or type(exc).__name__
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        passwords = [parts.password or "", *parse_qs(parts.query).get("password", [])]
        pattern = whole_tokens(passwords)
        if pattern is not None:
            text = pattern.sub("***", text)
    return text
