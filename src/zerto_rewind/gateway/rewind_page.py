"""The approvals page's rewind: a session's rewind plan, the form that runs it, its progress.

The plan is the one ``zerto-rewind rewind --session ID --dry-run`` prints, shown in
full: per VM the rewind point, whether the journal still holds it, the Zerto
operation, what a failover would also move, what it would undo that the session
did not do, why it cannot run now; what cannot be rewound; the facts its id covers.
Below it, one form starts it (per-VM restore, ``test``, or ``failover`` with each
VPG's name typed), carrying the plan id and the page's CSRF token.

The run's page shows per VM (or VPG) the ZVM task's phase and percent, then the
CLI's report: per VM done, failed or skipped, what the VM is now, and why; and
a resume when a VM is not done. The page's script polls ``/api/rewinds/<id>`` and
redraws; nothing here is inline script or style.

Every value from the log and the ZVM (VM, VPG, tool, session names: the agent
chooses some of them) goes through :func:`~.approvals_html.esc`: control, bidi and
zero-width characters become visible escapes, then HTML is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from ..core.decision import fmt_time
from ..recovery.rewind_build import LoggedChange, RewindPlan, VmRewind
from .approvals_auth import Session
from .approvals_html import esc as _e
from .approvals_html import url as _url
from .approvals_pages import document, flash
from .rewind_runs import PageRun, Step
from .sessions_page import session_path, session_plan_path

__all__ = [
    "plan_page",
    "resume_form",
    "rewind_path",
    "run_json",
    "run_page",
]

# Earlier runs of a plan, as rewind_store.load_run keeps them: mode -> VM -> state, why.
Earlier = Mapping[str, Mapping[str, Mapping[str, str]]]

_MODES = (
    ("restore", "Journal VM restore of each VM, then commit (the default)"),
    ("test", "Failover test of each VPG from the same checkpoints: look before committing"),
    ("failover", "Live failover of each whole VPG, committed with reverse protection"),
)
_JOURNAL = {True: "in the journal", False: "GONE from the journal", None: "not checked"}


def rewind_path(plan_id: str) -> str:
    """The app-local path of a plan's run."""
    return f"/rewinds/{quote(plan_id, safe='')}"


# --------------------------------------------------------------------------- the plan


def plan_page(session: Session, plan: RewindPlan, earlier: Earlier, run: PageRun | None) -> str:
    """``/rewind/session/<id>``: the whole plan, then the form that runs it."""
    scope = ", ".join(f"{k} {v}" for k, v in plan.scope.items())
    vms = "".join(_vm_section(v) for v in plan.vms) or (
        '<p class="empty">No VM to put back: the session changed none with a rewind point.</p>'
    )
    body = (
        f"{flash(session)}"
        f'<h2>Rewind plan <span class="mono" id="plan-id">{_e(plan.plan_id)}</span></h2>'
        f'<p class="muted">For {_e(scope)}; built {_e(plan.created_at)}. Nothing has been '
        "changed. The plan is built again when it runs: if anything moved since, it is "
        "refused, naming what moved.</p>"
        f'<p class="note">{_e(plan.note)}</p>'
        f'<div class="plan-vms">{vms}</div>'
        f"{_cannot_rewind(plan.cannot_rewind)}{_facts(plan.facts)}"
        f"{_earlier(plan, earlier, run, session.csrf)}"
        f"{_start_form(plan, session.csrf, run)}"
        f"{_back(plan)}"
    )
    return document(f"Rewind plan {plan.plan_id} — zerto-rewind", "rewind-plan", body, who=session)


def _vm_section(v: VmRewind) -> str:
    tag = f" tagged {v.checkpoint_tag}" if v.checkpoint_tag else ""
    when = f" at {v.checkpoint_time}" if v.checkpoint_time else ""
    rows = [
        ("Rewind point", f"checkpoint {v.checkpoint_id}{tag}{when}, {_JOURNAL[v.in_journal]}"),
        ("First change", f"{v.first_change.time} {v.first_change.tool} ({v.changes} in all)"),
        ("Operation", v.operation),
        ("Zerto API", ", ".join(v.zerto_api)),
        ("A failover would also move", ", ".join(v.failover_touches) or "no other VM"),
    ]
    rows += [("Also undoes", _change(c)) for c in v.also_undoes]
    rows += [("Also undoes whatever came after", f"checkpoint {cp}") for cp in v.later_checkpoints]
    facts = "".join(f"<dt>{_e(k)}</dt><dd>{_e(text)}</dd>" for k, text in rows)
    blocked = f'<p class="flash err">Cannot run: {_e(v.blocked)}</p>' if v.blocked else ""
    return (
        f'<article class="request vm-rewind" data-vm="{_e(v.vm)}">'
        f"<h3><b>{_e(v.vm)}</b> in VPG <b>{_e(v.vpg or '—')}</b></h3>"
        f'<dl class="facts">{facts}</dl>{blocked}</article>'
    )


def _change(c: LoggedChange) -> str:
    vms = ", ".join(c.vms) or "no VM"
    who = f" by session {c.session_id}" if c.session_id else " outside any session"
    approved = f", approved by {c.approver}" if c.approver else ""
    why = f": {c.why}" if c.why else ""
    return f"{c.time} {c.tool} on {vms}{who} ({c.decision}{approved}){why}"


def _cannot_rewind(items: list[LoggedChange]) -> str:
    if not items:
        return ""
    rows = "".join(f"<li>{_e(_change(c))}</li>" for c in items)
    return f'<h3>Cannot be rewound</h3><ul class="cannot-rewind">{rows}</ul>'


def _facts(facts: Mapping[str, str]) -> str:
    rows = "".join(
        f'<tr><th>{_e(k)}</th><td class="mono">{_e(v)}</td></tr>' for k, v in sorted(facts.items())
    )
    return (
        '<details class="whole"><summary>What the plan id covers (checked again before it '
        f'runs)</summary><table class="args">{rows}</table></details>'
    )


def _vpgs(plan: RewindPlan) -> list[str]:
    return sorted({v.vpg for v in plan.vms if v.vpg})


def _hidden(csrf: str, plan_id: str) -> str:
    return (
        f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
        f'<input type="hidden" name="plan" value="{_e(plan_id)}">'
    )


def _confirm_boxes(plan: RewindPlan) -> str:
    """One box per VPG: a failover runs only for the VPGs whose name a person typed."""
    boxes = []
    for n, vpg in enumerate(_vpgs(plan)):
        moved = sorted({m for v in plan.vms if v.vpg == vpg for m in (v.vm, *v.failover_touches)})
        boxes.append(
            f'<label for="confirm-{n}">For a failover: a live failover of VPG <b>{_e(vpg)}</b> '
            f"moves every VM in it ({_e(', '.join(moved))}); type its name to fail it over"
            f'</label><input type="text" id="confirm-{n}" name="confirm-{n}" autocomplete="off">'
        )
    return "".join(boxes)


def _start_form(plan: RewindPlan, csrf: str, run: PageRun | None) -> str:
    if run is not None and run.active:
        link = _e(_url(rewind_path(plan.plan_id)))
        return f'<p class="flash ok">This plan is running: <a href="{link}">its progress</a>.</p>'
    if not plan.vms:
        return ""
    modes = "".join(
        f'<label class="mode"><input type="radio" name="mode" value="{m}"'
        f"{' checked' if m == 'restore' else ''}> {_e(text)}</label>"
        for m, text in _MODES
    )
    return (
        f'<form class="rewind-start" method="post" action="{_e(_url("/rewind/start"))}">'
        f"<h3>Run this plan</h3>{_hidden(csrf, plan.plan_id)}{modes}{_confirm_boxes(plan)}"
        '<button type="submit" class="approve" id="rewind-start">Run plan '
        f"{_e(plan.plan_id)}</button></form>"
    )


def _earlier(
    plan: RewindPlan, earlier: Earlier, run: PageRun | None, csrf: str, *, tables: bool = True
) -> str:
    """An earlier run's states (``tables``: unless the run's own report shows them), and a
    resume for its VMs not done."""
    out = []
    for mode, states in sorted(earlier.items()):
        if tables:
            out.append(_states_table(mode, states))
        if (run is None or not run.active) and _unfinished(states):
            out.append(resume_form(plan, mode, csrf))
    return "".join(out)


def _states_table(mode: str, states: Mapping[str, Mapping[str, str]]) -> str:
    rows = "".join(
        f"<tr><td>{_e(vm)}</td><td>{_e(s.get('state'))}</td><td>{_e(s.get('why'))}</td></tr>"
        for vm, s in sorted(states.items())
    )
    return (
        f'<h3>An earlier run of this plan ({_e(mode)})</h3><table class="recent report">'
        f"<thead><tr><th>VM</th><th>State</th><th>Why</th></tr></thead><tbody>{rows}"
        "</tbody></table>"
    )


def _unfinished(states: Mapping[str, Mapping[str, str]]) -> bool:
    return any(s.get("state") != "done" for s in states.values())


def resume_form(plan: RewindPlan, mode: str, csrf: str) -> str:
    """Carry on with the VMs not done (the CLI's ``rewind --resume``)."""
    confirm = _confirm_boxes(plan) if mode == "failover" else ""
    return (
        f'<form class="rewind-resume" method="post" action="{_e(_url("/rewind/start"))}">'
        f'{_hidden(csrf, plan.plan_id)}<input type="hidden" name="mode" value="{_e(mode)}">'
        f'<input type="hidden" name="resume" value="1">{confirm}'
        f'<button type="submit" class="approve" id="rewind-resume-{_e(mode)}">Resume: carry '
        f"on with the VMs not done ({_e(mode)})</button></form>"
    )


def _back(plan: RewindPlan) -> str:
    session_id = plan.scope.get("session_id")
    if session_id is None:
        return f'<p><a href="{_e(_url("/sessions"))}">All sessions</a></p>'
    return f'<p><a href="{_e(_url(session_path(session_id)))}">Back to the session</a></p>'


# --------------------------------------------------------------------------- the run


_STATES = {
    "checking": "Checking the plan again (the log, the journals, the VPGs)…",
    "running": "Running.",
    "finished": "Finished.",
    "refused": "Refused: nothing was run.",
    "stopped": "Stopped.",
}


def run_page(
    session: Session, plan_id: str, run: PageRun | None, plan: RewindPlan | None, earlier: Earlier
) -> str:
    """``/rewinds/<id>``: the run's progress, then its report; a resume where a VM is not done."""
    parts = [
        flash(session),
        f'<h2>Rewind <span class="mono">{_e(plan_id)}</span></h2>',
        _live_section(plan_id, run),
        '<p id="status"></p>',
    ]
    if plan is not None:
        shown = run is not None and run.report is not None  # the report says the same
        parts.append(_earlier(plan, earlier, run, session.csrf, tables=not shown))
        session_id = plan.scope.get("session_id")
        if run is not None and run.state == "refused" and session_id is not None:
            link = _e(_url(session_plan_path(session_id)))
            parts.append(f'<p><a href="{link}" id="plan-again">Build the plan again</a></p>')
        parts.append(_back(plan))
    return document(f"Rewind {plan_id} — zerto-rewind", "rewind-run", "".join(parts), who=session)


def _live_section(plan_id: str, run: PageRun | None) -> str:
    """The part the page's script redraws while the run is active."""
    if run is None:
        return (
            f'<section id="live" data-version="none" data-plan="{_e(plan_id)}" data-active="0">'
            '<p class="empty">No run of this plan since the gateway started.</p></section>'
        )
    active = "1" if run.active else "0"
    return (
        f'<section id="live" data-version="{_e(run.version)}" data-plan="{_e(plan_id)}" '
        f'data-active="{active}">{_live(run)}</section>'
    )


def _live(run: PageRun) -> str:
    who = (
        f'<p class="muted">Mode {_e(run.mode)}{" (resume)" if run.resume else ""}, started by '
        f'<span class="mono">{_e(run.approver)}</span> at {_e(fmt_time(run.started_at))}.</p>'
    )
    state = f'<p class="run-state state-{_e(run.state)}" id="run-state">{_e(_STATES[run.state])}'
    if run.error:
        state += f' <span class="why">{_e(run.error)}</span>'
    state += "</p>"
    return f"{who}{state}{_steps(run.steps.values())}{_report(run)}"


def _steps(steps: Iterable[Step]) -> str:
    rows = "".join(
        f'<tr data-label="{_e(s.label)}"><td>{_e(s.label)}</td><td>{_e(s.phase)}</td>'
        f'<td><progress max="100" value="{int(s.percent)}">{int(s.percent)}%</progress> '
        f"{int(s.percent)}%</td></tr>"
        for s in steps
    )
    if not rows:
        return ""
    return (
        '<table class="recent progress-table"><thead><tr><th>VM or VPG</th><th>Phase</th>'
        f"<th>Progress (the ZVM's task)</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _report(run: PageRun) -> str:
    if run.report is None:
        return ""
    rows = "".join(
        f'<tr class="state-{_e(r.state)}" data-vm="{_e(r.vm)}"><td>{_e(r.vm)}</td>'
        f"<td>{_e(r.state)}</td><td>{_e(r.vm_state)}</td><td>{_e(r.why)}</td></tr>"
        for r in run.report.results
    )
    verdict = "Every VM is done." if run.report.ok else "Not every VM is done: see why, and resume."
    return (
        f'<h3>Report</h3><p id="run-verdict">{verdict}</p><table class="recent report">'
        "<thead><tr><th>VM</th><th>Result</th><th>The VM now</th><th>Why</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def run_json(run: PageRun) -> dict[str, Any]:
    """The run as the page's script polls it (``/api/rewinds/<id>``)."""
    shown = {name: getattr(run, name) for name in ("plan_id", "mode", "approver", "state")}
    shown.update(active=run.active, version=run.version, error=run.error)
    shown["progress"] = [
        {"label": s.label, "phase": s.phase, "percent": s.percent} for s in run.steps.values()
    ]
    shown["report"] = run.report.to_json() if run.report is not None else None
    return shown
