"""The approvals page's logins: approver passwords and the page's sessions.

Passwords are scrypt hashes in ``approvals.web_approvers`` (name -> :func:`hash_password`
hash). A login gets a server-side session (``zr_session`` cookie), 8 h idle at most,
24 h in all, kept in this process's memory only. How failed logins are slowed is
``approvals_login``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = [
    "COOKIE",
    "MAX_SESSIONS",
    "SESSION_IDLE_S",
    "SESSION_MAX_S",
    "Session",
    "Sessions",
    "check_password",
    "hash_password",
]

COOKIE = "zr_session"
SESSION_IDLE_S = 8 * 3600.0
SESSION_MAX_S = 24 * 3600.0
MAX_SESSIONS = 1000

# --------------------------------------------------------------------------- passwords

_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1
_SCRYPT_MAXMEM = 256 * 1024 * 1024
_DKLEN = 32


def hash_password(password: str) -> str:
    """``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>`` for ``approvals.web_approvers``."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P, _DKLEN)
    return "$".join(
        ["scrypt", str(_SCRYPT_N), str(_SCRYPT_R), str(_SCRYPT_P), _b64(salt), _b64(digest)]
    )


def check_password(password: str, hashed: str) -> bool:
    """Whether ``password`` matches ``hashed`` (constant-time compare); False if malformed."""
    parts = hashed.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        expected = base64.b64decode(parts[5], validate=True)
    except ValueError:
        return False
    # Bounds keep a damaged config from asking for gigabytes; n must be a power of two.
    if not (2 <= n <= 2**20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
        return False
    if not expected or len(expected) > 128:
        return False
    try:
        digest = _scrypt(password, salt, n, r, p, len(expected))
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(digest, expected)


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=_SCRYPT_MAXMEM, dklen=dklen
    )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# --------------------------------------------------------------------------- sessions


def _now() -> float:
    """The clock for sessions and login limits (tests replace it)."""
    return time.monotonic()


@dataclass
class Session:
    name: str
    csrf: str
    created: float
    seen: float
    flash: tuple[str, str] | None = None  # (kind, text), shown once after a redirect


class Sessions:
    """Logged-in approvers, in this process's memory only: a restart logs everyone out."""

    def __init__(self) -> None:
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def new(self, name: str) -> tuple[str, Session]:
        now = _now()
        session_id = secrets.token_urlsafe(32)
        session = Session(name=name, csrf=secrets.token_urlsafe(32), created=now, seen=now)
        self._by_id[session_id] = session
        while len(self._by_id) > MAX_SESSIONS:
            self._by_id.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None, *, touch: bool = True) -> Session | None:
        if not session_id:
            return None
        session = self._by_id.get(session_id)
        if session is None:
            return None
        now = _now()
        if now - session.seen > SESSION_IDLE_S or now - session.created > SESSION_MAX_S:
            del self._by_id[session_id]
            return None
        if touch:
            session.seen = now
            self._by_id.move_to_end(session_id)
        return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            self._by_id.pop(session_id, None)
