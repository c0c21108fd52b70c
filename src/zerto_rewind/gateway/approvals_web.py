"""The approvals page: a person logs in and approves or denies prompt-row calls.

The page is a small Starlette app that the gateway serves on its own listener
(``gateway --approvals-listen``). This module is the app: its routes, the headers
on every answer, and form reading. The rest of the page:

- ``approvals_auth``: passwords, page sessions, CSRF and origin checks;
- ``approvals_login``: the login limit (slows guessing, never locks out);
- ``approvals_pages``: the pages around the request cards, and the style and
  script files (``static/approvals.css``, ``static/approvals.js``);
- ``approvals_html``: the request cards and the recent decisions;
- ``rewind_web``: a session's rewind plan, run by an approver (``rewind_page``
  draws it, ``rewind_runs`` runs it in the background).

Nothing here is reachable with an agent's bearer token, and an agent's token name
cannot log in: approver logins are ``approvals.web_approvers`` only (name ->
:func:`hash_password` hash), and every name is also checked with
:meth:`ApprovalsService.refusal`.

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
  style: the style and script are files served from the page's own origin),
  ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer``,
  ``Cache-Control: no-store`` on every answer;
- ``next`` after login is a local path (``/`` or ``/requests/<id>``), never a URL.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qs, quote

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..core.approvals import APPROVED, PENDING, ApprovalError, ApprovalRequest, store_error
from ..core.log_index import state_mac
from ..core.sessions import SessionSummary, list_sessions, read_timeline
from ..errors import StateError, UsageError
from .approvals_auth import (
    COOKIE,
    PageAuth,
    Session,
    approver,
    check_password,
    hash_password,
    same_origin,
)
from .approvals_html import BASE as _BASE
from .approvals_html import url as _url
from .approvals_login import KNOWN_COOKIE, KNOWN_MAX_AGE_S, source_of
from .approvals_pages import (
    MAX_NAME,
    listing_page,
    login_page,
    message_page,
    not_accepted_page,
    request_page,
    safe_next,
    script,
    stylesheet,
    summary,
    version,
)
from .sessions_page import session_page, sessions_page

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from .approvals import ApprovalsService

# The passwords and safe_next keep their names here too: the page's tests and the
# gateway's config tests import them from the page.
__all__ = ["build_approvals_app", "check_password", "hash_password", "safe_next"]

log = logging.getLogger("zerto_rewind.gateway")

RECENT = 50
SESSIONS = 50  # sessions on /sessions, latest activity first
_MAX_FORM_BYTES = 16 * 1024
_T = TypeVar("_T")

# No 'unsafe-inline', hashes or nonces: the page's only style and script are the
# files under static/, served from this origin (approvals_pages has none inline).
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


def _go(local: str) -> Response:
    """303 to an app-local path (already checked by safe_next where a person chose it)."""
    return RedirectResponse(_url(local), status_code=303)


def _to_login(request: Request) -> Response:
    """To the login form, coming back here (a local path) after it."""
    path = request.url.path
    prefix = _BASE.get()
    if prefix and path.startswith(prefix):
        path = path[len(prefix) :]
    target = safe_next(path)
    suffix = "" if target == "/" else f"?next={quote(target, safe='/')}"
    return _go(f"/login{suffix}")


def _list_sessions(log_path: str) -> list[SessionSummary]:
    return list_sessions(log_path, limit=SESSIONS)


def _page(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status)


async def _form_or_refusal(request: Request) -> dict[str, str] | Response:
    """The POST's form, or the answer that refuses it (nothing was changed)."""
    try:
        return await _form(request)
    except _FormError as exc:
        return _page(message_page(None, "Not accepted", exc.text), exc.status)


async def _read(fn: Callable[..., _T], *args: object) -> _T:
    """A store read, off the event loop (the file store does blocking IO)."""
    return await anyio.to_thread.run_sync(fn, *args)


class _Routes:
    """The page's request handlers, over one ApprovalsService and one PageAuth."""

    def __init__(
        self,
        service: ApprovalsService,
        *,
        secure_cookies: bool,
        zvms: Guard | ZvmClient | None = None,
    ) -> None:
        self.service = service
        self.auth = PageAuth(service)
        self.zvms = zvms
        self.secure = "; Secure" if secure_cookies else ""
        # Read at start-up: a missing file stops the listener now, not at the first visit.
        self.css = stylesheet()
        self.js = script()

    def routes(self) -> list[Route]:
        return [
            Route("/", self.listing, methods=["GET"]),
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/requests/{request_id}", self.one, methods=["GET"]),
            Route("/requests/{request_id}/approve", self.approve, methods=["POST"]),
            Route("/requests/{request_id}/deny", self.deny, methods=["POST"]),
            Route("/sessions", self.sessions, methods=["GET"]),
            Route("/sessions/{session_id:path}", self.one_session, methods=["GET"]),
            Route("/api/pending", self.api_pending, methods=["GET"]),
            Route("/api/session", self.api_session, methods=["GET"]),
            Route("/static/app.css", self.static_css, methods=["GET"]),
            Route("/static/app.js", self.static_js, methods=["GET"]),
        ]

    # ------------------------------------------------------------------ login

    async def login_form(self, request: Request) -> Response:
        next_path = safe_next(request.query_params.get("next"))
        _, session = self.auth.current(request)
        if session is not None:
            return _go(next_path)
        return _page(login_page(next_path))

    async def login(self, request: Request) -> Response:
        if not same_origin(request):
            return _page(login_page("/", "This login form came from another site."), 403)
        try:
            form = await _form(request)
        except _FormError as exc:
            return _page(login_page("/", exc.text), exc.status)
        name = form.get("name", "").strip()[:MAX_NAME]
        next_path = safe_next(form.get("next"))
        source = source_of(request.client.host if request.client else None)
        limits = self.auth.limits
        key = limits.key(name, source, request.cookies.get(KNOWN_COOKIE))
        # Held until the key's turn, never refused for failures: the right password gets in.
        async with limits.turn(key) as admitted:
            if not admitted:
                log.warning("approvals page: login of %r from %s: tries waiting", name, source)
                text = (
                    "Other logins for this name from this address are being checked. "
                    "Try again in a few seconds."
                )
                return _page(login_page(next_path, text, name), 429)
            refused = await self.auth.password_refusal(name, form.get("password", ""))
            if refused is not None:
                limits.fail(key, source)
                await self.auth.report_failures()
                return _page(login_page(next_path, refused[1], name), refused[0])
            limits.clear(key)
        return self._logged_in(request, name, next_path)

    def _logged_in(self, request: Request, name: str, next_path: str) -> Response:
        """A fresh session id at every login, and the known-browser cookie for the name."""
        self.auth.sessions.drop(request.cookies.get(COOKIE))
        session_id, _ = self.auth.sessions.new(name)
        log.info("approvals page: %s logged in", approver(name).label)
        response = _go(next_path)
        cookie = f"{COOKIE}={session_id}; Path=/; HttpOnly; SameSite=Strict{self.secure}"
        response.headers.append("set-cookie", cookie)
        known = (
            f"{KNOWN_COOKIE}={self.auth.limits.known_cookie(name)}; Path=/; "
            f"Max-Age={KNOWN_MAX_AGE_S}; HttpOnly; SameSite=Strict{self.secure}"
        )
        response.headers.append("set-cookie", known)
        return response

    async def posted(self, request: Request) -> tuple[Session, dict[str, str]] | Response:
        """A state-changing POST's session and form (its cookie, CSRF token and origin
        checked), or the answer that refuses it: nothing was changed."""
        form = await _form_or_refusal(request)
        if isinstance(form, Response):
            return form
        session = self.auth.checked(request, form)
        if session is None:
            return _page(not_accepted_page(self.auth.current(request)[1]), 403)
        return session, form

    async def logout(self, request: Request) -> Response:
        posted = await self.posted(request)
        if isinstance(posted, Response):
            return posted
        session, _ = posted
        self.auth.sessions.drop(request.cookies.get(COOKIE))
        log.info("approvals page: %s logged out", approver(session.name).label)
        response = _go("/login")
        expired = f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{self.secure}"
        response.headers.append("set-cookie", expired)
        return response

    # ------------------------------------------------------------------ pages

    async def listing(self, request: Request) -> Response:
        _, session = self.auth.current(request)
        if session is None:
            return _to_login(request)
        try:
            pending = await _read(self.service.store.pending)
            recent = await _read(self.service.store.recent, RECENT)
        except (StateError, ApprovalError) as exc:
            return _page(message_page(session, "Store unavailable", store_error(exc)), 503)
        failures = self.auth.limits.recent()
        return _page(listing_page(session, pending, recent, failures, time.time()))

    async def one(self, request: Request) -> Response:
        _, session = self.auth.current(request)
        if session is None:
            return _to_login(request)
        request_id = request.path_params["request_id"]
        store = self.service.store
        found: ApprovalRequest | None
        try:
            found = await _read(store.get, request_id)
            pending = await _read(store.pending)
            recent = await _read(store.recent, RECENT)
        except ApprovalError:
            found, pending, recent = None, [], []
        except StateError as exc:
            return _page(message_page(session, "Store unavailable", store_error(exc)), 503)
        if found is None:
            text = f"There is no approval request {request_id[:80]}."
            return _page(message_page(session, "Not found", text), 404)
        return _page(request_page(session, found, pending, recent, time.time()))

    async def sessions(self, request: Request) -> Response:
        """``/sessions``: recent agent sessions, for approvers and operators alike."""
        _, session = self.auth.current(request)
        if session is None:
            return _to_login(request)
        log_path = self.service.settings.log_path
        try:
            found = await _read(_list_sessions, log_path)
        except StateError as exc:
            return _page(message_page(session, "Log unavailable", str(exc)), 503)
        return _page(sessions_page(session, found, log_path))

    async def one_session(self, request: Request) -> Response:
        """``/sessions/<id>``: one session's timeline, drawn (an id's start works too)."""
        _, session = self.auth.current(request)
        if session is None:
            return _to_login(request)
        wanted = request.path_params["session_id"]
        try:
            settings = self.service.settings
            read = functools.partial(read_timeline, mac=state_mac(settings.state_dir))
            timeline = await _read(read, settings.log_path, wanted)
        except UsageError as exc:
            return _page(message_page(session, "No such session", str(exc)), 404)
        except StateError as exc:
            return _page(message_page(session, "Log unavailable", str(exc)), 503)
        return _page(session_page(session, timeline))

    async def api_pending(self, request: Request) -> Response:
        _, session = self.auth.current(request, touch=False)
        if session is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        try:
            pending = await _read(self.service.store.pending)
            recent = await _read(self.service.store.recent, RECENT)
        except (StateError, ApprovalError) as exc:
            return JSONResponse({"error": store_error(exc)}, status_code=503)
        return JSONResponse(
            {
                "approver": session.name,
                "version": version(pending, recent),
                "pending": [summary(r) for r in pending],
                "recent": [summary(r) for r in recent],
            }
        )

    async def api_session(self, request: Request) -> Response:
        """Who this browser is logged in as (null if nobody): the login page asks."""
        _, session = self.auth.current(request, touch=False)
        return JSONResponse({"approver": session.name if session is not None else None})

    # ------------------------------------------------------------------ decisions

    async def decide(self, request: Request, approve: bool) -> Response:
        posted = await self.posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        request_id = request.path_params["request_id"]
        note = None if approve else (form.get("note", "").strip()[:500] or None)
        try:
            decided = await self.service.answer(approver(session.name), request_id, approve, note)
        except ApprovalError as exc:
            status = await self._not_recorded_status(request_id)
            return _page(message_page(session, "Not recorded", str(exc)), status)
        except StateError as exc:
            return _page(message_page(session, "Store unavailable", store_error(exc)), 503)
        verb = "Approved" if decided.state == APPROVED else "Denied"
        vms = ", ".join(decided.vms) or "no VM named"
        session.flash = ("ok", f"{verb} {decided.id}: {decided.tool} on {vms}.")
        return _go(safe_next(form.get("next")))

    async def _not_recorded_status(self, request_id: str) -> int:
        """A refused answer's status: 404 no such request, 403 not yours to answer, 409 decided."""
        try:
            now_is = await _read(self.service.store.get, request_id)
        except (ApprovalError, StateError):
            now_is = None
        return 404 if now_is is None else 403 if now_is.state == PENDING else 409

    async def approve(self, request: Request) -> Response:
        return await self.decide(request, True)

    async def deny(self, request: Request) -> Response:
        return await self.decide(request, False)

    # ------------------------------------------------------------------ static

    async def static_css(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css")

    async def static_js(self, request: Request) -> Response:
        return Response(self.js, media_type="text/javascript")

    # ------------------------------------------------------------------ the rewind

    def rewind_routes(self) -> list[Route]:
        """The rewind's pages (``rewind_web``), over this page's logins and form helpers."""
        from .rewind_web import PageKit, RewindRoutes

        kit = PageKit(posted=self.posted, go=_go, to_login=_to_login)
        return RewindRoutes(self.service, self.auth, kit, self.zvms).routes()


def build_approvals_app(
    service: ApprovalsService, *, secure_cookies: bool, zvms: Guard | ZvmClient | None = None
) -> ASGIApp:
    """The approvals page as an ASGI app, for the gateway's approvals listener.

    ``secure_cookies``: mark the session cookie ``Secure`` (the page is served over
    TLS, directly or behind a proxy); False only for a loopback listener over HTTP.
    ``zvms``: the guard's ZVMs, which an approver's rewind runs against (None: the page
    shows sessions but runs no rewind).
    """
    pages = _Routes(service, secure_cookies=secure_cookies, zvms=zvms)
    routes = [*pages.routes(), *pages.rewind_routes()]
    return _SecurityHeaders(Starlette(routes=routes), hsts=secure_cookies)
