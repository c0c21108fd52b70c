"""What the guard would decide for a call, and what it did decide on the MCP path.

:func:`preview_call` answers "what happens if the agent makes this call now?"
with no side effects: no tag is requested and nothing is written to the state
directory (its records are only peeked at) or to the decision log. It follows
the guard's table (docs/decisions.md) and decides each VPG with the tagger's own
rule functions (``tagging.plan_action``, ``covers``, ``planned_landing``, ...):
reuse a landed tag that covers the call, join a requested one, fail it once
overdue, or request a new one whose landing the VPG's cadence predicts.

:func:`confirm_call` runs the real guard for the MCP tool
``zerto_guard_before_mutate``: it tags and waits like the hook, but with
``consume=False``, so the hook's next mutating call on that VPG reuses the
checkpoint instead of tagging again. Every such decision is logged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..core.catalog import Classification, classify
from ..core.decision import (
    SEVERITY,
    Outcome,
    Row,
    ToolCall,
    fmt_time,
    pending_outcome,
)
from ..core.guard import budget_deadline, classified_decision, entity_type_names
from ..core.tagging import (
    FAIL_OVERDUE,
    JOIN_PENDING,
    REUSE_LANDED,
    exceeds_budget,
    known_cadence,
    landing_lag,
    look_for_landing,
    overdue_reason,
    plan_action,
    planned_landing,
    task_failure,
)
from ..errors import NotFound
from .protection import GuardTag, observe_cadence

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.decision import Decision, VpgOutcome
    from ..core.guard import Guard
    from ..core.state import GuardStateLike, VpgRecord
    from ..zvm.client import ZvmClient
    from ..zvm.models import VmRef

__all__ = [
    "CheckpointConfirmation",
    "GuardAnswer",
    "ToolCheck",
    "VpgPreview",
    "answer_of",
    "confirm_call",
    "preview_call",
]

# ---------------------------------------------------------------- preview models


class VpgPreview(BaseModel):
    """What the guard would do on one VPG."""

    vpg: str
    vpg_id: str
    vms: list[str]
    site_kind: str = Field(description="protected-site type: vcenter, hyperv, aws, azure, ...")
    status: str
    sub_status: str
    refusal: str | None = Field(description="why no tag can be made now, if so")
    cadence_s: float | None = Field(description="seconds between journal checkpoints")
    cadence_source: str | None
    action: str = Field(
        description=(
            "reuse_landed (an unused landed tag covers the call), join_pending (a requested tag "
            "is on its way), request_new, refuse (VPG cannot take a tag), or fail_overdue"
        )
    )
    existing_tag: GuardTag | None = Field(description="the guard's last tag on this VPG")
    expected_wait_s: float | None = Field(description="seconds until the tag should be listable")
    expected_at: str | None = None
    exceeds_budget: bool = Field(description="the wait is longer than the guard's budget")
    row: str = Field(description="the decision row this VPG leads to")
    zvm_site: str | None = Field(
        default=None, description="the estate's site whose ZVM would take the tag (several ZVMs)"
    )


class ToolCheck(BaseModel):
    """The guard's decision for a call, predicted without side effects."""

    tool_name: str
    classification: str = Field(description="read_only, mutating or unlisted (catalog)")
    catalog_entry: str | None = Field(description="the catalog name or pattern that matched")
    row: str = Field(
        description=(
            "read_only, confirmed, pending, failed, vm_unknown, vm_ambiguous, site_unknown, no_vm "
            "or unlisted; "
            "confirmed means the guard would confirm a checkpoint and allow the call"
        )
    )
    outcome: str = Field(description="none, context (allowed), deny, prompt or defer")
    vms: list[str]
    unknown_vms: list[str] = Field(description="VMs no VPG protects")
    vpgs: list[VpgPreview]
    would_request_tag: bool
    expected_wait_s: float | None = Field(description="the longest tag wait among the VPGs")
    budget_s: float = Field(description="how long the guard may wait before answering pending")
    exceeds_budget: bool
    summary: str


class CheckpointConfirmation(BaseModel):
    """The guard's result on one VPG."""

    vms: list[str]
    vpg: str
    vpg_id: str
    site_kind: str
    row: str = Field(description="confirmed, pending or failed")
    checkpoint_id: str | None = Field(description="the landed checkpoint, once confirmed")
    tag: str | None
    timestamp: str | None = Field(description="when the tagged checkpoint landed, ISO-8601 UTC")
    requested_at: str | None
    expected_at: str | None = Field(description="when the tag is expected in the journal")
    cadence_s: float | None
    new_tag: bool = Field(description="true if this call requested the tag")
    reason: str | None = Field(description="why it failed, when it did")
    rewind: str | None = Field(description="how to bring the VM back to this checkpoint")
    zvm_site: str | None = Field(
        default=None, description="the estate's site whose ZVM took the tag (several ZVMs)"
    )


class GuardAnswer(BaseModel):
    """The guard's decision for a call the model is about to make."""

    tool_name: str
    row: str = Field(description="confirmed, pending, failed, read_only, vm_unknown, no_vm, ...")
    outcome: str = Field(description="none, context (allowed), deny, prompt or defer")
    proceed: bool = Field(description="true when the mutating call may go ahead now")
    vms: list[str]
    checkpoints: list[CheckpointConfirmation]
    retry_after: str | None = Field(description="pending: call again after this time (UTC)")
    retry_in_s: float | None = Field(description="pending: seconds until retry_after")
    message: str = Field(description="the guard's context or reason, as the hook would give it")
    elapsed_ms: int


# ---------------------------------------------------------------- preview


def preview_call(
    settings: Settings,
    zvms: Guard | ZvmClient,
    state: GuardStateLike,
    tool_name: str,
    tool_input: object,
    *,
    deadline: float | None = None,
    now: float | None = None,
    verdict: Classification | None = None,
) -> ToolCheck:
    """What the guard would decide for this call now; reads only, tags and writes nothing.

    ``zvms``: the guard (the estate: each VPG previewed on the ZVM that would take its
    tag) or one ZVM's client. ``verdict``: the call's classification when the caller
    made it (``check``); classified here otherwise, once.
    """
    now = time.time() if now is None else now
    if verdict is None:
        verdict = classify(tool_name, tool_input, settings.catalog)
    budget = budget_deadline(settings, 0.0)
    check = ToolCheck(
        tool_name=tool_name,
        classification=verdict.kind,
        catalog_entry=verdict.entry,
        row=Row.READ_ONLY,
        outcome=Outcome.NONE,
        vms=list(verdict.vms),
        unknown_vms=[],
        vpgs=[],
        would_request_tag=False,
        expected_wait_s=None,
        budget_s=round(budget, 3),
        exceeds_budget=False,
        summary=f"{tool_name} is read-only: no checkpoint is needed, the call runs.",
    )
    call = ToolCall(tool_name, tool_input, started_at=now)
    settled = classified_decision(call, verdict, settings.catalog)  # the guard's own rows
    if settled is not None:
        if settled.row != Row.READ_ONLY:
            check.row, check.outcome, check.summary = settled.row, settled.outcome, settled.reason
        return check
    spec = verdict.spec
    fixed = spec.vpgs if spec is not None else ()
    return _mutating(settings, zvms, state, check, call, deadline, fixed=fixed)


@dataclass
class _Found:
    """The call's VMs as the ZVMs see them: each VPG with its ZVM, and what went wrong."""

    groups: dict[str, list[str]] = field(default_factory=dict)  # vpg id -> VMs
    where: dict[str, tuple[str | None, ZvmClient]] = field(default_factory=dict)  # vpg id ->
    ambiguous: list[str] = field(default_factory=list)
    denied: str | None = None  # a fail-closed reason (dark site, no ZVM can tag)
    denied_row: str = Row.FAILED  # Row.ERROR when the VM may be a dark site's
    silent: str = ""  # the dark sites, when some site answered for the call's names


def _find(
    zvms: Guard | ZvmClient,
    check: ToolCheck,
    deadline: float | None,
    fixed: tuple[str, ...],
) -> _Found:
    from ..core.guard import Guard

    found = _Found()
    estate = zvms.estate() if isinstance(zvms, Guard) else None
    if estate is None or len(estate.names) == 1:
        client = zvms if estate is None else estate.client(estate.first)
        assert not isinstance(client, Guard)
        for vm in check.vms:
            refs = client.find_vms(vm, deadline=deadline)  # exact, as the guard matches
            if not refs:
                check.unknown_vms.append(vm)
            _group(found, vm, refs)
            for ref in refs:
                found.where.setdefault(ref.vpg_id, (None, client))
        for vpg_name in fixed:  # VPGs the catalog names for a host-level tool
            try:
                vpg_id = client.find_vpg(vpg_name, deadline=deadline).vpg_id
            except NotFound:
                found.denied = (
                    f"the catalog says {check.tool_name} changes VPG {vpg_name!r}, which the ZVM "
                    "does not know: no checkpoint could be made, so the call would be denied."
                )
                return found
            found.groups.setdefault(vpg_id, [])
            found.where.setdefault(vpg_id, (None, client))
        return found
    assert isinstance(zvms, Guard)
    _find_in_estate(zvms, found, check, deadline, fixed)
    return found


def _group(found: _Found, vm: str, refs: list[VmRef]) -> None:
    if len({r.vm_id for r in refs}) > 1:
        found.ambiguous.append(vm)
    for vpg_id in sorted({r.vpg_id for r in refs}):
        found.groups.setdefault(vpg_id, []).append(vm)


def _find_in_estate(
    guard: Guard, found: _Found, check: ToolCheck, deadline: float | None, fixed: tuple[str, ...]
) -> None:
    """As the guard resolves a call: every ZVM at once, each VPG on the ZVM that tags it."""
    from ..core.sites import dark_reason

    sites, estate = guard.sites(), guard.estate()
    until = time.monotonic() + 60.0 if deadline is None else deadline
    lookup = sites.find(tuple(check.vms), until)

    dark = "; ".join(dark_reason(s, estate.url(s), why) for s, why in lookup.failed.items())
    problems: list[str] = []
    silent = dict(lookup.failed)
    for vm in check.vms:
        vpgs = lookup.vpgs[vm]
        if not vpgs and lookup.failed:
            found.denied = (
                f"no ZVM that answered knows VM {vm!r}, and {dark}: it may be that site's VM, so "
                "the call would be denied (not a prompt). Check the site with "
                "`zerto-rewind doctor`, then retry."
            )
            found.denied_row = Row.ERROR
            return
        refs = []
        for vpg in vpgs.values():
            site, problem = sites.tag_site(vpg, lookup.failed)
            if site is None:
                problems.append(problem)
                continue
            ref = vpg.rows.get(vm) or next(iter(vpg.rows.values()))
            refs.append(ref)
            found.where.setdefault(ref.vpg_id, (site, estate.client(site)))
        if not vpgs:
            check.unknown_vms.append(vm)  # every ZVM answered: unknown to Zerto
        _group(found, vm, refs)
    for vpg_name in fixed:
        fixed_vpg, failed = sites.find_vpg(vpg_name, until)
        silent.update(failed)
        if fixed_vpg is None:
            words = "; ".join(dark_reason(s, estate.url(s), w) for s, w in failed.items())
            found.denied = (
                f"the catalog says {check.tool_name} changes VPG {vpg_name!r}, which no ZVM that "
                f"answered knows{f' ({words})' if words else ''}: no checkpoint could be made, so "
                "the call would be denied."
            )
            return
        site, problem = sites.tag_site(fixed_vpg, failed)
        if site is None:
            problems.append(problem)
            continue
        found.groups.setdefault(fixed_vpg.vpg_id, [])
        found.where.setdefault(fixed_vpg.vpg_id, (site, estate.client(site)))
    if problems:
        found.denied = "no checkpoint could be made, so the call would be denied: "
        found.denied += "; ".join(problems)
    elif silent:  # as the guard: a dark site may hold a twin of a name others answered for
        found.silent = "; ".join(dark_reason(s, estate.url(s), w) for s, w in silent.items())


def _mutating(
    settings: Settings,
    zvms: Guard | ZvmClient,
    state: GuardStateLike,
    check: ToolCheck,
    call: ToolCall,
    deadline: float | None,
    *,
    fixed: tuple[str, ...] = (),
) -> ToolCheck:
    found = _find(zvms, check, deadline, fixed)
    if found.denied is not None:
        check.row, check.outcome, check.summary = found.denied_row, Outcome.DENY, found.denied
        return check
    ambiguous = found.ambiguous
    if ambiguous and not check.unknown_vms:
        check.row, check.outcome = Row.VM_AMBIGUOUS, Outcome.PROMPT
        check.summary = (
            f"the ZVM lists several VMs named {', '.join(map(repr, ambiguous))}: the guard cannot "
            "tell which one the VM server would change, so the host would ask a human."
        )
        return check
    if found.silent and not check.unknown_vms:
        check.row, check.outcome = Row.SITE_UNKNOWN, Outcome.PROMPT
        check.summary = (
            f"{found.silent}: that site may have a VM of the same name, so the guard cannot "
            "tell which VM the server would change; no tag would be made and the host would "
            "ask a human."
        )
        return check
    if check.unknown_vms:
        check.row, check.outcome = Row.VM_UNKNOWN, Outcome.PROMPT
        check.summary = (
            f"no VPG protects {', '.join(check.unknown_vms)}: there would be nothing to rewind "
            "to, so the host would ask a human. An operator can check how the catalog reads "
            "the VM name from this tool's arguments."
        )
        return check
    names: dict[str, list[str] | None] = {}
    for vpg_id, vms in found.groups.items():
        site, client = found.where[vpg_id]
        url = client.settings.url
        if url not in names:
            names[url] = entity_type_names(client, state, deadline=deadline, remember=False)
        preview = _preview_vpg(
            settings, client, state, vpg_id, vms, names[url], check.budget_s, call, deadline
        )
        preview.zvm_site = site
        check.vpgs.append(preview)
    return _combine(settings, check)


def _preview_vpg(
    settings: Settings,
    client: ZvmClient,
    state: GuardStateLike,
    vpg_id: str,
    vms: list[str],
    names: list[str] | None,
    budget: float,
    call: ToolCall,
    deadline: float | None,
) -> VpgPreview:
    from ..zvm.models import site_kind, tag_refusal

    now = call.started_at
    vpg = client.get_vpg(vpg_id, deadline=deadline)
    kind = site_kind(vpg.protected_entity, names, settings.guard.site_types)
    record = state.peek_vpg(vpg_id)
    preview = VpgPreview(
        vpg=vpg.name,
        vpg_id=vpg.vpg_id,
        vms=vms,
        site_kind=kind,
        status=vpg.status_text,
        sub_status=vpg.sub_status_text,
        refusal=tag_refusal(vpg),
        cadence_s=None,
        cadence_source=None,
        action="refuse",
        existing_tag=GuardTag.of(record),
        expected_wait_s=None,
        exceeds_budget=False,
        row=Row.FAILED,
    )
    if preview.refusal:
        return preview
    cadence, source, listed = observe_cadence(
        settings, client, vpg, kind, now=now, deadline=deadline
    )
    known = known_cadence(record, vpg.name, settings.guard, now)
    if known is not None:
        cadence, source = known  # what the guard will plan with, not re-measured
    preview.cadence_s, preview.cadence_source = cadence, source
    untagged = [c.timestamp.timestamp() for c in listed if not c.tag]
    last = max([*untagged, record.last_checkpoint_at or 0.0]) or None
    _plan(preview, record, client, call, cadence, last, settings, budget, deadline)
    return preview


def _plan(
    preview: VpgPreview,
    record: VpgRecord,
    client: ZvmClient,
    call: ToolCall,
    cadence: float,
    last_checkpoint_at: float | None,
    settings: Settings,
    budget: float,
    deadline: float | None,
) -> None:
    """What ``Tagger.plan`` would do, by its own rules (``tagging.plan_action`` and the rest):
    reuse, join, fail an overdue tag, or request a new one. The record is never written."""
    now = call.started_at
    found, _listed = look_for_landing(client, record, now, deadline=deadline)
    if found is not None and record.tag is not None:  # the Tagger's refresh, on a copy
        landed = replace(record.tag)
        landed.mark_landed(found.cp_id, found.timestamp.timestamp())
        record = replace(record, tag=landed)
    preview.action = plan_action(record, call, now)
    tag = record.tag
    if preview.action == REUSE_LANDED:
        preview.row, preview.expected_wait_s = Row.CONFIRMED, 0.0
    elif preview.action == JOIN_PENDING and tag is not None:
        _expect(preview, tag.expected_at, budget, now)
        if preview.exceeds_budget and tag.task_id is not None:
            # The Tagger asks a joined tag's task when it will not wait for it.
            failure = task_failure(client.get_task(tag.task_id, deadline=deadline), tag.task_id)
            if failure:
                preview.row, preview.refusal = Row.FAILED, failure
    elif preview.action == FAIL_OVERDUE and tag is not None:
        preview.row = Row.FAILED
        preview.refusal = (
            f"{overdue_reason(tag)}; the guard would fail this call and the next one would "
            "request a new tag"
        )
    else:
        lag = landing_lag(record, settings.guard)
        expected, _overdue = planned_landing(now, last_checkpoint_at, cadence, lag, settings.guard)
        _expect(preview, expected, budget, now)


def _expect(preview: VpgPreview, expected_at: float, budget: float, now: float) -> None:
    preview.expected_wait_s = round(max(0.0, expected_at - now), 3)
    preview.expected_at = fmt_time(expected_at)
    preview.exceeds_budget = exceeds_budget(expected_at, now, budget)
    preview.row = Row.PENDING if preview.exceeds_budget else Row.CONFIRMED


def _combine(settings: Settings, check: ToolCheck) -> ToolCheck:
    worst = max(check.vpgs, key=lambda p: SEVERITY.get(p.row, 0)).row
    waits = [p.expected_wait_s for p in check.vpgs if p.expected_wait_s is not None]
    check.row = worst
    check.would_request_tag = any(p.action == "request_new" for p in check.vpgs)
    check.expected_wait_s = max(waits) if waits else None
    check.exceeds_budget = any(p.exceeds_budget for p in check.vpgs)
    lines = [
        f"VPG {p.vpg!r} ({p.site_kind}): {p.action.replace('_', ' ')}"
        + (f", ~{p.expected_wait_s:.0f} s" if p.expected_wait_s else "")
        + (f" — {p.refusal}" if p.refusal else "")
        for p in check.vpgs
    ]
    if worst == Row.CONFIRMED:
        check.outcome = Outcome.CONTEXT
        head = "the guard would confirm a checkpoint and allow the call"
    elif worst == Row.PENDING:
        check.outcome = pending_outcome(settings.guard.on_pending)
        head = (
            f"the tag would land after the guard's {check.budget_s:.0f} s budget: pending "
            f"({check.outcome}); call zerto_guard_before_mutate, then retry after it lands"
        )
    else:
        check.outcome = Outcome.DENY
        head = "the guard would deny the call: no checkpoint can be made"
    check.summary = f"{head}. " + "; ".join(lines) + "."
    return check


# ---------------------------------------------------------------- the real guard, MCP path


def confirm_call(guard: Guard, call: ToolCall, *, log_path: str) -> tuple[GuardAnswer, Decision]:
    """Run the guard's pipeline without consuming the checkpoint, and record the decision
    (core.record: a confirmation whose line cannot be written does not proceed)."""
    from ..core.pipeline import Table, decide
    from ..core.record import record

    decision = decide(call, [Table(guard, consume=False)], catalog=guard.settings.catalog)
    decision = record(decision, call, log_path)
    return answer_of(decision, now=time.time()), decision


def answer_of(decision: Decision, *, now: float) -> GuardAnswer:
    """The model-facing form of a decision."""
    retry_in = round(max(0.0, decision.retry_after - now), 3) if decision.retry_after else None
    return GuardAnswer(
        tool_name=decision.tool_name,
        row=decision.row,
        outcome=decision.outcome,
        proceed=decision.outcome in (Outcome.NONE, Outcome.CONTEXT),
        vms=list(decision.vms),
        checkpoints=[_confirmation(o) for o in decision.vpgs],
        retry_after=fmt_time(decision.retry_after) if decision.retry_after else None,
        retry_in_s=retry_in,
        message=decision.context or decision.reason,
        elapsed_ms=decision.elapsed_ms,
    )


def _confirmation(o: VpgOutcome) -> CheckpointConfirmation:
    rewind = None
    if o.checkpoint_id and o.row == Row.CONFIRMED:
        rewind = (
            f"zerto_recovery_plan(vm={o.vms[0]!r}, checkpoint={o.checkpoint_id!r}) lists the ways "
            f"back; `zerto-rewind checkpoints {o.vms[0]} --tagged` shows the tags"
        )
    return CheckpointConfirmation(
        vms=list(o.vms),
        vpg=o.vpg_name,
        vpg_id=o.vpg_id,
        site_kind=o.site_kind,
        row=o.row,
        checkpoint_id=o.checkpoint_id,
        tag=o.tag,
        timestamp=fmt_time(o.landed_at) if o.landed_at else None,
        requested_at=fmt_time(o.requested_at) if o.requested_at else None,
        expected_at=fmt_time(o.expected_at) if o.expected_at else None,
        cadence_s=o.cadence_s,
        new_tag=o.new_tag,
        reason=o.reason or None,
        rewind=rewind,
        zvm_site=o.site or None,
    )
