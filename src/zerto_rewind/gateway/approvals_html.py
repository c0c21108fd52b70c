"""The approvals page's request cards: the whole call, escaped twice over.

Every value that came from the agent's call is first made visible
(:func:`~zerto_rewind.core.approval_view.visible`: control, bidi and zero-width
characters become ``\\x1b``, ``<U+202E>``), then HTML-escaped, so the browser
neither runs nor reorders it. A long value is shown as head … tail with the
whole value one click away (``<details>``: no script needed). The rendering
rules themselves are ``core.approval_view``; this module only lays them out.
"""

from __future__ import annotations

import contextvars
import html
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from ..core.approval_view import (
    ArgLine,
    confusable_note,
    differences,
    if_approved,
    request_lines,
    short_digest,
    shorten,
    timing,
    visible,
)
from ..core.approvals import APPROVED, DENIED, EXPIRED, PENDING, USED, ApprovalRequest
from ..core.decision import fmt_time

__all__ = [
    "BASE",
    "card",
    "differing",
    "esc",
    "recent_table",
    "row_phrase",
    "url",
    "when",
]

_ROWS = {
    "vm_unknown": "VM unknown to Zerto",
    "vm_ambiguous": "several VMs of that name",
    "vm_identity": "the VM server means another VM",
    "site_unknown": "a ZVM site did not answer",
    "no_vm": "no VM in the arguments",
    "host_path": "it touches files on the VM server's host",
    "unlisted": "tool not in the catalog",
    "failed": "no checkpoint can be made now",
    "pending": "no checkpoint can be made now",
}
_STATES = {
    APPROVED: "approved (not yet used)",
    USED: "approved and used",
    DENIED: "denied",
    EXPIRED: "expired",
    PENDING: "waiting",
}


def esc(value: Any) -> str:
    """A value from the call, as the page shows it: visible escapes, then HTML-escaped."""
    return html.escape(visible("" if value is None else str(value)), quote=True)


def _h(text: str) -> str:
    """Text already made visible (argument lines, timings): HTML-escaped only."""
    return html.escape(text, quote=True)


def row_phrase(row: str) -> str:
    """Why there is no rewind point, as a short phrase."""
    return _ROWS.get(row, row)


# Where the app is mounted (ASGI ``root_path``: a proxy's prefix, a Mount); "" at the root.
BASE: contextvars.ContextVar[str] = contextvars.ContextVar("approvals_base", default="")


def url(path: str) -> str:
    """A local path (``/login``) as the browser must ask for it, under the app's prefix."""
    return BASE.get() + path


def request_path(request_id: str) -> str:
    """The app-local path of one request's page (prefix with :func:`url` for a link)."""
    return f"/requests/{quote(request_id, safe='')}"


def _relative(epoch: float, now: float) -> str:
    delta = epoch - now
    span = abs(delta)
    if span < 60:
        text = f"{int(span)} s"
    elif span < 3600:
        text = f"{int(span // 60)} min"
    else:
        text = f"{span / 3600:.1f} h"
    return f"in {text}" if delta > 0 else f"{text} ago"


def when(epoch: float | None, now: float, *, exact: bool = False) -> str:
    """A time as "3 min ago" that the page's script keeps current; the exact one on hover.

    ``exact``: the exact UTC time shown too, after the relative one.
    """
    if epoch is None:
        return "—"
    iso = fmt_time(epoch)
    shown = (
        f'<time datetime="{_h(iso)}" data-ts="{epoch:.3f}" title="{_h(iso)}">'
        f"{_h(_relative(epoch, now))}</time>"
    )
    if exact:
        shown += f' <span class="muted">({_h(iso[:19].replace("T", " "))} UTC)</span>'
    return shown


def differing(requests: Sequence[ApprovalRequest]) -> dict[str, list[str]]:
    """Request id -> argument paths that differ from other pending requests of its tool."""
    by_tool: dict[str, dict[str, list[ArgLine]]] = {}
    for request in requests:
        by_tool.setdefault(request.tool, {})[request.id] = request_lines(request)
    return {rid: paths for views in by_tool.values() for rid, paths in differences(views).items()}


def card(
    request: ApprovalRequest, csrf: str, now: float, back: str, differs: Sequence[str] = ()
) -> str:
    """One request: everything a person needs in order to decide, and the two buttons."""
    rid, pending = request.id, request.state == PENDING
    lines = request_lines(request)
    vms = ", ".join(request.vms) or "(none named)"
    facts = _facts(request, now)
    if pending:
        facts += f"<dt>If approved</dt><dd class=if-approved>{_h(if_approved(request, lines))}</dd>"
    return (
        f'<article class="request{"" if pending else " decided"}" id="req-{_h(rid)}" '
        f'data-request="{_h(rid)}" data-state="{_h(request.state)}" '
        f'data-digest="{_h(short_digest(request.args_digest))}">'
        f'<h3><a class="id" href="{_h(url(request_path(rid)))}">{_h(rid)}</a>'
        f"<code>{esc(request.tool)}</code> on <b>{esc(vms)}</b></h3>"
        f"{_vm_warnings(request.vms)}"
        f'<p class="why"><b>No rewind point: {esc(row_phrase(request.row))}.</b> '
        f"{esc(request.why)}</p>"
        f'<dl class="facts">{facts}</dl>'
        f"{_arguments(request, lines, differs)}"
        f"{_buttons(request, csrf, back) if pending else _decision(request, now)}</article>"
    )


def _facts(request: ApprovalRequest, now: float) -> str:
    vpgs = (
        "<ul>" + "".join(f"<li>{esc(status)}</li>" for status in request.vpg_status) + "</ul>"
        if request.vpg_status
        else '<span class="muted">none known</span>'
    )
    who = [f'<span class="mono">{esc(request.principal)}</span>']
    if request.host:
        who.append(f'host <span class="mono">{esc(request.host)}</span>')
    if request.session:
        who.append(f'session <span class="mono">{esc(request.session)}</span>')
    rows = [
        f'<dt>VM(s)</dt><dd class="vms">{esc(", ".join(request.vms) or "(none named)")}</dd>',
        f"<dt>VPGs</dt><dd>{vpgs}</dd>",
        f"<dt>Requested by</dt><dd>{' · '.join(who)}</dd>",
        f'<dt>Digest</dt><dd class="mono digest">{_h(short_digest(request.args_digest))}'
        ' <span class="muted">(sha256 of the arguments)</span></dd>',
    ]
    rows += [
        f'<dt>{_h(label.capitalize())}</dt><dd class="timing">{_h(words)} '
        f"{when(at, now, exact=True) if at else ''}</dd>"
        for label, words, at in timing(request, now)
    ]
    return "".join(rows)


def _vm_warnings(vms: Sequence[str]) -> str:
    notes = [(vm, confusable_note(vm)) for vm in vms]
    return "".join(
        f'<p class="warning">VM {esc(vm)}: {_h(note)}.</p>' for vm, note in notes if note
    )


def _arguments(request: ApprovalRequest, lines: Sequence[ArgLine], differs: Sequence[str]) -> str:
    rows = "".join(_argument(line, line.path in differs) for line in lines) or (
        '<tr><td colspan="2" class="muted">no arguments</td></tr>'
    )
    note = ""
    if differs:
        shown = ", ".join(differs)
        note = (
            '<p class="differs">The most similar other pending '
            f"<code>{esc(request.tool)}</code> request differs from this one in: "
            f"<code>{_h(shown)}</code>.</p>"
        )
    return (
        f'{note}<table class="args"><caption>Tool <code>{esc(request.tool)}</code>, every '
        "argument as sent (control characters shown as escapes; secrets masked)</caption>"
        f"{rows}</table>"
    )


def _argument(line: ArgLine, differs: bool) -> str:
    if line.secret:
        value = f'<span class="secret">{_h(line.value)} (masked: it looks like a secret)</span>'
    else:
        short = shorten(line.value)
        value = _h(short)
        if short != line.value:
            value += (
                f'<details class="whole"><summary>Show the whole value ({line.length:,} '
                f"characters)</summary><pre>{_h(line.value)}</pre></details>"
            )
    if line.resolved is not None:
        value += f'<span class="resolved">resolves to {_h(line.resolved)}</span>'
    css = ' class="differs"' if differs else ""
    return (
        f'<tr{css} data-path="{_h(line.path)}"><th>{_h(line.path)}</th>'
        f'<td class="mono value">{value}</td></tr>'
    )


def _buttons(request: ApprovalRequest, csrf: str, back: str) -> str:
    rid = _h(request.id)
    hidden = (
        f'<input type="hidden" name="csrf" value="{_h(csrf)}">'
        f'<input type="hidden" name="next" value="{_h(back)}">'
    )
    path = _h(url(request_path(request.id)))
    return (
        '<div class="actions">'
        f'<form method="post" action="{path}/approve">{hidden}'
        f'<button type="submit" class="approve" data-request="{rid}">Approve</button>'
        "</form>"
        f'<form method="post" action="{path}/deny">{hidden}'
        f'<input type="text" name="note" maxlength="500" data-request="{rid}" '
        'placeholder="Reason (optional)" aria-label="Reason for denying">'
        f'<button type="submit" class="deny" data-request="{rid}">Deny</button>'
        "</form></div>"
    )


def _decision(request: ApprovalRequest, now: float) -> str:
    decided = (
        f', decided by <span class="mono">{esc(request.decided_by)}</span>'
        if request.decided_by
        else ""
    )
    note = f" Reason: {esc(request.note)}" if request.note else ""
    return (
        f'<p class="decision">This request is <span class="state-{_h(request.state)}">'
        f"{_h(_STATES.get(request.state, request.state))}</span>{decided}, "
        f"{when(request.used_at or request.decided_at or request.expires, now)}.{note}</p>"
    )


def recent_table(recent: list[ApprovalRequest], now: float) -> str:
    if not recent:
        return '<p class="empty">No decisions yet.</p>'
    rows = []
    for request in recent:
        at = request.used_at if request.state == USED else None
        at = at or request.decided_at or request.expires
        rows.append(
            f'<tr data-request="{_h(request.id)}">'
            f'<td><a class="mono" href="{_h(url(request_path(request.id)))}">'
            f"{_h(request.id)}</a></td>"
            f"<td><code>{esc(request.tool)}</code></td><td>{esc(', '.join(request.vms))}</td>"
            f'<td class="state-{_h(request.state)}">'
            f"{_h(_STATES.get(request.state, request.state))}</td>"
            f'<td class="mono">{esc(request.decided_by or "—")}</td>'
            f"<td>{when(at, now)}</td><td>{esc(request.note or '')}</td></tr>"
        )
    return (
        '<table class="recent"><thead><tr><th>Request</th><th>Tool</th><th>VM(s)</th>'
        "<th>State</th><th>Decided by</th><th>When</th><th>Note</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
