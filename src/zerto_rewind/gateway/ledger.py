"""The ledger of ``gateway.limits``: what each token holds, and the caps' refusals. No IO.

:mod:`.limits` has the doors that call it (the ASGI layer and the SDK's session
manager) and the story of the caps.
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.settings import LimitsSettings

__all__ = ["LIMITED", "OPENING", "Hold", "Ledger", "Refusal", "Slot"]

log = logging.getLogger("zerto_rewind.gateway")

# The JSON-RPC error code of a refusal for load (the implementation-defined range).
LIMITED = -32029
# One log line per token and cap this often: a flood of refusals is not a flood of lines.
_LOG_EVERY_S = 60.0


@dataclass(frozen=True)
class Refusal:
    """A cap reached: which (its config key), its value, who, and when to try again."""

    key: str
    limit: int
    client: str
    retry_after_s: int
    what: str

    def message(self) -> str:
        return (
            f"zerto-rewind: {self.client} {self.what}, the most this gateway allows "
            f"(gateway.limits.{self.key}: {self.limit}). The request was not run; "
            f"retry after {self.retry_after_s} s."
        )


class _Session:
    __slots__ = ("client", "opened", "used")

    def __init__(self, client: str, opened: float) -> None:
        self.client = client
        self.opened = opened
        self.used = False


class Slot:
    """A session being opened: counted from before the SDK admits it."""

    __slots__ = ("client", "session_id")

    def __init__(self, client: str) -> None:
        self.client = client
        self.session_id: str | None = None


class Hold:
    """What one request in flight holds: its body's bytes, and a call if it is one."""

    __slots__ = ("call", "client", "size")

    def __init__(self, client: str) -> None:
        self.client = client
        self.size = 0
        self.call = False


# The opening request's slot, for the session manager's admission (same task).
OPENING: contextvars.ContextVar[Slot | None] = contextvars.ContextVar(
    "zerto_rewind_opening", default=None
)


class Ledger:
    """Counts per token and in all; refuses past a cap. No IO: the doors call it."""

    def __init__(
        self,
        caps: LimitsSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.caps = caps
        self.on_refused = on_refused  # the cap's key: a metric counts refusals by cap
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self.session_count: Counter[str] = Counter()  # live and being opened, per token
        self.sessions_total = 0
        self.calls: Counter[str] = Counter()
        self.held: Counter[str] = Counter()
        self.held_total = 0
        self._rate: dict[str, tuple[float, float]] = {}  # token -> (bytes of room, when)
        self._logged: dict[tuple[str, str], float] = {}

    # ------------------------------------------------------------------ sessions

    def reserve(self, client: str) -> Slot | Refusal:
        caps = self.caps
        wait = math.ceil(caps.handshake_s)
        if self.session_count[client] >= caps.sessions_per_token:
            what = f"holds {self.session_count[client]} open sessions"
            return self._refused("sessions_per_token", caps.sessions_per_token, client, wait, what)
        if self.sessions_total >= caps.sessions:
            what = f"cannot open a session: {self.sessions_total} are open in all"
            return self._refused("sessions", caps.sessions, client, wait, what)
        self.session_count[client] += 1
        self.sessions_total += 1
        return Slot(client)

    def admitted(self, session_id: str, client: str, slot: Slot | None) -> None:
        """The SDK opened ``session_id``: its count moves from the slot to the session."""
        if slot is None or slot.session_id is not None or slot.client != client:
            self.session_count[client] += 1  # opened without a slot: counted all the same
            self.sessions_total += 1
        else:
            slot.session_id = session_id
        # Its handshake time starts once the opening is answered (settle): an initialize
        # that waits for the upstream is not an abandoned session.
        bound = slot is not None and slot.session_id == session_id
        opened = math.inf if bound else self._clock()
        self._sessions[session_id] = _Session(client, opened)

    def settle(self, slot: Slot) -> None:
        """The opening request ended; a slot the SDK did not use frees its room."""
        if slot.session_id is None:
            self._uncount(slot.client)
            return
        session = self._sessions.get(slot.session_id)
        if session is not None:
            session.opened = self._clock()

    def closed(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._uncount(session.client)

    def used(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.used = True

    def abandoned(self) -> list[str]:
        """Sessions that did nothing past ``initialize`` within ``handshake_s``."""
        cutoff = self._clock() - self.caps.handshake_s
        return [sid for sid, s in self._sessions.items() if not s.used and s.opened <= cutoff]

    def _uncount(self, client: str) -> None:
        self.session_count[client] -= 1
        if self.session_count[client] <= 0:
            del self.session_count[client]
        self.sessions_total -= 1

    # ------------------------------------------------------------------ calls and bytes

    def hold(self, client: str) -> Hold:
        return Hold(client)

    def grow(self, hold: Hold, size: int) -> Refusal | None:
        """``size`` more bytes of ``hold``'s body arrived (or were announced)."""
        caps, client = self.caps, hold.client
        wait = self.caps.retry_after_s
        if self.held[client] + size > caps.argument_bytes_per_token:
            what = f"would hold {self.held[client] + size} bytes of calls in flight"
            key, limit = "argument_bytes_per_token", caps.argument_bytes_per_token
            return self._refused(key, limit, client, wait, what)
        if self.held_total + size > caps.argument_bytes:
            what = f"cannot add {size} bytes: calls in flight hold {self.held_total} in all"
            return self._refused("argument_bytes", caps.argument_bytes, client, wait, what)
        refused = self._spend(client, size)
        if refused is not None:
            return refused
        hold.size += size
        self.held[client] += size
        self.held_total += size
        return None

    def _spend(self, client: str, size: int) -> Refusal | None:
        """Take ``size`` bytes from the token's bucket: a second's worth of its rate, refilled
        as time passes. A body passes while the bucket has any room (one larger than a
        second's worth included: it leaves the bucket in debt), so every body can pass."""
        rate = self.caps.argument_bytes_per_s_per_token
        now = self._clock()
        room, then = self._rate.get(client, (float(rate), now))
        room = min(float(rate), room + (now - then) * rate)
        if room <= 0:
            self._rate[client] = (room, now)
            what = f"sent over {rate} bytes of requests a second"
            wait = max(1, math.ceil(-room / rate))
            return self._refused("argument_bytes_per_s_per_token", rate, client, wait, what)
        self._rate[client] = (room - size, now)
        return None

    def call(self, hold: Hold) -> Refusal | None:
        """``hold`` is a call (a JSON-RPC request): one more in flight for its token."""
        client = hold.client
        if self.calls[client] >= self.caps.calls_per_token:
            what = f"has {self.calls[client]} calls in flight"
            key, limit = "calls_per_token", self.caps.calls_per_token
            return self._refused(key, limit, client, self.caps.retry_after_s, what)
        hold.call = True
        self.calls[client] += 1
        return None

    def release(self, hold: Hold) -> None:
        client = hold.client
        if hold.call:
            hold.call = False
            self.calls[client] -= 1
            if self.calls[client] <= 0:
                del self.calls[client]
        if hold.size:
            self.held[client] -= hold.size
            if self.held[client] <= 0:
                del self.held[client]
            self.held_total -= hold.size
            hold.size = 0

    def _refused(self, key: str, limit: int, client: str, wait: int, what: str) -> Refusal:
        if self.on_refused is not None:
            self.on_refused(key)
        now = self._clock()
        if now - self._logged.get((client, key), -_LOG_EVERY_S) >= _LOG_EVERY_S:
            if len(self._logged) > 4096:  # bounded, like everything else here
                self._logged.clear()
            self._logged[(client, key)] = now
            log.warning("refused %s: gateway.limits.%s (%d) reached", client, key, limit)
        return Refusal(key, limit, client, wait, what)
