"""The approvals page's pages: the document around a body, login, messages, the list.

Every value goes through :func:`~.approvals_html.esc` (visible escapes, then HTML
escaping); the request cards themselves are ``approvals_html``. The page's style
and script are files of this package (``static/approvals.css``,
``static/approvals.js``), served from the page's own origin: the
Content-Security-Policy allows no inline script or style.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from typing import Any

from ..core.approvals import ApprovalRequest
from ..core.decision import fmt_time
from .approvals_auth import Session
from .approvals_html import BASE as _BASE
from .approvals_html import card, differing, recent_table, row_phrase
from .approvals_html import esc as _e
from .approvals_html import request_path as _request_path
from .approvals_html import url as _url
from .approvals_login import Failure

__all__ = [
    "MAX_NAME",
    "POLL_MS",
    "document",
    "failures_banner",
    "flash",
    "listing_page",
    "login_page",
    "message_page",
    "not_accepted_page",
    "request_page",
    "safe_next",
    "script",
    "stylesheet",
    "summary",
    "version",
]

POLL_MS = 2000
MAX_NAME = 100

_NEXT = re.compile(
    r"/(?:requests/[0-9A-Za-z-]{1,64}|sessions(?:/[0-9A-Za-z._%-]{1,200})?"
    r"|rewind/session/[0-9A-Za-z._%-]{1,200}|rewinds/[0-9a-f]{16})?"
)


def safe_next(raw: str | None) -> str:
    """A local path to go to after login: ``/``, ``/requests/<id>``, ``/sessions``,
    ``/sessions/<id>``, a session's rewind plan or a plan's run; ``/`` otherwise."""
    if raw and _NEXT.fullmatch(raw):
        return raw
    return "/"


def stylesheet() -> str:
    """The page's style sheet (``static/approvals.css``)."""
    return _static("approvals.css")


def script() -> str:
    """The page's only script (``static/approvals.js``), with the poll interval filled in."""
    return _static("approvals.js").replace("@POLL_MS@", str(POLL_MS))


def _static(name: str) -> str:
    files = resources.files("zerto_rewind.gateway")
    return files.joinpath("static", name).read_text(encoding="utf-8")


def document(title: str, page: str, body: str, *, who: Session | None = None) -> str:
    header = ""
    if who is not None:
        header = (
            f'<nav><a href="{_e(_url("/"))}">Approvals</a>'
            f'<a href="{_e(_url("/sessions"))}" id="nav-sessions">Sessions</a></nav>'
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


def flash(session: Session) -> str:
    if session.flash is None:
        return ""
    (kind, text), session.flash = session.flash, None
    return f'<p class="flash {_e(kind)}" role="status">{_e(text)}</p>'


def version(pending: list[ApprovalRequest], recent: list[ApprovalRequest]) -> str:
    """Changes whenever the page would: the script redraws when it does."""
    seen = [(r.id, r.state, r.decided_at, r.used_at) for r in [*pending, *recent]]
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]


def summary(request: ApprovalRequest) -> dict[str, Any]:
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


def login_page(next_path: str, message: str | None = None, name: str = "") -> str:
    error = f'<p class="flash err" role="alert">{_e(message)}</p>' if message else ""
    body = (
        f'<form class="login" method="post" action="{_e(_url("/login"))}">'
        "<h2>Approver login</h2>"
        '<p class="muted">Approve or deny agent calls that have no rewind point. '
        "Approver logins are not agent tokens.</p>"
        f"{error}"
        f'<input type="hidden" name="next" value="{_e(next_path)}">'
        '<label for="name">Name</label>'
        f'<input type="text" id="name" name="name" value="{_e(name)}" maxlength="{MAX_NAME}" '
        'autocomplete="username" required autofocus>'
        '<label for="password">Password</label>'
        '<input type="password" id="password" name="password" '
        'autocomplete="current-password" required>'
        '<button type="submit" id="login">Log in</button>'
        '<p class="muted">After several failed logins for a name from one address, each '
        "further try from there waits a few seconds; the right password still gets in.</p>"
        "</form>"
    )
    return document("Log in — zerto-rewind approvals", "login", body)


def failures_banner(failures: list[Failure]) -> str:
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


def message_page(session: Session | None, title: str, text: str) -> str:
    body = (
        f'<h2>{_e(title)}</h2><p class="flash err" role="alert">{_e(text)}</p>'
        f'<p><a href="{_e(_url("/"))}">Back to the approvals</a></p>'
    )
    return document(f"{title} — zerto-rewind approvals", "message", body, who=session)


def listing_page(
    session: Session,
    pending: list[ApprovalRequest],
    recent: list[ApprovalRequest],
    failures: list[Failure],
    now: float,
) -> str:
    """``/``: every pending request as a card, then the recent decisions."""
    differs = differing(pending)
    cards = "".join(card(r, session.csrf, now, "/", differs.get(r.id, ())) for r in pending) or (
        '<p class="empty">Nothing is waiting for a decision.</p>'
    )
    body = (
        f"{flash(session)}{failures_banner(failures)}"
        f'<section id="live" data-version="{_e(version(pending, recent))}">'
        f'<h2>Waiting for a decision <span class="count">({len(pending)})</span></h2>'
        f'<div id="pending">{cards}</div>'
        f'<h2>Recent decisions</h2><div id="recent">{recent_table(recent, now)}</div>'
        "</section>"
        '<p id="status">This page updates itself every '
        f"{POLL_MS // 1000} s.</p>"
    )
    return document("zerto-rewind approvals", "list", body, who=session)


def request_page(
    session: Session,
    found: ApprovalRequest,
    pending: list[ApprovalRequest],
    recent: list[ApprovalRequest],
    now: float,
) -> str:
    """``/requests/<id>``: one request's card, pending or decided."""
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
    return document(title, "request", body, who=session)


def not_accepted_page(session: Session | None) -> str:
    """A state-changing form without its session, CSRF token or origin: nothing changed."""
    text = (
        "The form was not accepted: it came from another site, the login expired, or "
        "the page was stale. Nothing was changed; reload the page and try again."
    )
    return message_page(session, "Not accepted", text)
