"""The approvals page: a person logs in and approves or denies prompt-row calls.

The page is a small Starlette app that the gateway serves on its own listener
(``gateway --approvals-listen``). Nothing here is reachable with an agent's
bearer token, and an agent's token name cannot log in: approver logins are
``approvals.web_approvers`` only (name -> :func:`hash_password` hash), and every
name is also checked with :meth:`ApprovalsService.refusal`.

What a person sees, for each pending request (laid out by ``approvals_html``):
the VM(s), each VPG's status, why no rewind point can be made, the tool and
every argument (escaped, secrets masked, host paths resolved, what differs from
other pending calls of the tool), who asked, until when the caller waits, what
approving does; Approve and Deny (with a reason).
Below, the recent decisions. The page polls ``/api/pending`` every 2 s and
redraws itself when something changed.

Security, in short:

- a server-side session per login (``zr_session`` cookie: HttpOnly,
  SameSite=Strict, Secure when asked), 8 h idle at most, 24 h in all;
- every POST that changes something needs the session, its CSRF token (a hidden
  field, compared in constant time) and, when the browser sends ``Origin``, an
  origin equal to the request's own host (``Origin: null``, which a browser
  sends under ``no-referrer``, needs ``Sec-Fetch-Site: same-origin``); else 403
  and nothing changes;
- failed logins slow further tries of that name from that source, and never
  refuse the right password (approvals_login.py says how); an unknown name
  costs the same scrypt as a known one; approvers see the failures;
- every value on the page goes through :func:`html.escape`, and values from the call
  through ``visible`` first (request fields come
  from the agent's call); a strict Content-Security-Policy (no inline script or
  style), ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer``,
  ``Cache-Control: no-store`` on every answer;
- ``next`` after login is a local path (``/`` or ``/requests/<id>``), never a URL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..core.approvals import (
    APPROVED,
    PENDING,
    ApprovalError,
    ApprovalRequest,
    Approver,
    store_error,
)
from ..core.decision import fmt_time
from ..errors import StateError
from .approvals_html import BASE as _BASE
from .approvals_html import CARD_CSS, card, differing, recent_table, row_phrase
from .approvals_html import esc as _e
from .approvals_html import request_path as _request_path
from .approvals_html import url as _url
from .approvals_login import KNOWN_COOKIE, KNOWN_MAX_AGE_S, Failure, LoginLimit, source_of

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .approvals import ApprovalsService

__all__ = ["build_approvals_app", "check_password", "hash_password"]

log = logging.getLogger("zerto_rewind.gateway")

COOKIE = "zr_session"
SESSION_IDLE_S = 8 * 3600.0
SESSION_MAX_S = 24 * 3600.0
MAX_SESSIONS = 1000
POLL_MS = 2000
RECENT = 50
_MAX_FORM_BYTES = 16 * 1024
_MAX_NAME = 100

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
class _Session:
    name: str
    csrf: str
    created: float
    seen: float
    flash: tuple[str, str] | None = None  # (kind, text), shown once after a redirect


class _Sessions:
    """Logged-in approvers, in this process's memory only: a restart logs everyone out."""

    def __init__(self) -> None:
        self._by_id: OrderedDict[str, _Session] = OrderedDict()

    def new(self, name: str) -> tuple[str, _Session]:
        now = _now()
        session_id = secrets.token_urlsafe(32)
        session = _Session(name=name, csrf=secrets.token_urlsafe(32), created=now, seen=now)
        self._by_id[session_id] = session
        while len(self._by_id) > MAX_SESSIONS:
            self._by_id.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None, *, touch: bool = True) -> _Session | None:
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


# --------------------------------------------------------------------------- HTML

_NEXT = re.compile(r"/(?:requests/[0-9A-Za-z-]{1,64})?")


def safe_next(raw: str | None) -> str:
    """A local path to go to after login: ``/`` or ``/requests/<id>``; ``/`` otherwise."""
    if raw and _NEXT.fullmatch(raw):
        return raw
    return "/"


_CSS = """
:root { color-scheme: light; --fg:#1d232a; --muted:#5b6673; --line:#d8dde3; --bg:#f5f7f9;
  --ok:#1f7a3a; --bad:#b3261e; --warn:#8a5a00; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; justify-content:space-between; gap:1rem;
  padding:.7rem 1.5rem; background:#fff; border-bottom:1px solid var(--line); }
header h1 { font-size:1.15rem; margin:0; }
header h1 a { color:inherit; text-decoration:none; }
.who { display:flex; align-items:center; gap:.6rem; color:var(--muted); }
.who form { margin:0; }
main { max-width:980px; margin:0 auto; padding:1rem 1.5rem 3rem; }
h2 { font-size:1.05rem; margin:1.6rem 0 .6rem; }
.flash { padding:.6rem .9rem; border-radius:6px; margin:1rem 0 0; border:1px solid; }
.flash.ok { background:#e8f5ec; border-color:#a6d5b3; color:var(--ok); }
.flash.err { background:#fdecea; border-color:#f1b0ab; color:var(--bad); }
.empty { color:var(--muted); background:#fff; border:1px dashed var(--line);
  border-radius:8px; padding:1rem; }
.request { background:#fff; border:1px solid var(--line); border-left:5px solid var(--warn);
  border-radius:8px; padding:1rem 1.2rem; margin:0 0 1rem; }
.request.decided { border-left-color:var(--muted); }
.request h3 { margin:0 0 .4rem; font-size:1.05rem; }
.request h3 .id { float:right; font:600 .85rem ui-monospace, monospace; color:var(--muted); }
.why { margin:.2rem 0 .8rem; }
.why b { color:var(--warn); }
dl.facts { display:grid; grid-template-columns:10rem 1fr; gap:.25rem 1rem; margin:0 0 .8rem; }
dl.facts dt { color:var(--muted); }
dl.facts dd { margin:0; }
dl.facts ul { margin:0; padding-left:1.1rem; }
code, .mono { font-family:ui-monospace, SFMono-Regular, Menlo, monospace; font-size:.92em; }
table { border-collapse:collapse; width:100%; background:#fff; }
th, td { text-align:left; padding:.35rem .6rem; border-bottom:1px solid var(--line);
  vertical-align:top; }
table.args { margin:0 0 .9rem; border:1px solid var(--line); }
table.args caption { text-align:left; color:var(--muted); padding:0 0 .3rem; font-size:.9rem; }
table.args th { width:14rem; font-weight:600; background:#fafbfc; }
table.recent { border:1px solid var(--line); font-size:.93rem; }
table.recent th { background:#fafbfc; }
.actions { display:flex; flex-wrap:wrap; gap:.8rem; align-items:center; }
.actions form { display:flex; gap:.5rem; margin:0; }
input[type=text], input[type=password] { font:inherit; padding:.4rem .55rem;
  border:1px solid #b9c1ca; border-radius:5px; }
.actions input[type=text] { width:18rem; }
button { font:inherit; padding:.4rem .95rem; border-radius:5px; border:1px solid #9aa4ae;
  background:#fff; cursor:pointer; }
button.approve { background:var(--ok); border-color:var(--ok); color:#fff; font-weight:600; }
button.deny { background:#fff; border-color:var(--bad); color:var(--bad); font-weight:600; }
.state-approved, .state-used { color:var(--ok); font-weight:600; }
.state-denied { color:var(--bad); font-weight:600; }
.state-expired { color:var(--muted); font-weight:600; }
.login { max-width:24rem; margin:4rem auto; background:#fff; border:1px solid var(--line);
  border-radius:8px; padding:1.4rem 1.6rem; }
.login label { display:block; margin:.7rem 0 .2rem; }
.login input { width:100%; }
.login button { margin-top:1rem; width:100%; }
.muted, #status { color:var(--muted); font-size:.88rem; }
"""

# No inline script: the page's only script is this file (Content-Security-Policy).
_JS = """
(function () {
  "use strict";
  var POLL_MS = @POLL_MS@;
  var body = document.body;
  var page = body.getAttribute("data-page");
  var base = body.getAttribute("data-base") || "";

  function relative(ts) {
    var delta = ts - Date.now() / 1000, span = Math.abs(delta), text;
    if (span < 60) { text = Math.floor(span) + " s"; }
    else if (span < 3600) { text = Math.floor(span / 60) + " min"; }
    else { text = (span / 3600).toFixed(1) + " h"; }
    return delta > 0 ? "in " + text : text + " ago";
  }
  function tick() {
    var times = document.querySelectorAll("time[data-ts]");
    for (var i = 0; i < times.length; i++) {
      times[i].textContent = relative(parseFloat(times[i].getAttribute("data-ts")));
    }
  }
  function status(text) {
    var el = document.getElementById("status");
    if (el) { el.textContent = text; }
  }

  if (page === "login") {
    // A link from a notification arrives cross-site, without the SameSite=Strict
    // cookie: if this browser is in fact logged in, go on to where it was going.
    fetch(base + "/api/session", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.json(); })
      .then(function (data) {
        if (data && data.approver) {
          var next = document.querySelector("input[name=next]");
          location.replace(base + (next ? next.value : "/"));
        }
      })
      .catch(function () {});
    return;
  }

  function version() {
    var live = document.getElementById("live");
    return live ? live.getAttribute("data-version") : null;
  }
  function redraw() {
    return fetch(location.pathname, {
      credentials: "same-origin", cache: "no-store", headers: {"X-Zr-Background": "1"}
    }).then(function (r) { return r.text(); }).then(function (text) {
      var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live");
      var live = document.getElementById("live");
      if (!fresh || !live) { return; }
      // Keep what a person is typing in a reason box across the redraw.
      var typed = {}, focused = null, boxes = live.querySelectorAll("input[name=note]");
      for (var i = 0; i < boxes.length; i++) {
        var key = boxes[i].getAttribute("data-request");
        if (boxes[i].value) { typed[key] = boxes[i].value; }
        if (boxes[i] === document.activeElement) { focused = key; }
      }
      fresh = document.importNode(fresh, true);
      live.parentNode.replaceChild(fresh, live);
      boxes = fresh.querySelectorAll("input[name=note]");
      for (var j = 0; j < boxes.length; j++) {
        var id = boxes[j].getAttribute("data-request");
        if (typed[id]) { boxes[j].value = typed[id]; }
        if (id === focused) { boxes[j].focus(); }
      }
      tick();
    });
  }
  function poll() {
    fetch(base + "/api/pending", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) {
        if (r.status === 401) {
          var here = location.pathname.slice(base.length) || "/";
          location.assign(base + "/login?next=" + encodeURIComponent(here));
          return null;
        }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.json();
      })
      .then(function (data) {
        if (!data) { return null; }
        status("Up to date; this page updates itself every " + POLL_MS / 1000 + " s.");
        if (data.version !== version()) { return redraw(); }
        return null;
      })
      .catch(function () { status("Cannot reach the approvals service; retrying\u2026"); })
      .then(function () { setTimeout(poll, POLL_MS); });
  }
  setInterval(tick, 1000);
  setTimeout(poll, POLL_MS);
})();
""".replace("@POLL_MS@", str(POLL_MS))

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", _CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def _document(title: str, page: str, body: str, *, who: _Session | None = None) -> str:
    header = ""
    if who is not None:
        header = (
            f'<div class="who">Signed in as <b>{_e(who.name)}</b>'
            f'<form method="post" action="{_e(_url("/logout"))}">'
            f'<input type="hidden" name="csrf" value="{_e(who.csrf)}">'
            '<button type="submit" id="logout">Log out</button></form></div>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title>"
        f'<link rel="stylesheet" href="{_e(_url("/static/app.css"))}">'
        f'<script src="{_e(_url("/static/app.js"))}" defer></script></head>'
        f'<body data-page="{_e(page)}" data-base="{_e(_BASE.get())}"><header>'
        f'<h1><a href="{_e(_url("/"))}">zerto-rewind approvals</a></h1>'
        f"{header}</header><main>{body}</main></body></html>"
    )


def _flash(session: _Session) -> str:
    if session.flash is None:
        return ""
    (kind, text), session.flash = session.flash, None
    return f'<p class="flash {_e(kind)}" role="status">{_e(text)}</p>'


def _version(pending: list[ApprovalRequest], recent: list[ApprovalRequest]) -> str:
    """Changes whenever the page would: the script redraws when it does."""
    seen = [(r.id, r.state, r.decided_at, r.used_at) for r in [*pending, *recent]]
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]


def _summary(request: ApprovalRequest) -> dict[str, Any]:
    out = request.summary()
    out.update(
        {
            "url": _url(_request_path(request.id)),
            "created": fmt_time(request.created),
            "why": request.why,
            "no_rewind_point": row_phrase(request.row),
            "decided_by": request.decided_by,
            "decided_at": fmt_time(request.decided_at) if request.decided_at else None,
            "note": request.note,
        }
    )
    return out


def _login_page(next_path: str, message: str | None = None, name: str = "") -> str:
    error = f'<p class="flash err" role="alert">{_e(message)}</p>' if message else ""
    body = (
        f'<form class="login" method="post" action="{_e(_url("/login"))}">'
        "<h2>Approver login</h2>"
        '<p class="muted">Approve or deny agent calls that have no rewind point. '
        "Approver logins are not agent tokens.</p>"
        f"{error}"
        f'<input type="hidden" name="next" value="{_e(next_path)}">'
        '<label for="name">Name</label>'
        f'<input type="text" id="name" name="name" value="{_e(name)}" maxlength="{_MAX_NAME}" '
        'autocomplete="username" required autofocus>'
        '<label for="password">Password</label>'
        '<input type="password" id="password" name="password" '
        'autocomplete="current-password" required>'
        '<button type="submit" id="login">Log in</button>'
        '<p class="muted">After several failed logins for a name from one address, each '
        "further try from there waits a few seconds; the right password still gets in.</p>"
        "</form>"
    )
    return _document("Log in — zerto-rewind approvals", "login", body)


def _failures_banner(failures: list[Failure]) -> str:
    """Failed approver logins of the last day, for every approver to see."""
    if not failures:
        return ""
    rows = "".join(
        f"<tr><td>{_e(fmt_time(f.at))}</td><td>{_e(f.name)}</td><td>{_e(f.source)}</td>"
        f"<td>{'known browser' if f.known_browser else ''}</td></tr>"
        for f in failures
    )
    return (
        '<section class="flash err" id="failed-logins" role="status">'
        f"<p>{len(failures)} failed approver login(s) in the last 24 h, newest first. "
        "Someone may be guessing a password: each further try of a name from the same "
        "address waits longer.</p>"
        "<table><thead><tr><th>When</th><th>Name</th><th>From</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _message_page(session: _Session | None, title: str, text: str) -> str:
    body = (
        f'<h2>{_e(title)}</h2><p class="flash err" role="alert">{_e(text)}</p>'
        f'<p><a href="{_e(_url("/"))}">Back to the approvals</a></p>'
    )
    return _document(f"{title} — zerto-rewind approvals", "message", body, who=session)


# --------------------------------------------------------------------------- the app


class _SecurityHeaders:
    """The same strict headers on every answer: pages, JSON, static files, errors."""

    def __init__(self, app: ASGIApp, *, hsts: bool) -> None:
        self.app = app
        # Served over TLS (secure cookies): browsers must not come back over plain HTTP.
        hsts_header = [(b"strict-transport-security", b"max-age=31536000")] if hsts else []
        self.headers = [*_HEADERS, *hsts_header]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {bytes(k).lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.headers if k not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        token = _BASE.set(str(scope.get("root_path") or "").rstrip("/"))
        try:
            await self.app(scope, receive, with_headers)
        finally:
            _BASE.reset(token)


class _FormError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


async def _form(request: Request) -> dict[str, str]:
    """A urlencoded form (or no body at all), at most 16 KiB; the first value of each field."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in ("application/x-www-form-urlencoded", ""):
        raise _FormError(415, "this form must be sent as application/x-www-form-urlencoded")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            raise _FormError(413, "form too large")
    if not kind and body:
        raise _FormError(415, "this form must be sent as application/x-www-form-urlencoded")
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise _FormError(400, "the form could not be read") from None
    return {key: values[0] for key, values in parsed.items() if values}


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


def build_approvals_app(service: ApprovalsService, *, secure_cookies: bool) -> ASGIApp:
    """The approvals page as an ASGI app, for the gateway's approvals listener.

    ``secure_cookies``: mark the session cookie ``Secure`` (the page is served over
    TLS, directly or behind a proxy); False only for a loopback listener over HTTP.
    """
    sessions = _Sessions()
    limits = LoginLimit()
    # Two password checks at a time (16 MiB and ~0.1 s each): a flood of logins
    # waits in line instead of taking every thread and a gigabyte of memory.
    scrypt_slots: list[anyio.CapacityLimiter] = []
    # An unknown name is checked against this, so it costs the same scrypt as a known one.
    decoy = hash_password(secrets.token_urlsafe(16))

    def approver(name: str) -> Approver:
        return Approver("web", name)

    def current(request: Request, *, touch: bool = True) -> tuple[str | None, _Session | None]:
        session_id = request.cookies.get(COOKIE)
        background = request.headers.get("x-zr-background") == "1"
        session = sessions.get(session_id, touch=touch and not background)
        if session is None:
            return session_id, None
        # The config decides who is an approver; an agent's name never is.
        if session.name not in service.config.web_approvers or (
            service.refusal(approver(session.name), None) is not None
        ):
            sessions.drop(session_id)
            return session_id, None
        return session_id, session

    def to_login(request: Request) -> Response:
        path = request.url.path
        prefix = _BASE.get()
        if prefix and path.startswith(prefix):
            path = path[len(prefix) :]
        target = safe_next(path)
        suffix = "" if target == "/" else f"?next={quote(target, safe='/')}"
        return go(f"/login{suffix}")

    def go(local: str) -> Response:
        """303 to an app-local path (already checked by safe_next where a person chose it)."""
        return RedirectResponse(_url(local), status_code=303)

    def page(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status)

    async def read(fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    # ------------------------------------------------------------------ login

    async def login_form(request: Request) -> Response:
        next_path = safe_next(request.query_params.get("next"))
        _, session = current(request)
        if session is not None:
            return go(next_path)
        return page(_login_page(next_path))

    async def login(request: Request) -> Response:
        if not same_origin(request):
            return page(_login_page("/", "This login form came from another site."), 403)
        try:
            form = await _form(request)
        except _FormError as exc:
            return page(_login_page("/", exc.text), exc.status)
        name = form.get("name", "").strip()[:_MAX_NAME]
        next_path = safe_next(form.get("next"))
        source = source_of(request.client.host if request.client else None)
        key = limits.key(name, source, request.cookies.get(KNOWN_COOKIE))
        # Held until the key's turn, never refused for failures: the right password gets in.
        async with limits.turn(key) as admitted:
            if not admitted:
                log.warning("approvals page: login of %r from %s: tries waiting", name, source)
                text = (
                    "Other logins for this name from this address are being checked. "
                    "Try again in a few seconds."
                )
                return page(_login_page(next_path, text, name), 429)
            refused = await password_refusal(name, form.get("password", ""))
            if refused is not None:
                limits.fail(key, source)
                await report_failures()
                return page(_login_page(next_path, refused[1], name), refused[0])
            limits.clear(key)
        sessions.drop(request.cookies.get(COOKIE))  # a fresh id at every login
        session_id, _ = sessions.new(name)
        log.info("approvals page: %s logged in", approver(name).label)
        response = go(next_path)
        secure = "; Secure" if secure_cookies else ""
        cookie = f"{COOKIE}={session_id}; Path=/; HttpOnly; SameSite=Strict{secure}"
        response.headers.append("set-cookie", cookie)
        known = (
            f"{KNOWN_COOKIE}={limits.known_cookie(name)}; Path=/; Max-Age={KNOWN_MAX_AGE_S}; "
            f"HttpOnly; SameSite=Strict{secure}"
        )
        response.headers.append("set-cookie", known)
        return response

    async def password_refusal(name: str, password: str) -> tuple[int, str] | None:
        """None if ``name`` may log in with ``password``; else the answer's status and text."""
        hashed = service.config.web_approvers.get(name)
        if not scrypt_slots:
            scrypt_slots.append(anyio.CapacityLimiter(2))
        matched = await anyio.to_thread.run_sync(
            check_password,
            password,
            hashed if hashed is not None else decoy,
            limiter=scrypt_slots[0],
        )
        if hashed is None or not matched or not name:
            log.warning("approvals page: failed login for %r", name)
            return 401, "Wrong name or password."
        refused = service.refusal(approver(name), None)
        if refused is not None:
            log.warning("approvals page: login of %r refused: %s", name, refused)
            return 403, f"This name cannot approve: {refused}."
        return None

    async def report_failures() -> None:
        """The webhook's summary of failed logins, at most once a minute."""
        due = limits.due_report()
        if due and service.login_notifier is not None:
            try:
                await service.login_notifier(due)
            except Exception as exc:  # a notification is a courtesy
                log.warning("login notification failed: %s", type(exc).__name__)

    def checked(request: Request, form: dict[str, str]) -> _Session | None:
        """The session of a state-changing POST: its cookie, its CSRF token, this origin."""
        if not same_origin(request):
            return None
        _, session = current(request)
        if session is None:
            return None
        sent = form.get("csrf", "")
        if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            return None
        return session

    def forbidden(session: _Session | None) -> Response:
        text = (
            "The form was not accepted: it came from another site, the login expired, or "
            "the page was stale. Nothing was changed; reload the page and try again."
        )
        return page(_message_page(session, "Not accepted", text), 403)

    async def logout(request: Request) -> Response:
        try:
            form = await _form(request)
        except _FormError as exc:
            return page(_message_page(None, "Not accepted", exc.text), exc.status)
        session = checked(request, form)
        if session is None:
            return forbidden(current(request)[1])
        sessions.drop(request.cookies.get(COOKIE))
        log.info("approvals page: %s logged out", approver(session.name).label)
        response = go("/login")
        expired = f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"
        response.headers.append("set-cookie", f"{expired}; Secure" if secure_cookies else expired)
        return response

    # ------------------------------------------------------------------ pages

    async def listing(request: Request) -> Response:
        _, session = current(request)
        if session is None:
            return to_login(request)
        try:
            pending: list[ApprovalRequest] = await read(service.store.pending)
            recent: list[ApprovalRequest] = await read(service.store.recent, RECENT)
        except (StateError, ApprovalError) as exc:
            return page(_message_page(session, "Store unavailable", store_error(exc)), 503)
        now = time.time()
        differs = differing(pending)
        cards = "".join(
            card(r, session.csrf, now, "/", differs.get(r.id, ())) for r in pending
        ) or ('<p class="empty">Nothing is waiting for a decision.</p>')
        body = (
            f"{_flash(session)}{_failures_banner(limits.recent())}"
            f'<section id="live" data-version="{_e(_version(pending, recent))}">'
            f'<h2>Waiting for a decision <span class="count">({len(pending)})</span></h2>'
            f'<div id="pending">{cards}</div>'
            f'<h2>Recent decisions</h2><div id="recent">{recent_table(recent, now)}</div>'
            "</section>"
            '<p id="status">This page updates itself every '
            f"{POLL_MS // 1000} s.</p>"
        )
        return page(_document("zerto-rewind approvals", "list", body, who=session))

    async def one(request: Request) -> Response:
        _, session = current(request)
        if session is None:
            return to_login(request)
        request_id = request.path_params["request_id"]
        try:
            found: ApprovalRequest | None = await read(service.store.get, request_id)
            pending: list[ApprovalRequest] = await read(service.store.pending)
            recent: list[ApprovalRequest] = await read(service.store.recent, RECENT)
        except ApprovalError:
            found, pending, recent = None, [], []
        except StateError as exc:
            return page(_message_page(session, "Store unavailable", store_error(exc)), 503)
        if found is None:
            return page(
                _message_page(
                    session, "Not found", f"There is no approval request {request_id[:80]}."
                ),
                404,
            )
        now = time.time()
        back = _request_path(found.id)
        differs = differing([*pending, found]).get(found.id, ())
        body = (
            f"{_flash(session)}"
            f'<section id="live" data-version="{_e(_version(pending, recent))}">'
            f"<h2>Request {_e(found.id)}</h2>{card(found, session.csrf, now, back, differs)}"
            f'<p><a href="{_e(_url("/"))}">All requests</a></p></section>'
            f'<p id="status">This page updates itself every {POLL_MS // 1000} s.</p>'
        )
        title = f"{found.id} — zerto-rewind approvals"
        return page(_document(title, "request", body, who=session))

    async def api_pending(request: Request) -> Response:
        _, session = current(request, touch=False)
        if session is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        try:
            pending: list[ApprovalRequest] = await read(service.store.pending)
            recent: list[ApprovalRequest] = await read(service.store.recent, RECENT)
        except (StateError, ApprovalError) as exc:
            return JSONResponse({"error": store_error(exc)}, status_code=503)
        return JSONResponse(
            {
                "approver": session.name,
                "version": _version(pending, recent),
                "pending": [_summary(r) for r in pending],
                "recent": [_summary(r) for r in recent],
            }
        )

    async def api_session(request: Request) -> Response:
        """Who this browser is logged in as (null if nobody): the login page asks."""
        _, session = current(request, touch=False)
        return JSONResponse({"approver": session.name if session is not None else None})

    # ------------------------------------------------------------------ decisions

    async def decide(request: Request, approve: bool) -> Response:
        try:
            form = await _form(request)
        except _FormError as exc:
            return page(_message_page(None, "Not accepted", exc.text), exc.status)
        session = checked(request, form)
        if session is None:
            return forbidden(current(request)[1])
        request_id = request.path_params["request_id"]
        back = safe_next(form.get("next"))
        note = None if approve else (form.get("note", "").strip()[:500] or None)
        who = approver(session.name)
        try:
            decided = await service.answer(who, request_id, approve, note)
        except ApprovalError as exc:
            try:
                now_is: ApprovalRequest | None = await read(service.store.get, request_id)
            except (ApprovalError, StateError):
                now_is = None
            status = 404 if now_is is None else 403 if now_is.state == PENDING else 409
            return page(_message_page(session, "Not recorded", str(exc)), status)
        except StateError as exc:
            return page(_message_page(session, "Store unavailable", store_error(exc)), 503)
        verb = "Approved" if decided.state == APPROVED else "Denied"
        vms = ", ".join(decided.vms) or "no VM named"
        session.flash = ("ok", f"{verb} {decided.id}: {decided.tool} on {vms}.")
        return go(back)

    async def approve(request: Request) -> Response:
        return await decide(request, True)

    async def deny(request: Request) -> Response:
        return await decide(request, False)

    # ------------------------------------------------------------------ static

    async def css(request: Request) -> Response:
        return Response(_CSS + CARD_CSS, media_type="text/css")

    async def js(request: Request) -> Response:
        return Response(_JS, media_type="text/javascript")

    routes = [
        Route("/", listing, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/requests/{request_id}", one, methods=["GET"]),
        Route("/requests/{request_id}/approve", approve, methods=["POST"]),
        Route("/requests/{request_id}/deny", deny, methods=["POST"]),
        Route("/api/pending", api_pending, methods=["GET"]),
        Route("/api/session", api_session, methods=["GET"]),
        Route("/static/app.css", css, methods=["GET"]),
        Route("/static/app.js", js, methods=["GET"]),
    ]
    return _SecurityHeaders(Starlette(routes=routes), hsts=secure_cookies)
