"""The guard that plans and does not execute: what ``Guard.decide`` would answer now, with
no tag requested, no wait, and no record, cache or mark written.

:class:`PlanningGuard` *is* the guard (``core.guard``: the same table, the same rows, the
same messages), over two stand-ins that keep it from changing anything:

* :class:`ReadOnlyState`: the shared state as it is; a VPG record the plan changes is a
  copy that is dropped, and the plan caches nothing. (Beside a running guard the ZVM
  clients are that guard's own, so a site whose ZVM fails is marked down as any of its
  requests would mark it.)
* :class:`PlanningTagger`: the tag rules' executor (``core.tag_rules``) that reads what
  the rules ask to read (the journal, a joined tag's task) and sends no tag request. A tag
  the guard would wait for (within its budget) is taken as landing; one beyond the budget
  leaves the call pending, as the guard answers at once. Nothing is counted against a tag,
  and a tag that is only predicted has no second ZVM to witness it.

On the way it notes what the preview reports beside the decision (:class:`Seen`): each
VPG as the ZVM showed it, what the rules chose to do on it, the VMs no ZVM knows. The
decision itself is the guard's; a new row of the table needs no change here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.decision import Row
from ..core.guard import Guard
from ..core.tag_actions import Adopt, Fail, MarkFailed, RequestTag, TagAction
from ..core.tag_rules import FAIL_OVERDUE, JOIN_PENDING, REQUEST_NEW, REUSE_LANDED
from ..core.tagging import Tagger
from ..errors import ZertoRewindError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.catalog import Classification
    from ..core.decision import Decision, ToolCall, VpgOutcome
    from ..core.guard import _Resolved
    from ..core.state import GuardStateLike, VpgRecord
    from ..core.tag_plan import TagPlan
    from ..zvm.auth import TokenCacheLike
    from ..zvm.models import Vpg

__all__ = ["REFUSE", "UNPLANNED", "PlanningGuard", "PlanningTagger", "ReadOnlyState", "Seen"]

REFUSE = "refuse"  # the VPG cannot take a tag now (paused, failing over, no ZVM can tag it)
UNPLANNED = "unplanned"  # the guard stopped at another VPG's refusal before planning this one


@dataclass
class Seen:
    """What the planning guard saw while it decided, for the preview's report."""

    vpgs: dict[str, Vpg] = field(default_factory=dict)  # vpg id -> the VPG as its ZVM showed it
    actions: dict[str, str] = field(default_factory=dict)  # vpg id -> what the tag rules chose
    predicted: set[str] = field(default_factory=set)  # vpg ids whose tag is taken as landing
    unknown: list[str] = field(default_factory=list)  # VMs no ZVM of the estate knows
    error: ZertoRewindError | None = None  # what stopped the guard (it then denies)


class ReadOnlyState:
    """A guard state that is read and never written: a plan's changes to a record are lost."""

    def __init__(self, state: GuardStateLike) -> None:
        self._state = state

    @contextlib.contextmanager
    def vpg(self, vpg_id: str) -> Iterator[VpgRecord]:
        """A copy of the VPG's record, unlocked (nothing is saved, so nothing is raced)."""
        yield self._state.peek_vpg(vpg_id)

    def peek_vpg(self, vpg_id: str) -> VpgRecord:
        return self._state.peek_vpg(vpg_id)

    def cached(self, kind: str, key: str, ttl_s: float) -> Any | None:
        return self._state.cached(kind, key, ttl_s)

    def store(self, kind: str, key: str, value: Any) -> None:
        """Plan, don't execute: the plan's lookups and site-down marks are not cached."""

    def token_cache(self) -> TokenCacheLike:
        return self._state.token_cache()

    def check(self) -> None:
        self._state.check()


class PlanningTagger(Tagger):
    """The tag rules' executor for a plan: it reads, notes what it would do, and sends none."""

    seen: Seen

    def _carry_out(
        self, plan: TagPlan, record: VpgRecord, actions: list[TagAction], deadline: float
    ) -> None:
        self.seen.actions.setdefault(plan.outcome.vpg_id, action_of(actions))
        super()._carry_out(plan, record, actions, deadline)

    def _send(
        self, plan: TagPlan, record: VpgRecord, request: RequestTag, deadline: float
    ) -> str | None:
        return None  # noted in the record's copy, never sent: no task to ask about

    def wait(self, plans: list[TagPlan], deadline: float) -> None:
        """Called only when every tag lands within the budget: the guard's wait ends there."""
        for plan in plans:
            if plan.waiting:
                plan.outcome.row, plan.done = Row.CONFIRMED, True
                self.seen.predicted.add(plan.outcome.vpg_id)

    def consume(self, plan: TagPlan, call: ToolCall) -> bool:
        return True  # a preview counts no change against the tag


def action_of(actions: list[TagAction]) -> str:
    """The tag rules' choice on a VPG in the words of the preview's report."""
    if any(isinstance(a, RequestTag) for a in actions):
        return REQUEST_NEW
    if any(isinstance(a, Adopt) and a.done for a in actions):
        return REUSE_LANDED
    if any(isinstance(a, MarkFailed) for a in actions) and any(
        isinstance(a, Fail) for a in actions
    ):
        return FAIL_OVERDUE
    if any(isinstance(a, Adopt) for a in actions):
        return JOIN_PENDING
    return REFUSE  # past guard.max_tags_per_minute: no tag may be requested now


class PlanningGuard(Guard):
    """The guard over a :class:`ReadOnlyState` and a :class:`PlanningTagger` (see above)."""

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self.seen = Seen()

    @classmethod
    def beside(cls, guard: Guard, state: GuardStateLike) -> PlanningGuard:
        """A planning guard over ``guard``'s ZVMs and clock, reading ``state``."""
        estate = guard.estate()
        clients = {site: estate.client(site) for site in estate.names}
        return cls(
            guard.settings,
            clients=clients,
            state=ReadOnlyState(state),
            wall=guard.wall,
            mono=guard.mono,
            sleep=guard.sleep,
            rewind_tool=guard.rewind_tool,
        )

    def plan(self, call: ToolCall, verdict: Classification) -> Decision:
        """The guard's decision for ``call`` made now, planned only; a ZVM's or the config's
        error is raised (the preview cannot tell), not turned into a deny."""
        self.seen = Seen()
        decision = self.decide(call, consume=False, verdict=verdict)
        if self.seen.error is not None:
            raise self.seen.error
        return decision

    # ---- the guard's steps, watched

    def _decide(
        self, call: ToolCall, verdict: Classification, deadline: float, consume: bool
    ) -> Decision:
        try:
            return super()._decide(call, verdict, deadline, consume)
        except ZertoRewindError as exc:
            self.seen.error = exc
            raise

    def _resolve(self, vms: tuple[str, ...], deadline: float) -> _Resolved:
        found = super()._resolve(vms, deadline)
        self.seen.unknown = list(found.unknown)
        return found

    def _inspect(
        self, groups: dict[str, list[str]], sites: dict[str, str], deadline: float
    ) -> list[tuple[Vpg, VpgOutcome]]:
        inspected = super()._inspect(groups, sites, deadline)
        self.seen.vpgs.update((outcome.vpg_id, vpg) for vpg, outcome in inspected)
        return inspected

    def _tagger(self, kind: type[Tagger] | None = None) -> Tagger:
        tagger = super()._tagger(PlanningTagger)
        assert isinstance(tagger, PlanningTagger)
        tagger.seen = self.seen
        return tagger

    def _witness(
        self, outcomes: list[VpgOutcome], listed_by: dict[str, list[str]], deadline: float
    ) -> None:
        """A landed tag is checked with the other ZVMs as the guard does; a predicted one
        is not in any journal yet."""
        landed = [o for o in outcomes if o.vpg_id not in self.seen.predicted]
        super()._witness(landed, listed_by, deadline)
