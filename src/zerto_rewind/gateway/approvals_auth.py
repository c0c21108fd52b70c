"""The approvals page's logins: passwords, page sessions, and who a request comes from.

- Passwords are scrypt hashes in ``approvals.web_approvers`` (name ->
  :func:`hash_password` hash); an unknown name costs the same scrypt as a known
  one, and at most two checks run at once.
- A login gets a server-side session (``zr_session`` cookie), 8 h idle at most,
  24 h in all, kept in this process's memory only.
- A state-changing POST needs its session, that session's CSRF token (compared
  in constant time) and an origin that is the page's own (:func:`same_origin`).
- Failed logins are slowed, never refused, by ``approvals_login.LoginLimit``.

:class:`PageAuth` holds all of it for one app; the routes are ``approvals_web``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import anyio.to_thread

from ..core.approvals import Approver
from .approvals_login import LoginLimit

if TYPE_CHECKING:
    from starlette.requests import Request

    from .approvals import ApprovalsService

__all__ = [
    "COOKIE",
    "MAX_SESSIONS",
    "SESSION_IDLE_S",
    "SESSION_MAX_S",
    "PageAuth",
    "Session",
    "Sessions",
    "check_password",
    "hash_password",
    "same_origin",
]

log = logging.getLogger("zerto_rewind.gateway")

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


# --------------------------------------------------------------------------- requests


def _default_port(scheme: str) -> int:
    return 443 if scheme in ("https", "wss") else 80


def same_origin(request: Request) -> bool:
    """Whether a POST comes from this page, as far as the browser says where it comes from.

    ``Origin`` must name this host. A browser sends ``Origin: null`` for its own
    same-origin form under ``Referrer-Policy: no-referrer``; then ``Sec-Fetch-Site``
    (which every current browser sends, and a page cannot forge) must say
    ``same-origin``. No ``Origin`` at all (curl, a script): only not cross-site.
    """
    origin = request.headers.get("origin")
    site = request.headers.get("sec-fetch-site")
    if origin is None:
        return site in (None, "same-origin")
    if origin == "null":
        return site == "same-origin"
    try:
        parts = urlsplit(origin)
        origin_port = parts.port or _default_port(parts.scheme)
        host = urlsplit(f"//{request.headers.get('host', '')}")
        host_port = host.port or _default_port(parts.scheme)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or not host.hostname:
        return False
    return (parts.hostname.lower(), origin_port) == (host.hostname.lower(), host_port)


def approver(name: str) -> Approver:
    """A page login as the approvals service knows it."""
    return Approver("web", name)


class PageAuth:
    """One page's logins: its sessions, its login limit, and the password checks."""

    def __init__(self, service: ApprovalsService) -> None:
        self.service = service
        self.sessions = Sessions()
        self.limits = LoginLimit()
        # Two password checks at a time (16 MiB and ~0.1 s each): a flood of logins
        # waits in line instead of taking every thread and a gigabyte of memory.
        # Made at the first check: a limiter belongs to the running event loop.
        self._scrypt_slots: anyio.CapacityLimiter | None = None
        # An unknown name is checked against this, so it costs the same scrypt as a known one.
        self._decoy = hash_password(secrets.token_urlsafe(16))

    def current(self, request: Request, *, touch: bool = True) -> tuple[str | None, Session | None]:
        """The request's session id and its live session (None: not logged in, or no more)."""
        session_id = request.cookies.get(COOKIE)
        background = request.headers.get("x-zr-background") == "1"
        session = self.sessions.get(session_id, touch=touch and not background)
        if session is None:
            return session_id, None
        # The config decides who is an approver; an agent's name never is.
        if session.name not in self.service.config.web_approvers or (
            self.service.refusal(approver(session.name), None) is not None
        ):
            self.sessions.drop(session_id)
            return session_id, None
        return session_id, session

    def checked(self, request: Request, form: dict[str, str]) -> Session | None:
        """The session of a state-changing POST: its cookie, its CSRF token, this origin."""
        if not same_origin(request):
            return None
        _, session = self.current(request)
        if session is None:
            return None
        sent = form.get("csrf", "")
        if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            return None
        return session

    async def password_refusal(self, name: str, password: str) -> tuple[int, str] | None:
        """None if ``name`` may log in with ``password``; else the answer's status and text."""
        hashed = self.service.config.web_approvers.get(name)
        if self._scrypt_slots is None:
            self._scrypt_slots = anyio.CapacityLimiter(2)
        matched = await anyio.to_thread.run_sync(
            check_password,
            password,
            hashed if hashed is not None else self._decoy,
            limiter=self._scrypt_slots,
        )
        if hashed is None or not matched or not name:
            log.warning("approvals page: failed login for %r", name)
            return 401, "Wrong name or password."
        refused = self.service.refusal(approver(name), None)
        if refused is not None:
            log.warning("approvals page: login of %r refused: %s", name, refused)
            return 403, f"This name cannot approve: {refused}."
        return None

    async def report_failures(self) -> None:
        """The webhook's summary of failed logins, at most once a minute."""
        due = self.limits.due_report()
        if due and self.service.login_notifier is not None:
            try:
                await self.service.login_notifier(due)
            except Exception as exc:  # a notification is a courtesy
                log.warning("login notification failed: %s", type(exc).__name__)
