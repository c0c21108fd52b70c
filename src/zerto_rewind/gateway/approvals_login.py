"""The approvals page's login limit: it slows guessing, and never locks a person out.

A limit that refuses a name after N failures lets anyone who can reach the page
keep that approver out, the right password included: an agent on the same host
needs five wrong passwords a minute. This limit refuses nothing by itself:

- failures are counted per (name, source), where every loopback address is one
  source (an agent can pick any of 127.0.0.0/8) and so is an IPv6 /64;
- the first FREE_FAILURES failures of a key within WINDOW_S cost nothing; then
  each further attempt of that key is *held* (the answer comes later) until its
  turn, one at a time, the turns 1, 2, 4, then MAX_DELAY_S apart. Guessing one
  name from one source is slowed to one password per MAX_DELAY_S; a person with
  the right password on that key waits MAX_DELAY_S at most, and gets in;
- a browser that has logged in as a name carries a signed "known browser"
  cookie for it; its attempts count under their own key, so failures from
  anywhere else (the agent's included) never delay it;
- at most MAX_HELD attempts of one key wait at once; a further one is answered
  429 at once, without a password check. That is the one case in which a
  person waits for another to finish: a flood of attempts from their own source
  for their own name, from a browser not yet known. The socket CLI
  (``zerto-rewind approvals``) is never limited, and the known-browser cookie
  is not either.

Approvers see failed attempts: the page lists the recent ones (name, source,
when), and :meth:`LoginLimit.due_report` gives the webhook a summary at most
once per REPORT_EVERY_S. Limits live in the gateway's memory: a restart starts
them (and the known-browser key) afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio

__all__ = [
    "FREE_FAILURES",
    "KNOWN_COOKIE",
    "MAX_DELAY_S",
    "MAX_HELD",
    "Failure",
    "LoginLimit",
    "source_of",
]

FREE_FAILURES = 5  # per key ...
WINDOW_S = 15 * 60.0  # ... within this many seconds, then the turns are spaced
MAX_DELAY_S = 8.0
MAX_HELD = 4
KNOWN_COOKIE = "zr_known"
KNOWN_MAX_AGE_S = 30 * 24 * 3600
REPORT_EVERY_S = 60.0
_KEPT_FAILURES = 200
_CAPACITY = 10_000


@dataclass(frozen=True)
class Failure:
    """One failed login, as approvers see it (the name is what was typed)."""

    at: float  # wall time
    name: str
    source: str
    known_browser: bool


@dataclass
class _Key:
    failures: deque[float] = field(default_factory=deque)
    next_at: float = 0.0
    held: int = 0
    lock: anyio.Lock = field(default_factory=anyio.Lock)


def source_of(host: str | None) -> str:
    """The source a failure counts against: loopback as one, an IPv6 /64 as one."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]
    if address.is_loopback:
        return "loopback"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return source_of(str(address.ipv4_mapped))
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class LoginLimit:
    """Per-key failure counts and turns; known-browser cookies; recent failures."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        secret: bytes | None = None,
    ) -> None:
        self._clock, self._wall = clock, wall
        self._secret = secret or secrets.token_bytes(32)
        self._keys: OrderedDict[tuple[str, str], _Key] = OrderedDict()
        self._failures: deque[Failure] = deque(maxlen=_KEPT_FAILURES)
        self._reported_at: float | None = None
        self._unreported: list[Failure] = []

    # ------------------------------------------------------------------ keys

    def key(self, name: str, source: str, cookie: str | None) -> tuple[str, str]:
        """``(name, "browser:<id>")`` for a browser known for ``name``, else ``(name, source)``."""
        browser = self._known(name, cookie)
        return (name, f"browser:{browser}") if browser else (name, source)

    def known_cookie(self, name: str) -> str:
        """A fresh known-browser value for ``name``: ``<id>.<mac>``, set at a login."""
        browser = secrets.token_urlsafe(12)
        return f"{browser}.{self._mac(name, browser)}"

    def _known(self, name: str, cookie: str | None) -> str | None:
        browser, _, mac = (cookie or "").partition(".")
        if not browser or not mac or len(cookie or "") > 200:
            return None
        return browser if hmac.compare_digest(mac, self._mac(name, browser)) else None

    def _mac(self, name: str, browser: str) -> str:
        body = f"{name}\0{browser}".encode()
        return hmac.new(self._secret, body, hashlib.sha256).hexdigest()[:32]

    # ------------------------------------------------------------------ turns

    @contextlib.asynccontextmanager
    async def turn(self, key: tuple[str, str]) -> AsyncIterator[bool]:
        """Wait for ``key``'s turn (one check at a time, spaced after failures).

        Yields False, at once, if MAX_HELD attempts of the key already wait.
        """
        state = self._state(key)
        if state.held >= MAX_HELD:
            yield False
            return
        state.held += 1
        try:
            async with state.lock:
                wait = state.next_at - self._clock()
                if wait > 0:
                    await anyio.sleep(wait)
                yield True
        finally:
            state.held -= 1

    def delay_s(self, key: tuple[str, str]) -> float:
        """How long the key's next attempt waits for its turn now (0 when it need not)."""
        state = self._keys.get(key)
        return 0.0 if state is None else max(0.0, state.next_at - self._clock())

    def fail(self, key: tuple[str, str], source: str) -> None:
        """Count a failure of ``key`` and space its next turn; keep it for approvers."""
        state = self._state(key)
        now = self._clock()
        while state.failures and state.failures[0] <= now - WINDOW_S:
            state.failures.popleft()
        state.failures.append(now)
        over = len(state.failures) - FREE_FAILURES
        if over >= 0:
            state.next_at = now + min(2.0**over, MAX_DELAY_S)
        name, where = key
        failure = Failure(self._wall(), name, source, where.startswith("browser:"))
        self._failures.append(failure)
        self._unreported.append(failure)

    def clear(self, key: tuple[str, str]) -> None:
        """A login succeeded: the key's failures are forgotten (they stay listed)."""
        state = self._keys.get(key)
        if state is not None:
            state.failures.clear()
            state.next_at = 0.0

    def _state(self, key: tuple[str, str]) -> _Key:
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key()
            self._evict()
        self._keys.move_to_end(key)
        return state

    def _evict(self) -> None:
        """Forget the least recently used idle keys beyond the capacity (memory stays bounded)."""
        if len(self._keys) <= _CAPACITY:
            return
        for key in list(self._keys):
            if len(self._keys) <= _CAPACITY:
                return
            if self._keys[key].held == 0:
                del self._keys[key]

    # ------------------------------------------------------------------ approvers' view

    def recent(self, within_s: float = 24 * 3600.0, limit: int = 20) -> list[Failure]:
        """The newest failed logins within ``within_s``, newest first."""
        cutoff = self._wall() - within_s
        return [f for f in reversed(self._failures) if f.at >= cutoff][:limit]

    def due_report(self) -> list[Failure]:
        """Failures not yet reported, if the last report is REPORT_EVERY_S old; else []."""
        now = self._wall()
        if not self._unreported:
            return []
        if self._reported_at is not None and now - self._reported_at < REPORT_EVERY_S:
            return []
        report, self._unreported, self._reported_at = self._unreported, [], now
        return report
