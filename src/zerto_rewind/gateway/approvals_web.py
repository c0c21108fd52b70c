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

import hmac
import logging
import secrets
import time
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
from ..errors import StateError
from .approvals_auth import COOKIE, Session, Sessions, check_password, hash_password
from .approvals_html import BASE as _BASE
from .approvals_html import card, differing, recent_table
from .approvals_html import esc as _e
from .approvals_html import request_path as _request_path
from .approvals_html import url as _url
from .approvals_login import KNOWN_COOKIE, KNOWN_MAX_AGE_S, LoginLimit, source_of
from .approvals_pages import (
    MAX_NAME,
    POLL_MS,
    document,
    failures_banner,
    flash,
    login_page,
    message_page,
    safe_next,
    script,
    stylesheet,
    summary,
    version,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .approvals import ApprovalsService

__all__ = ["build_approvals_app", "check_password", "hash_password", "safe_next"]

log = logging.getLogger("zerto_rewind.gateway")

RECENT = 50
_MAX_FORM_BYTES = 16 * 1024

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
    sessions = Sessions()
    limits = LoginLimit()
    # Two password checks at a time (16 MiB and ~0.1 s each): a flood of logins
    # waits in line instead of taking every thread and a gigabyte of memory.
    scrypt_slots: list[anyio.CapacityLimiter] = []
    # An unknown name is checked against this, so it costs the same scrypt as a known one.
    decoy = hash_password(secrets.token_urlsafe(16))

    def approver(name: str) -> Approver:
        return Approver("web", name)

    def current(request: Request, *, touch: bool = True) -> tuple[str | None, Session | None]:
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
        return page(login_page(next_path))

    async def login(request: Request) -> Response:
        if not same_origin(request):
            return page(login_page("/", "This login form came from another site."), 403)
        try:
            form = await _form(request)
        except _FormError as exc:
            return page(login_page("/", exc.text), exc.status)
        name = form.get("name", "").strip()[:MAX_NAME]
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
                return page(login_page(next_path, text, name), 429)
            refused = await password_refusal(name, form.get("password", ""))
            if refused is not None:
                limits.fail(key, source)
                await report_failures()
                return page(login_page(next_path, refused[1], name), refused[0])
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

    def checked(request: Request, form: dict[str, str]) -> Session | None:
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

    def forbidden(session: Session | None) -> Response:
        text = (
            "The form was not accepted: it came from another site, the login expired, or "
            "the page was stale. Nothing was changed; reload the page and try again."
        )
        return page(message_page(session, "Not accepted", text), 403)

    async def logout(request: Request) -> Response:
        try:
            form = await _form(request)
        except _FormError as exc:
            return page(message_page(None, "Not accepted", exc.text), exc.status)
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
            return page(message_page(session, "Store unavailable", store_error(exc)), 503)
        now = time.time()
        differs = differing(pending)
        cards = "".join(
            card(r, session.csrf, now, "/", differs.get(r.id, ())) for r in pending
        ) or ('<p class="empty">Nothing is waiting for a decision.</p>')
        body = (
            f"{flash(session)}{failures_banner(limits.recent())}"
            f'<section id="live" data-version="{_e(version(pending, recent))}">'
            f'<h2>Waiting for a decision <span class="count">({len(pending)})</span></h2>'
            f'<div id="pending">{cards}</div>'
            f'<h2>Recent decisions</h2><div id="recent">{recent_table(recent, now)}</div>'
            "</section>"
            '<p id="status">This page updates itself every '
            f"{POLL_MS // 1000} s.</p>"
        )
        return page(document("zerto-rewind approvals", "list", body, who=session))

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
            return page(message_page(session, "Store unavailable", store_error(exc)), 503)
        if found is None:
            return page(
                message_page(
                    session, "Not found", f"There is no approval request {request_id[:80]}."
                ),
                404,
            )
        now = time.time()
        back = _request_path(found.id)
        differs = differing([*pending, found]).get(found.id, ())
        body = (
            f"{flash(session)}"
            f'<section id="live" data-version="{_e(version(pending, recent))}">'
            f"<h2>Request {_e(found.id)}</h2>{card(found, session.csrf, now, back, differs)}"
            f'<p><a href="{_e(_url("/"))}">All requests</a></p></section>'
            f'<p id="status">This page updates itself every {POLL_MS // 1000} s.</p>'
        )
        title = f"{found.id} — zerto-rewind approvals"
        return page(document(title, "request", body, who=session))

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
                "version": version(pending, recent),
                "pending": [summary(r) for r in pending],
                "recent": [summary(r) for r in recent],
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
            return page(message_page(None, "Not accepted", exc.text), exc.status)
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
            return page(message_page(session, "Not recorded", str(exc)), status)
        except StateError as exc:
            return page(message_page(session, "Store unavailable", store_error(exc)), 503)
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
        return Response(stylesheet(), media_type="text/css")

    async def js(request: Request) -> Response:
        return Response(script(), media_type="text/javascript")

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
