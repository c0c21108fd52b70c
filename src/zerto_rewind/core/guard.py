"""The guard: turns a tool call into a decision of the table in docs/decisions.md.

| situation                         | row         | outcome                         |
|-----------------------------------|-------------|---------------------------------|
| tool in ``read_only_tools``       | read_only   | none                            |
| mutating, checkpoint landed       | confirmed   | context (VM, VPG, checkpoint)   |
| mutating, tag cannot be made      | failed      | deny                            |
| mutating, tag lands after budget  | pending     | ``guard.on_pending``            |
| mutating, VM unknown to Zerto     | vm_unknown  | prompt                          |
| mutating, Zerto has several VMs of that name | vm_ambiguous | prompt               |
| mutating, no VM in the arguments  | no_vm       | prompt                          |
| mutating, found while a site is dark | site_unknown | prompt                       |
| names a file on the VM server's host | host_path | prompt (``decision: deny``: deny) |
| unlisted tool                     | unlisted    | ``ZERTO_HOOK_UNKNOWN``          |
| config or ZVM error               | config_error / error | deny                   |

Several VMs in one call: every VPG involved is tagged; the most restrictive
row wins, and a landed tag is only counted as used when the call is allowed.

VM names match Zerto's exactly, as the VM server matches them (no case folding,
no stripping): ``Web-01`` or ``web-01`` + NBSP is another VM, unknown to Zerto.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config.settings import CatalogSettings, Settings
from ..errors import ConfigError, ZertoRewindError
from .catalog import MUTATING, READ_ONLY, Classification, classify
from .decision import (
    SEVERITY,
    Decision,
    Outcome,
    Row,
    ToolCall,
    VmIdentity,
    VpgOutcome,
    pending_outcome,
    shown_vm,
    unlisted_outcome,
)
from .guard_estate import GuardEstate, entity_type_names
from .guard_messages import (
    ambiguous_decision,
    checkpoint_context,
    deny_decision,
    error_reason,
    failed_reason,
    host_path_decision,
    identity_unverified,
    no_vm_decision,
    pending_reason,
)

if TYPE_CHECKING:
    from ..zvm.models import Vpg
    from .tagging import Tagger, TagPlan

__all__ = [
    "Guard",
    "budget_deadline",
    "classified_decision",
    "entity_type_names",
    "host_path_decision",
    "identity_unverified",
    "no_vm_decision",
]

# The guard answers this long before its budget runs out, so the answer (and
# its log line) is out before the hook's own watchdog has to step in.
_ANSWER_MARGIN_S = 1.0
_CONSUME_ATTEMPTS = 2


def classified_decision(
    call: ToolCall, verdict: Classification, catalog: CatalogSettings
) -> Decision | None:
    """The rows the classification alone decides, with no IO: read-only, unlisted, a host
    path, no VM. None for a mutating call whose VMs (or VPGs) the estate must be asked
    about."""
    if verdict.kind == READ_ONLY:
        return Decision(Row.READ_ONLY, Outcome.NONE, call.tool_name)
    if verdict.kind != MUTATING:
        reason = (
            f"{call.tool_name} is not in the zerto-rewind catalog (neither read_only_tools nor "
            f"tools), so no checkpoint was made (unlisted tools: {catalog.unknown}, "
            f"set by {catalog.unknown_source}). An operator can add this tool to the guard's "
            "catalog to have it checkpointed."
        )
        outcome = unlisted_outcome(catalog.unknown)
        return Decision(Row.UNLISTED, outcome, call.tool_name, reason=reason)
    if verdict.host_paths:  # before any tag: a checkpoint cannot rewind the host's files
        return host_path_decision(call, verdict)
    spec = verdict.spec
    fixed = spec.vpgs if spec is not None else ()
    if not verdict.vms and not (fixed and spec is not None and not spec.vm_arg):
        return no_vm_decision(call, verdict)
    return None


def budget_deadline(settings: Settings, started_mono: float) -> float:
    """The monotonic time by which the guard must have answered."""
    budget = settings.guard.timeout_s
    return started_mono + max(0.5, budget - min(_ANSWER_MARGIN_S, budget * 0.1))


@dataclass
class _Resolved:
    """A call's VMs as the estate sees them."""

    groups: dict[str, list[str]] = field(default_factory=dict)  # vpg id -> VM names
    unknown: list[str] = field(default_factory=list)
    identities: dict[str, list[VmIdentity]] = field(default_factory=dict)
    sites: dict[str, str] = field(default_factory=dict)  # vpg id -> the site that tags it
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)  # vpg id -> name, why
    failed: dict[str, str] = field(default_factory=dict)  # site -> why it did not answer
    listed: dict[str, list[str]] = field(default_factory=dict)  # VM name -> sites listing it
    listed_by: dict[str, list[str]] = field(default_factory=dict)  # vpg id -> sites listing it


class Guard(GuardEstate):
    """The decision table, over the estate's ZVMs (one per site) and one state directory.

    The preview runs this very class, planning only (``recovery/preview_guard.py``): it
    watches ``_decide``, ``_resolve`` and ``_inspect``, gives ``_tagger`` an executor that
    sends no tag request, and witnesses only landed tags in ``_witness``. Keep those
    steps' signatures, or change the planning guard with them.
    """

    # ------------------------------------------------------------------ entry points

    def decide(
        self,
        call: ToolCall,
        *,
        deadline: float | None = None,
        consume: bool = True,
        verdict: Classification | None = None,
    ) -> Decision:
        """Judge one call; on a mutating call this may tag and wait (never past ``deadline``).

        ``consume=False`` confirms a checkpoint without counting the call as a
        change (the MCP tool ``zerto_guard_before_mutate``), so the hook's next
        mutating call on that VPG reuses the checkpoint instead of tagging again.
        ``verdict``: the call's classification, made once by the pipeline
        (:mod:`.pipeline`); classified here only when it is not given.
        """
        started = self.mono()
        deadline = deadline if deadline is not None else budget_deadline(self.settings, started)
        try:
            if verdict is None:
                verdict = classify(call.tool_name, call.tool_input, self.settings.catalog)
            decision = self._decide(call, verdict, deadline, consume)
        except ConfigError as exc:
            vms = verdict.vms if verdict else ()
            reason = (
                f"zerto-rewind denied {call.tool_name}: the guard's config cannot be used "
                f"({exc.summary}), so no checkpoint could be made; the call was not run. An "
                "operator can see the problem with `zerto-rewind doctor`."
            )
            decision = deny_decision(call, Row.CONFIG_ERROR, reason, vms)
        except ZertoRewindError as exc:
            vms = verdict.vms if verdict else ()
            site = self._dark_errors.get(id(exc))
            where = self._site_words(site) if site is not None else None
            decision = deny_decision(call, Row.ERROR, error_reason(call, vms, exc, where), vms)
        elapsed_ms = int((self.mono() - started) * 1000)
        return decision.but(elapsed_ms=elapsed_ms, classification=verdict)

    # ------------------------------------------------------------------ the table

    def _decide(
        self, call: ToolCall, verdict: Classification, deadline: float, consume: bool
    ) -> Decision:
        settled = classified_decision(call, verdict, self.settings.catalog)
        if settled is not None:
            return settled
        spec = verdict.spec
        fixed = spec.vpgs if spec is not None else ()
        return self._mutating(call, verdict.vms, deadline, consume, fixed=fixed, verdict=verdict)

    def _mutating(
        self,
        call: ToolCall,
        vms: tuple[str, ...],
        deadline: float,
        consume: bool,
        *,
        fixed: tuple[str, ...] = (),
        verdict: Classification | None = None,
    ) -> Decision:
        found = self._resolve(vms, deadline)
        groups, unknown, identities = found.groups, found.unknown, found.identities
        if unknown and found.failed:
            return self._dark_unknown(call, vms, unknown, found.failed)
        ambiguous = {vm: ids for vm, ids in identities.items() if len(ids) > 1}
        if ambiguous and not unknown:
            return ambiguous_decision(call, vms, ambiguous, self._zvm_words())
        if unknown:
            return self._unknown(call, vms, unknown, verdict)
        for vpg_name in fixed:
            denied = self._add_fixed(call, vms, vpg_name, found, deadline)
            if denied is not None:
                return denied
        if found.problems:
            return self._combine(call, vms, self._unreachable(found))
        if found.failed:  # silence is not absence: a dark site may hold a twin of the name
            return self._site_unknown(call, vms, found)
        inspected = self._inspect(groups, found.sites, deadline)
        outcomes = [outcome for _vpg, outcome in inspected]
        if any(o.row == Row.FAILED for o in outcomes):
            return self._combine(call, vms, outcomes)
        tagger = self._tagger()
        for _attempt in range(_CONSUME_ATTEMPTS):
            plans = self._plan_all(tagger, inspected, call, deadline)
            outcomes = [p.outcome for p in plans]
            if not self._settle(tagger, plans, deadline):
                break
            if not consume or all(tagger.consume(p, call) for p in plans):
                break
            # Another call used the tag between its landing and now: tag again.
            inspected = [(vpg, _reset(outcome)) for vpg, outcome in inspected]
        self._witness(outcomes, found.listed_by, deadline)
        decision = self._combine(call, vms, outcomes)
        if decision.row == Row.CONFIRMED:
            return decision.but(
                identities={vm: ids[0] for vm, ids in identities.items()},
                vm_args=dict(verdict.args) if verdict is not None else {},
            )
        return decision

    def _unknown(
        self,
        call: ToolCall,
        vms: tuple[str, ...],
        unknown: list[str],
        verdict: Classification | None,
    ) -> Decision:
        """No ZVM of the estate knows these names (every site answered): a person decides."""
        origins = verdict.origins if verdict is not None else {}
        names = ", ".join(
            f"{shown_vm(vm)} (from {origins[vm]})"
            if "pattern" in origins.get(vm, "")
            else shown_vm(vm)
            for vm in unknown
        )
        reason = (
            f"zerto-rewind: no VPG protects {names} ({self._zvm_words()} "
            f"{'does' if len(self.estate().names) == 1 else 'do'} "
            f"not know it; names match exactly, case and spaces included), so there is "
            f"nothing to rewind {call.tool_name} to. Approve only if the change needs no "
            "rewind point. If the VM name is wrong, an operator can check how the guard's "
            "catalog reads it from this tool's arguments."
        )
        return Decision(Row.VM_UNKNOWN, Outcome.PROMPT, call.tool_name, reason=reason, vms=vms)

    def _site_unknown(self, call: ToolCall, vms: tuple[str, ...], found: _Resolved) -> Decision:
        """Some site lists the VM while another did not answer: a person decides."""
        from .sites import site_unknown_reason

        reason = site_unknown_reason(
            call.tool_name, vms, found.listed, self._dark_words(found.failed)
        )
        return Decision(Row.SITE_UNKNOWN, Outcome.PROMPT, call.tool_name, reason=reason, vms=vms)

    def _resolve(self, vms: tuple[str, ...], deadline: float) -> _Resolved:
        """VM names → their VPGs over the estate, the site that tags each, the dark sites."""
        lookup = self.sites().find(vms, deadline)
        found = _Resolved(failed=lookup.failed)
        for vm in vms:
            merged = sorted(lookup.vpgs[vm].values(), key=lambda v: v.vpg_id)
            if not merged:
                found.unknown.append(vm)
            seen: dict[str, VmIdentity] = {}
            for vpg in merged:
                found.groups.setdefault(vpg.vpg_id, []).append(vm)
                sites = found.listed.setdefault(vm, [])
                sites.extend(s for s in vpg.listed_by if s not in sites)
                found.listed_by[vpg.vpg_id] = list(vpg.listed_by)
                ref = vpg.rows[vm]
                seen.setdefault(ref.vm_id, VmIdentity(ref.vm_id, ref.instance_id or None))
                if vpg.vpg_id in found.sites or vpg.vpg_id in found.problems:
                    continue
                site, problem = self.sites().tag_site(vpg, lookup.failed)
                if site is not None:
                    found.sites[vpg.vpg_id] = site
                else:
                    found.problems[vpg.vpg_id] = (vpg.vpg_name, problem)
            if seen:
                found.identities[vm] = list(seen.values())
        return found

    def _add_fixed(
        self,
        call: ToolCall,
        vms: tuple[str, ...],
        vpg_name: str,
        found: _Resolved,
        deadline: float,
    ) -> Decision | None:
        """A VPG the catalog names for this tool joins the call's VPGs; a deny if it cannot."""
        vpg, failed = self.sites().find_vpg(vpg_name, deadline)
        found.failed.update(failed)
        if vpg is None:
            dark = f"; and {self._dark_words(failed)}, so it may be that site's" if failed else ""
            reason = (
                f"zerto-rewind denied {call.tool_name}: the guard's catalog says it changes "
                f"VPG {vpg_name!r}, which {self._zvm_words()} "
                f"{'does' if len(self.estate().names) == 1 else 'do'} not know{dark}, "
                "so no rewind point could be made and the call was not run."
            )
            return Decision(Row.FAILED, Outcome.DENY, call.tool_name, reason=reason, vms=vms)
        found.groups.setdefault(vpg.vpg_id, [])
        site, problem = self.sites().tag_site(vpg, found.failed)
        if site is not None:
            found.sites.setdefault(vpg.vpg_id, site)
        else:
            found.problems.setdefault(vpg.vpg_id, (vpg.vpg_name, problem))
        return None

    def _unreachable(self, found: _Resolved) -> list[VpgOutcome]:
        """The VPGs no ZVM can tag right now (their site is dark), each failed with why."""
        outcomes = []
        for vpg_id, (name, problem) in found.problems.items():
            outcome = VpgOutcome(vpg_id, name, tuple(found.groups.get(vpg_id, ())))
            outcome.row = Row.FAILED
            outcome.reason = (
                f"{problem}. Retry once that ZVM answers again (`zerto-rewind doctor` shows "
                "each site's ZVM)"
            )
            outcomes.append(outcome)
        return outcomes

    def _dark_unknown(
        self, call: ToolCall, vms: tuple[str, ...], unknown: list[str], failed: dict[str, str]
    ) -> Decision:
        """No ZVM that answered knows the VM, and some did not answer: it may be theirs."""
        answered = [s for s in self.estate().names if s not in failed]
        asked = (
            f"the ZVMs that answered ({', '.join(answered)}) do not know it"
            if answered
            else "no ZVM answered"
        )
        reason = (
            f"zerto-rewind denied {call.tool_name}: it cannot tell whether Zerto protects "
            f"{', '.join(shown_vm(vm) for vm in unknown)}: {asked}, and "
            f"{self._dark_words(failed)}. The VM may be that site's, so no checkpoint was "
            "made and the call was not run. An operator can check that site's ZVM with "
            "`zerto-rewind doctor`; retry the same call once it answers."
        )
        return Decision(Row.ERROR, Outcome.DENY, call.tool_name, reason=reason, vms=vms)

    def _witness(
        self, outcomes: list[VpgOutcome], listed_by: dict[str, list[str]], deadline: float
    ) -> None:
        """A confirmed tag is checked with every other ZVM that lists its VPG."""
        for out in outcomes:
            others = [s for s in listed_by.get(out.vpg_id, ()) if s != out.site]
            if out.row != Row.CONFIRMED or out.site is None or not others:
                continue
            problem = self.sites().cross_check(out, others, deadline)
            if problem:
                out.row, out.reason = Row.FAILED, problem

    def _inspect(
        self, groups: dict[str, list[str]], sites: dict[str, str], deadline: float
    ) -> list[tuple[Vpg, VpgOutcome]]:
        """Fetch each VPG from the ZVM that tags it; refuse fast where it cannot take a tag."""
        from ..zvm.estate import is_dark
        from ..zvm.models import site_kind, tag_refusal

        several = len(self.estate().names) > 1
        outcomes = []
        for vpg_id, vms in groups.items():
            site = sites.get(vpg_id, self.estate().first)
            client = self.estate().client(site)
            try:
                type_names = entity_type_names(client, self.state(), deadline=deadline)
                vpg = client.get_vpg(vpg_id, deadline=deadline)
            except ZertoRewindError as exc:
                # The site answered the lookup (or was cached) and fails now: mark it down
                # and name it, whether or not its client reported the failure itself.
                if several and is_dark(exc):
                    self._on_dark(site, exc)  # type: ignore[arg-type]
                raise
            kind = site_kind(vpg.protected_entity, type_names, self.settings.guard.site_types)
            outcome = VpgOutcome(vpg_id, vpg.name, tuple(vms), site_kind=kind)
            outcome.site = site if several else None
            refusal = tag_refusal(vpg)
            if refusal:
                outcome.row, outcome.reason = Row.FAILED, refusal
            outcomes.append((vpg, outcome))
        return outcomes

    def _plan_all(
        self,
        tagger: Tagger,
        inspected: list[tuple[Vpg, VpgOutcome]],
        call: ToolCall,
        deadline: float,
    ) -> list[TagPlan]:
        plans = [
            tagger.plan(
                vpg, outcome, call, deadline, client=self._client_of(outcome), site=outcome.site
            )
            for vpg, outcome in inspected
        ]
        for plan in plans:
            if plan.outcome.new_tag:
                tagger.check_task(plan, deadline)
        return plans

    def _settle(self, tagger: Tagger, plans: list[TagPlan], deadline: float) -> bool:
        """Wait for the tags unless one already failed or lands past the budget."""
        if any(p.outcome.row == Row.FAILED for p in plans):
            return False
        if any(tagger.beyond_budget(p, deadline) for p in plans):
            return False
        tagger.wait(plans, deadline)
        if all(p.outcome.row == Row.CONFIRMED for p in plans):
            return True
        self._recheck_late(plans, deadline)
        return False

    def _recheck_late(self, plans: list[TagPlan], deadline: float) -> None:
        """A tag expected within the budget did not land: did the VPG stop taking tags?

        A VPG paused or failing over mid-wait would otherwise read as *pending*
        with a retry time, and the retry would only then be refused.
        """
        from ..zvm.models import tag_refusal

        for plan in plans:
            out = plan.outcome
            if out.row != Row.PENDING or self.mono() > deadline:
                continue
            try:
                vpg = self._client_of(out).get_vpg(out.vpg_id, deadline=deadline + 0.5)
            except ZertoRewindError:
                continue  # no better answer than pending; the retry will ask again
            refusal = tag_refusal(vpg)
            if refusal:
                out.row = Row.FAILED
                out.reason = (
                    f"{refusal} (it stopped taking checkpoints while tag {out.tag!r} was pending)"
                )

    # ------------------------------------------------------------------ combining

    def _combine(
        self, call: ToolCall, vms: tuple[str, ...], outcomes: list[VpgOutcome]
    ) -> Decision:
        worst = max(outcomes, key=lambda o: SEVERITY.get(o.row, 0)).row
        if worst == Row.CONFIRMED:
            context = checkpoint_context(call, outcomes, self.rewind_tool)
            return Decision(
                worst, Outcome.CONTEXT, call.tool_name, context=context, vms=vms, vpgs=outcomes
            )
        if worst == Row.PENDING:
            pending = [o for o in outcomes if o.row == Row.PENDING]
            retry = max((o.expected_at or 0.0) for o in pending) + 1.0
            retry_after = max(retry, self.wall() + 2.0)
            return Decision(
                worst,
                pending_outcome(self.settings.guard.on_pending),
                call.tool_name,
                reason=pending_reason(call, pending, retry_after, self.settings),
                vms=vms,
                vpgs=outcomes,
                retry_after=retry_after,
            )
        failed = [o for o in outcomes if o.row == Row.FAILED]
        reason = failed_reason(call, failed)
        return Decision(worst, Outcome.DENY, call.tool_name, reason=reason, vms=vms, vpgs=outcomes)


def _reset(outcome: VpgOutcome) -> VpgOutcome:
    return VpgOutcome(outcome.vpg_id, outcome.vpg_name, outcome.vms, site_kind=outcome.site_kind)
