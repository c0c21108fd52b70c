"""The approvals page's sessions view: recent agent sessions, and one session as a picture.

One session is drawn as server-rendered inline SVG: a lane per VM, on one time
axis, with each call the session made (a change, or a call refused), the
checkpoint each change can be rewound to (when it landed), and later changes to
the same VMs by other sessions. Below the picture, the same timeline as a table.
Reading the log is :mod:`zerto_rewind.core.sessions`; this module only draws.

No script and no style attribute (the page's Content-Security-Policy forbids
inline ones): the SVG's look is classes of ``static/approvals.css``. Every value
from the log (VM, tool, session names: the agent chooses them) goes through
:func:`~.approvals_html.esc` (visible escapes, then HTML escaping); each mark's
full text is its SVG ``<title>``, which browsers show on hover.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from urllib.parse import quote

from ..core.sessions import Entry, Later, SessionSummary, Timeline
from .approvals_auth import Session
from .approvals_html import esc as _e
from .approvals_html import url as _url
from .approvals_pages import document, flash

__all__ = ["session_page", "session_path", "session_plan_path", "sessions_page", "timeline_svg"]

_WIDTH = 960
_LABEL = 200  # the lane names' column
_LANE = 44
_TOP = 34  # above the first lane: the time axis
_RIGHT = 24
_TICKS = 5
_LABEL_CHARS = 26
NO_VM = "(no VM named)"


def session_path(session_id: str) -> str:
    """The app-local path of one session's page."""
    return f"/sessions/{quote(session_id, safe='')}"


def session_plan_path(session_id: str) -> str:
    """The app-local path of a session's rewind plan (``rewind_page``)."""
    return f"/rewind/session/{quote(session_id, safe='')}"


def sessions_page(session: Session, found: list[SessionSummary], log_path: str) -> str:
    """``/sessions``: recent sessions, latest activity first."""
    if not found:
        rows = f'<p class="empty">No agent sessions in {_e(log_path)}.</p>'
    else:
        body = "".join(_summary_row(s) for s in found)
        rows = (
            '<table class="recent sessions"><thead><tr><th>Session</th><th>Principal</th>'
            "<th>Host</th><th>First change (UTC)</th><th>Last change</th><th>Changes</th>"
            f"<th>Refused</th><th>VMs</th></tr></thead><tbody>{body}</tbody></table>"
        )
    text = (
        f"{flash(session)}<h2>Agent sessions</h2>"
        '<p class="muted">What each agent session changed, from the decision log. '
        "Open one to see its changes and the checkpoints they can be rewound to.</p>"
        f"{rows}"
    )
    return document("Sessions — zerto-rewind", "sessions", text, who=session)


def _summary_row(s: SessionSummary) -> str:
    link = _e(_url(session_path(s.session_id)))
    return (
        f'<tr><td><a class="mono" href="{link}">{_e(s.session_id)}</a></td>'
        f'<td>{_e(s.principal)}</td><td>{_e(s.host)}</td><td class="when">{_e(_when(s.first))}</td>'
        f'<td class="when">{_e(_when(s.last))}</td><td>{s.changes}</td><td>{s.refused}</td>'
        f"<td>{_e(', '.join(s.vms))}</td></tr>"
    )


def session_page(session: Session, timeline: Timeline) -> str:
    """``/sessions/<id>``: the picture, then the table."""
    changes = timeline.changes
    text = (
        f'<h2>Session <span class="mono">{_e(timeline.session_id)}</span></h2>'
        f'<p class="muted">{len(changes)} change(s) by {_e(timeline.principal or "—")} '
        f"through {_e(timeline.host or '—')}; times in UTC.</p>"
        f'<figure class="timeline">{timeline_svg(timeline)}'
        "<figcaption>A lane per VM. ● a change, ✕ a call refused, ◆ the checkpoint a change "
        "can be rewound to, ▲ a later change by another session. Hover a mark for "
        "details.</figcaption></figure>"
        f"{_entries_table(timeline)}"
        f'<p><a href="{_e(_url(session_plan_path(timeline.session_id)))}" id="plan-rewind">'
        "Plan a rewind of this session</a> (approvers: the plan is shown in full before "
        "anything runs)</p>"
        f'<p><a href="{_e(_url("/sessions"))}">All sessions</a></p>'
    )
    title = f"Session {timeline.session_id} — zerto-rewind"
    return document(title, "session", text, who=session)


def _entries_table(timeline: Timeline) -> str:
    rows = []
    for entry in timeline.entries:
        later = "; ".join(
            f"{_when(o.time)} {o.session_id}: {o.tool} on {', '.join(o.vms)}" for o in entry.later
        )
        result = entry.result if entry.kind == "change" else entry.kind
        rows.append(
            f'<tr class="kind-{_e(entry.kind.replace(" ", "-"))}">'
            f'<td class="when">{_e(_when(entry.time))}</td><td><code>{_e(entry.tool)}</code></td>'
            f"<td>{_e(', '.join(entry.vms) or NO_VM)}</td><td>{_e(entry.decision)}</td>"
            f"<td>{_e(result)}</td><td>{_e(entry.rewind_point or '—')}</td>"
            f"<td>{_e(later or '—')}</td></tr>"
        )
    return (
        '<table class="recent timeline-table"><thead><tr><th>When</th><th>Tool</th>'
        "<th>VMs</th><th>Decision</th><th>Result</th><th>Rewind point</th>"
        f"<th>Later, by other sessions</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


# --------------------------------------------------------------------------- the picture


def _when(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "—"


def _epoch(value: object) -> float | None:
    """A log time as seconds; None if it is not one (a damaged or hand-made line)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _lanes(timeline: Timeline) -> list[str]:
    """One lane per VM, in the order the session first named it; one for calls naming none."""
    lanes: list[str] = []
    for entry in timeline.entries:
        for vm in entry.vms or (NO_VM,):
            if vm not in lanes:
                lanes.append(vm)
    return lanes


def _span(timeline: Timeline) -> tuple[float, float]:
    """The axis: from the first mark to the last (entries, checkpoints, later changes)."""
    times = []
    for entry in timeline.entries:
        times.append(_epoch(entry.time))
        times.append(_epoch((entry.checkpoint or {}).get("landed_at")))
        times.extend(_epoch(o.time) for o in entry.later)
    known = [t for t in times if t is not None]
    if not known:
        return 0.0, 1.0
    start, end = min(known), max(known)
    return (start, end) if end > start else (start - 30.0, end + 30.0)


class _Plot:
    """Where a time and a lane are on the picture."""

    def __init__(self, span: tuple[float, float], lanes: list[str]) -> None:
        self.start, self.end = span
        self.lanes = {vm: n for n, vm in enumerate(lanes)}
        self.height = _TOP + _LANE * len(lanes) + 8

    def x(self, when: float) -> float:
        inner = _WIDTH - _LABEL - _RIGHT
        return round(_LABEL + (when - self.start) / (self.end - self.start) * inner, 1)

    def y(self, vm: str) -> float:
        return _TOP + _LANE * self.lanes[vm] + _LANE / 2


def timeline_svg(timeline: Timeline) -> str:
    """The session as an SVG: lanes, the time axis, and a mark per call and checkpoint."""
    lanes = _lanes(timeline)
    plot = _Plot(_span(timeline), lanes)
    parts = [_axis(plot)]
    parts += [_lane(plot, vm) for vm in lanes]
    parts += [_marks(plot, entry) for entry in timeline.entries]
    others = {o.line: o for entry in timeline.entries for o in entry.later}
    parts += [_later(plot, other) for _, other in sorted(others.items())]
    label = f"Timeline of session {timeline.session_id}: {len(lanes)} VM lane(s)"
    return (
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {_WIDTH} {plot.height}" aria-label="{_e(label)}">'
        f"{''.join(parts)}</svg>"
    )


def _axis(plot: _Plot) -> str:
    ticks = []
    for n in range(_TICKS):
        when = plot.start + (plot.end - plot.start) * n / (_TICKS - 1)
        x = plot.x(when)
        moment = datetime.fromtimestamp(when, UTC)
        text = moment.strftime("%Y-%m-%d %H:%M:%S" if n == 0 else "%H:%M:%S")
        anchor = "start" if n == 0 else "end" if n == _TICKS - 1 else "middle"
        ticks.append(
            f'<line class="tick" x1="{x}" y1="{_TOP - 6}" x2="{x}" y2="{plot.height}"/>'
            f'<text class="tick-label" x="{x}" y="{_TOP - 12}" text-anchor="{anchor}">'
            f"{_e(text)}</text>"
        )
    return f'<g class="axis">{"".join(ticks)}</g>'


def _lane(plot: _Plot, vm: str) -> str:
    y = plot.y(vm)
    shown = vm if len(vm) <= _LABEL_CHARS else vm[: _LABEL_CHARS - 1] + "…"
    return (
        f'<g class="lane" data-vm="{_e(vm)}"><title>{_e(vm)}</title>'
        f'<line class="lane-line" x1="{_LABEL}" y1="{y}" x2="{_WIDTH - _RIGHT}" y2="{y}"/>'
        f'<text class="lane-label" x="8" y="{y + 4}">{_e(shown)}</text></g>'
    )


def _on_lanes(
    plot: _Plot, time: str, vms: Iterable[str], mark: Callable[[float, float], str]
) -> str:
    """``mark(x, y)`` at ``time`` on each of the ``vms``' lanes; nothing if it is not a time."""
    at = _epoch(time)
    if at is None:
        return ""
    x = plot.x(at)
    return "".join(mark(x, plot.y(vm)) for vm in vms)


def _marks(plot: _Plot, entry: Entry) -> str:
    """A call's marks on each of its lanes; a change's checkpoint and later changes too."""
    about = f"{_when(entry.time)} {entry.tool}: {entry.decision}"
    if entry.kind == "change":
        about += f"; result {entry.result}; {entry.rewind_point}"

    def mark(x: float, y: float) -> str:
        return _checkpoint(plot, entry, x, y) + _call_mark(entry, x, y, about)

    return _on_lanes(plot, entry.time, entry.vms or (NO_VM,), mark)


def _call_mark(entry: Entry, x: float, y: float, about: str) -> str:
    kind = entry.kind.replace(" ", "-")
    title = f"<title>{_e(about)}</title>"
    if entry.kind == "change":
        return f'<circle class="mark change" cx="{x}" cy="{y}" r="7">{title}</circle>'
    d = f"M{x - 6},{y - 6} L{x + 6},{y + 6} M{x - 6},{y + 6} L{x + 6},{y - 6}"
    return f'<path class="mark {_e(kind)}" d="{d}">{title}</path>'


def _checkpoint(plot: _Plot, entry: Entry, x: float, y: float) -> str:
    point = entry.checkpoint
    landed = _epoch(point.get("landed_at")) if point else None
    if point is None or landed is None or entry.kind != "change":
        return ""
    cx = plot.x(landed)
    d = f"M{cx},{y - 8} L{cx + 8},{y} L{cx},{y + 8} L{cx - 8},{y} Z"
    about = f"checkpoint {', '.join(point['checkpoint_ids'])} ({', '.join(point['tags'])}), "
    about += f"landed {_when(point.get('landed_at'))}"
    return (
        f'<line class="link" x1="{cx}" y1="{y}" x2="{x}" y2="{y}"/>'
        f'<path class="mark checkpoint" d="{d}"><title>{_e(about)}</title></path>'
    )


def _later(plot: _Plot, other: Later) -> str:
    """A later change by another session, on each of the session's lanes it touched."""
    about = f"{_when(other.time)} later, by session {other.session_id}: {other.tool}"

    def mark(x: float, y: float) -> str:
        d = f"M{x},{y - 8} L{x + 8},{y + 6} L{x - 8},{y + 6} Z"
        return f'<path class="mark other" d="{d}"><title>{_e(about)}</title></path>'

    return _on_lanes(plot, other.time, [vm for vm in other.vms if vm in plot.lanes], mark)
