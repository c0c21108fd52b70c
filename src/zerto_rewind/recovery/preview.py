"""What the guard would decide for a call, and what it did decide on the MCP path.

:func:`preview_call` answers "what happens if the agent makes this call now?"
with no side effects: it asks the guard itself (``core.guard``), run by
:class:`~.preview_guard.PlanningGuard`, which plans and does not execute: no tag is
requested, nothing is written to the state (its records are only read) or to the
decision log. The row, the outcome and the reason are the guard's; the preview adds
what the tag rules would do on each VPG (reuse a landed tag, join a requested one,
fail it once overdue, or request a new one) and how long that would take.

:func:`confirm_call` runs the real guard for the MCP tool
``zerto_guard_before_mutate``: it tags and waits like the hook, but with
``consume=False``, so the hook's next mutating call on that VPG reuses the
checkpoint instead of tagging again. Every such decision is logged.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..core.catalog import Classification, classify
from ..core.decision import Outcome, Row, ToolCall, fmt_time
from ..core.guard import budget_deadline
from ..core.tag_rules import JOIN_PENDING, REQUEST_NEW, REUSE_LANDED, exceeds_budget
from .preview_guard import REFUSE, UNPLANNED, PlanningGuard, ReadOnlyState, Seen
from .protection import GuardTag

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.decision import Decision, VpgOutcome
    from ..core.guard import Guard
    from ..core.state import GuardStateLike
    from ..zvm.client import ZvmClient

__all__ = [
    "CheckpointConfirmation",
    "GuardAnswer",
    "ToolCheck",
    "VpgPreview",
    "answer_of",
    "confirm_call",
    "planned_decision",
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
            "is on its way), request_new, refuse (VPG cannot take a tag), fail_overdue, or "
            "unplanned (the guard stops at another VPG's refusal first)"
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
    now: float | None = None,
    verdict: Classification | None = None,
) -> ToolCheck:
    """What the guard would decide for this call now; reads only, tags and writes nothing.

    ``zvms``: the guard (the estate: each VPG previewed on the ZVM that would take its
    tag) or one ZVM's client. ``verdict``: the call's classification when the caller
    made it (``check``); classified here otherwise, once. A ZVM that cannot be asked
    raises: the preview cannot tell.
    """
    if verdict is None:
        verdict = classify(tool_name, tool_input, settings.catalog)
    planner = _planner(settings, zvms, state, now)
    call = ToolCall(tool_name, tool_input, started_at=planner.wall())
    decision = planner.plan(call, verdict)
    return _report(settings, state, call, verdict, decision, planner.seen)


def planned_decision(
    settings: Settings,
    zvms: Guard | ZvmClient,
    state: GuardStateLike,
    call: ToolCall,
    *,
    now: float | None = None,
) -> Decision:
    """The decision itself that :func:`preview_call` reports (what the guard would answer)."""
    verdict = classify(call.tool_name, call.tool_input, settings.catalog)
    return _planner(settings, zvms, state, now).plan(call, verdict)


def _planner(
    settings: Settings, zvms: Guard | ZvmClient, state: GuardStateLike, now: float | None
) -> PlanningGuard:
    from ..core.guard import Guard

    if isinstance(zvms, Guard):
        planner = PlanningGuard.beside(zvms, state)
    else:
        planner = PlanningGuard(settings, client=zvms, state=ReadOnlyState(state))
    if now is not None:
        planner.wall = lambda: now
    return planner


def _report(
    settings: Settings,
    state: GuardStateLike,
    call: ToolCall,
    verdict: Classification,
    decision: Decision,
    seen: Seen,
) -> ToolCheck:
    """The decision in the preview's words, each VPG with what the tag rules would do."""
    budget = budget_deadline(settings, 0.0)
    now = call.started_at
    vpgs = [_vpg_preview(o, seen, state, now, budget) for o in decision.vpgs]
    waits = [p.expected_wait_s for p in vpgs if p.expected_wait_s is not None]
    check = ToolCheck(
        tool_name=call.tool_name,
        classification=verdict.kind,
        catalog_entry=verdict.entry,
        unknown_vms=list(seen.unknown) if decision.row == Row.VM_UNKNOWN else [],
        row=decision.row,
        outcome=decision.outcome,
        vms=list(verdict.vms),
        vpgs=vpgs,
        would_request_tag=any(p.action == REQUEST_NEW for p in vpgs),
        expected_wait_s=max(waits) if waits else None,
        budget_s=round(budget, 3),
        exceeds_budget=any(p.exceeds_budget for p in vpgs),
        summary=decision.reason,
    )
    if decision.row == Row.READ_ONLY:
        check.summary = f"{call.tool_name} is read-only: no checkpoint is needed, the call runs."
    elif vpgs and decision.row in (Row.CONFIRMED, Row.PENDING, Row.FAILED):
        check.summary = _summary(check)
    return check


def _vpg_preview(
    outcome: VpgOutcome, seen: Seen, state: GuardStateLike, now: float, budget: float
) -> VpgPreview:
    """One VPG of the decision: the guard's row, and the tag the rules would reuse or wait on."""
    action = seen.actions.get(outcome.vpg_id)
    if action is None:
        action = REFUSE if outcome.row == Row.FAILED else UNPLANNED
    expected = outcome.expected_at if action in (JOIN_PENDING, REQUEST_NEW) else None
    late = expected is not None and exceeds_budget(expected, now, budget)
    wait = round(max(0.0, expected - now), 3) if expected is not None else None
    row = outcome.row
    if row == Row.PENDING and not late:
        row = Row.CONFIRMED  # lands within the budget; another VPG stopped the guard's wait
    vpg = seen.vpgs.get(outcome.vpg_id)
    return VpgPreview(
        vpg=outcome.vpg_name,
        vpg_id=outcome.vpg_id,
        vms=list(outcome.vms),
        site_kind=outcome.site_kind,
        status=vpg.status_text if vpg is not None else "",
        sub_status=vpg.sub_status_text if vpg is not None else "",
        refusal=outcome.reason or None,
        cadence_s=outcome.cadence_s,
        cadence_source=outcome.cadence_source,
        action=action,
        existing_tag=GuardTag.of(state.peek_vpg(outcome.vpg_id)),
        expected_wait_s=0.0 if action == REUSE_LANDED else wait,
        expected_at=fmt_time(expected) if expected is not None else None,
        exceeds_budget=late,
        row=row,
        zvm_site=outcome.site,
    )


def _summary(check: ToolCheck) -> str:
    lines = [
        f"VPG {p.vpg!r} ({p.site_kind}): {p.action.replace('_', ' ')}"
        + (f", ~{p.expected_wait_s:.0f} s" if p.expected_wait_s else "")
        + (f" — {p.refusal}" if p.refusal else "")
        for p in check.vpgs
    ]
    if check.row == Row.CONFIRMED:
        head = "the guard would confirm a checkpoint and allow the call"
    elif check.row == Row.PENDING:
        head = (
            f"the tag would land after the guard's {check.budget_s:.0f} s budget: pending "
            f"({check.outcome}); call zerto_guard_before_mutate, then retry after it lands"
        )
    else:
        head = "the guard would deny the call: no checkpoint can be made"
    return f"{head}. " + "; ".join(lines) + "."


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
