"""The approvals webhook: one signed JSON POST per event of an approval request.

``approvals.notify`` names a URL and an HMAC secret. Each event of a request
("requested", "approved", "denied", "expired") is POSTed as JSON: the request's
names and times, its arguments as the approver sees them (``arguments``: every
value, escaped, secrets masked; ``core.approval_view``), what approving does, a
link to it on the approvals page, and ``text``, one line a chat channel can show
as it is.
The body is signed: ``X-Zerto-Rewind-Signature: sha256=<hex>`` is the
HMAC-SHA256, keyed with the secret, of ``"<X-Zerto-Rewind-Timestamp>.<body>"``;
receivers check it with :func:`verify_signature`. See docs/approvals.md.

A notification is a courtesy: the request stands whatever happens to it. A
delivery is bounded by ``approvals.notify.timeout_s`` in all (connect, TLS,
send, answer), and a failure is logged as a warning naming the exception's type
only, never the URL (its query may hold a token) or the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from ..core.approval_view import if_approved, request_lines, short_digest
from ..core.decision import Row, fmt_time
from ..errors import ConfigError
from ..netutil import is_loopback

if TYPE_CHECKING:
    import ssl

    from ..config.settings import ApprovalsSettings
    from ..core.approvals import ApprovalRequest
    from .approvals import LoginNotifier, Notifier
    from .approvals_login import Failure

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "login_failures_body",
    "make_anchor_notifier",
    "make_login_notifier",
    "make_webhook_notifier",
    "sign",
    "verify_signature",
    "webhook_body",
]

log = logging.getLogger("zerto_rewind.gateway")

TIMESTAMP_HEADER = "X-Zerto-Rewind-Timestamp"
SIGNATURE_HEADER = "X-Zerto-Rewind-Signature"
# verify_signature's default: a body signed longer ago than this (or this far ahead) is refused.
MAX_AGE_S = 300.0
_KEY = "approvals.notify.url"
_ROWS = {
    Row.VM_UNKNOWN: "VM unknown to Zerto",
    Row.VM_AMBIGUOUS: "several VMs of that name",
    Row.VM_IDENTITY: "the VM server means another VM",
    Row.SITE_UNKNOWN: "a ZVM site did not answer",
    Row.NO_VM: "no VM in the arguments",
    Row.HOST_PATH: "it touches files on the VM server's host",
    Row.UNLISTED: "tool not in the catalog",
    Row.FAILED: "checkpoint could not be made",
    Row.PENDING: "checkpoint not landed in time",
    Row.ERROR: "checkpoint could not be made",
    Row.CONFIG_ERROR: "guard configuration error",
    Row.OUTCOME_UNKNOWN: "the same call's last outcome is unknown",
}
# Characters that chat apps read as markup (Slack's <link|text> and <!channel>,
# Teams' [text](link), code spans): a VM name is the agent's to choose, so it must
# not be able to turn the line into a link or a mention.
_MARKUP = str.maketrans({c: "?" for c in "<>[]`|"})
_NAME_MAX = 80
_VMS_SHOWN = 5


Poster = Callable[[dict[str, Any], str, str], Coroutine[Any, Any, None]]


def _signed_poster(settings: ApprovalsSettings) -> Poster | None:
    """Post one body to ``approvals.notify``, signed; None when no webhook is configured.

    Raises ConfigError for a URL that is not https:// (http:// only to a loopback
    address) or a missing secret.
    """
    url = settings.notify_url
    if not url:
        return None
    _check_url(url)
    secret = settings.notify_secret()
    if not secret:
        msg = (
            "notifications are HMAC-signed: give approvals.notify.secret_env "
            "(an environment variable) or approvals.notify.secret_file"
        )
        raise ConfigError(msg, key="approvals.notify")
    key = secret.encode()
    timeout_s = float(settings.notify_timeout_s)
    import httpx

    # Built once: loading the CAs per delivery would block the event loop each time.
    # The default CAs (certifi's, as httpx's default), never from the environment.
    tls = httpx.create_ssl_context(verify=True, trust_env=False)

    async def post(payload: dict[str, Any], event: str, about: str) -> None:
        body = _encode(payload)
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(key, timestamp, body),
            "User-Agent": "zerto-rewind-approvals",
        }
        await _deliver(url, body, headers, timeout_s, tls, event, about)

    return post


def make_webhook_notifier(
    settings: ApprovalsSettings, link: Callable[[str], str | None]
) -> Notifier | None:
    """The webhook notifier for ``approvals.notify``, or None when no URL is configured.

    ``link(request_id)`` is the request's address on the approvals page (or None).
    """
    post = _signed_poster(settings)
    if post is None:
        return None

    async def notify(event: str, request: ApprovalRequest) -> None:
        await post(webhook_body(event, request, link(request.id)), event, request.id)

    return notify


def make_anchor_notifier(
    settings: ApprovalsSettings,
) -> Callable[[dict[str, Any]], Coroutine[Any, Any, None]] | None:
    """The webhook's ``log.anchor`` event: each signed anchor of the decision log, so a
    copy of the log's head lives where the guard's host cannot rewrite it."""
    post = _signed_poster(settings)
    if post is None:
        return None

    async def notify(anchor: dict[str, Any]) -> None:
        text = f"zerto-rewind: decision log anchored at seq {anchor.get('seq')}"
        payload = {"event": "log.anchor", "anchor": anchor, "text": text}
        await post(payload, "log.anchor", "(log anchor)")

    return notify


def make_login_notifier(
    settings: ApprovalsSettings, page_url: Callable[[], str | None]
) -> LoginNotifier | None:
    """The webhook's "login_failed" event: failed page logins, summarised (approvals_login)."""
    post = _signed_poster(settings)
    if post is None:
        return None

    async def notify(failures: list[Failure]) -> None:
        await post(login_failures_body(failures, page_url()), "login_failed", "-")

    return notify


def login_failures_body(failures: list[Failure], url: str | None) -> dict[str, Any]:
    """Failed logins of the approvals page: who was tried, from where, when (no password)."""
    shown = [
        {"name": f.name, "source": f.source, "at": fmt_time(f.at), "known_browser": f.known_browser}
        for f in failures[-20:]
    ]
    pairs = sorted({f"{_clean(f.name)} from {_clean(f.source)}" for f in failures})
    text = (
        f"zerto-rewind: {len(failures)} failed approver login(s) on the approvals page "
        f"since {_hhmm(failures[0].at)} UTC: {', '.join(pairs[:5])}"
        + (f" and {len(pairs) - 5} more" if len(pairs) > 5 else "")
    )
    return {"event": "login_failed", "failures": shown, "count": len(failures), "url": url,
            "text": text + (f": {url}" if url else "")}  # fmt: skip


async def _deliver(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout_s: float,
    tls: ssl.SSLContext,
    event: str,
    request_id: str,
) -> None:
    """POST once, within ``timeout_s`` in all; log (never raise) what went wrong."""
    import httpx

    status: int | None = None
    try:
        with anyio.move_on_after(timeout_s) as scope:
            async with httpx.AsyncClient(
                timeout=httpx.Timeout(timeout_s),
                verify=tls,  # verified, always
                trust_env=False,  # no proxy, netrc or CA bundle from the environment
                follow_redirects=False,
            ) as client:
                response = await client.post(url, content=body, headers=headers)
                status = response.status_code
    except Exception as exc:  # a notification is a courtesy: the request stands
        log.warning(
            "approval notification %s for request %s failed: %s",
            event,
            request_id,
            type(exc).__name__,
        )
        return
    if scope.cancelled_caught:
        log.warning(
            "approval notification %s for request %s failed: no answer within %.1fs",
            event,
            request_id,
            timeout_s,
        )
    elif status is not None and not 200 <= status < 300:
        log.warning(
            "approval notification %s for request %s failed: the webhook answered %d",
            event,
            request_id,
            status,
        )


def webhook_body(event: str, request: ApprovalRequest, url: str | None) -> dict[str, Any]:
    """What is POSTed for ``event``: the request, its arguments as the approver sees them."""
    lines = request_lines(request)
    return {
        "event": event,
        "request": {
            "id": request.id,
            "tool": request.tool,
            "vms": list(request.vms),
            "row": request.row,
            "principal": request.principal,
            "host": request.host,
            "created": fmt_time(request.created),
            "expires": fmt_time(request.expires),
            "why": request.why,
            "state": request.state,
            "decided_by": request.decided_by,
            "decided_at": fmt_time(request.decided_at) if request.decided_at else None,
            "caller_waits_until": fmt_time(request.wait_until) if request.wait_until else None,
            "digest": short_digest(request.args_digest),
            "arguments": [line.to_json() for line in lines],
            "if_approved": if_approved(request, lines),
        },
        "url": url,
        "text": webhook_text(event, request, url),
    }


def webhook_text(event: str, request: ApprovalRequest, url: str | None) -> str:
    """One line for a chat channel (Slack, Teams, ntfy), markup neutralised."""
    call = _clean(request.tool) + _on_vms(request.vms)
    by = _clean(request.decided_by or "an approver")
    who = _clean(request.principal)
    if event == "requested":
        why = _ROWS.get(request.row, _clean(request.row))
        waits = (
            f"the caller waits until {_hhmm(request.wait_until)} UTC"
            if request.wait_until
            else "the caller does not wait (a retry after approval runs)"
        )
        line = (
            f"approval needed for {call} ({why}), requested by {who}; {waits}; "
            f"open until {_hhmm(request.expires)} UTC"
        )
    elif event == "approved":
        line = f"{call} approved by {by} for {who} (request {request.id})"
    elif event == "denied":
        line = f"{call} denied by {by} for {who} (request {request.id})"
    elif event == "expired":
        how = "unused" if request.decided_by else "unanswered"
        line = f"approval request {request.id} for {call} by {who} expired {how}"
    else:
        line = f"approval request {request.id} for {call} by {who}: {_clean(event)}"
    return f"zerto-rewind: {line}" + (f": {url}" if url else "")


def sign(secret: bytes | str, timestamp: str | int, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC of ``"<timestamp>.<body>"``."""
    key = secret.encode() if isinstance(secret, str) else secret
    mac = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify_signature(
    secret: bytes | str,
    timestamp: str | int,
    body: bytes | str,
    header: str | None,
    *,
    max_age_s: float | None = MAX_AGE_S,
    now: float | None = None,
) -> bool:
    """True if ``header`` signs ``body`` at ``timestamp`` with ``secret``, recently.

    ``timestamp`` and ``header`` are the request's ``X-Zerto-Rewind-Timestamp``
    and ``X-Zerto-Rewind-Signature``; ``body`` is the raw body, as received.
    A timestamp further than ``max_age_s`` from ``now`` is refused (a replayed
    delivery); ``max_age_s=None`` checks the signature only.
    """
    if not header or not secret:
        return False
    try:
        stamp = int(str(timestamp).strip())
    except ValueError:
        return False
    if max_age_s is not None:
        current = time.time() if now is None else now
        if abs(current - stamp) > max_age_s:
            return False
    raw = body.encode() if isinstance(body, str) else body
    expected = sign(secret, str(timestamp).strip(), raw)
    return hmac.compare_digest(expected.encode(), header.strip().encode())


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a bad port raises ValueError here, not at the first event
    except ValueError:
        msg = "is not a URL; give the webhook's https:// address"
        raise ConfigError(msg, key=_KEY) from None
    if parts.scheme not in ("https", "http") or not host:
        msg = "must be an https:// URL with a host (http:// only to a loopback address)"
        raise ConfigError(msg, key=_KEY)
    if parts.scheme == "http" and not is_loopback(host):
        msg = (
            f"http:// is accepted only to a loopback address, not {host}: notifications "
            "carry approval requests, so use https:// (or a relay on 127.0.0.1)"
        )
        raise ConfigError(msg, key=_KEY)


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def _clean(text: str) -> str:
    printable = "".join(ch if ch.isprintable() else "?" for ch in text)
    short = printable if len(printable) <= _NAME_MAX else printable[: _NAME_MAX - 1] + "…"
    return short.translate(_MARKUP)


def _on_vms(vms: list[str]) -> str:
    if not vms:
        return ""
    shown = ", ".join(_clean(v) for v in vms[:_VMS_SHOWN])
    more = f" and {len(vms) - _VMS_SHOWN} more" if len(vms) > _VMS_SHOWN else ""
    return f" on {shown}{more}"


def _hhmm(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M")
