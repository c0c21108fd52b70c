"""The life of one checkpoint tag on one VPG: request or join or reuse, wait, consume.

Rules (they hold across processes because each step runs under the VPG's lock):

* A landed tag may cover a call if the call started before the tag landed, or
  if no mutating call on that VPG has been allowed since it landed. Otherwise
  a change already sits between the checkpoint and this call: tag again.
* A requested tag that has not landed is joined, not requested again, until it
  is overdue; then it is failed and the next call requests a new one.
* A call is never allowed on a tag that has not landed: a change allowed
  before its checkpoint may end up inside it.
* When the expected landing lies beyond the budget, the answer is *pending*
  at once, with the time to retry; nobody waits out the budget to say "failed".
* At most ``guard.max_tags_per_minute`` tags are requested per VPG in any 60 s
  (the request times live in the VPG's record, so the bound holds across hooks
  and gateway replicas); past it, a call that needs a new tag fails. Joining or
  reusing a tag requests nothing and is not counted.

The rules are pure and live apart (``tag_rules``: facts in, actions out, in the words
of ``tag_actions``); the :class:`Tagger` here is their executor: it reads the VPG's
record under its lock, asks the ZVM what the rules ask for, carries out their actions
(``tag_plan``) and feeds what it learns back in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from ..config.settings import GuardSettings
from ..zvm.client import ZvmClient
from ..zvm.models import Checkpoint, Vpg
from . import tag_rules
from .cadence import observed_cadence, resolve_cadence
from .decision import Row, ToolCall, VpgOutcome
from .state import GuardStateLike, TagRecord, VpgRecord, remember
from .tag_actions import (
    Adopt,
    AskTask,
    AskVpg,
    JournalAnswer,
    Land,
    LookUp,
    MarkLanded,
    PollFacts,
    RequestTag,
    TagAction,
    TagFacts,
)
from .tag_plan import TagPlan, apply_to_plan, apply_to_record, mark_landed, writes_record
from .tag_rules import *  # noqa: F403
from .tag_rules import (
    after_poll,
    cadence_window_start,
    consume_rule,
    exceeds_budget,
    known_cadence,
    landing_look,
    learned_lag,
    on_task,
    on_vpg,
    plan_tag,
    poll_interval,
)

# the tagger, and the rules it carries out (re-exported: tag_rules.__all__)
__all__ = ["TagPlan", "Tagger", "look_for_landing", "tag_in_journal"]
__all__ += tag_rules.__all__

# Tolerance when matching a landing against the request time (clock skew).
_SKEW_S = 5.0


class Tagger:
    """Carries out the tag rules' actions (``tag_rules``) for the VPGs of one call: the ZVM
    calls and the record's writes, feeding what they find back into the rules."""

    def __init__(
        self,
        client: ZvmClient,
        state: GuardStateLike,
        settings: GuardSettings,
        *,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        site_client: Callable[[str], ZvmClient | None] | None = None,
    ) -> None:
        """``site_client(site)``: the client of the estate's site that took a tag another
        call requested (None while that site is down); without it, the plan's client."""
        self.client = client
        self.site_client = site_client
        self.state = state
        self.settings = settings
        self.wall = wall
        self.mono = mono
        self.sleep = sleep

    # ------------------------------------------------------------------ planning

    def plan(
        self,
        vpg: Vpg,
        outcome: VpgOutcome,
        call: ToolCall,
        deadline: float,
        *,
        client: ZvmClient | None = None,
        site: str | None = None,
    ) -> TagPlan:
        """Decide, under the VPG's lock, whether to reuse, join or request a tag.

        ``client``: the ZVM that takes this VPG's tag (default: the tagger's own), the
        estate's ``site`` of it.
        """
        plan = TagPlan(outcome, client=client or self.client, site=site)
        with self.state.vpg(vpg.vpg_id) as record:
            record.vpg_name = vpg.name
            self._learn_cadence(plan, record, vpg, deadline)
            plan.poll_s = poll_interval(record.cadence_s)
            landed_now = self._refresh(plan, record, deadline)
            facts = TagFacts(
                record=record,
                call=call,
                vpg_name=vpg.name,
                vms=outcome.vms,
                settings=self.settings,
                now=self.wall(),
                remaining_s=deadline - self.mono(),
                landed_now=landed_now,
            )
            actions = plan_tag(facts)
            while len(actions) == 1 and isinstance(actions[0], LookUp):
                found, listed = self._look_up(plan, record, actions[0], deadline)
                facts = replace(facts, journal=JournalAnswer(found, tuple(listed)))
                actions = plan_tag(self._now(facts, deadline))
            self._carry_out(plan, record, actions, deadline)
        return plan

    def _now(self, facts: TagFacts, deadline: float) -> TagFacts:
        return replace(facts, now=self.wall(), remaining_s=deadline - self.mono())

    def _learn_cadence(self, plan: TagPlan, record: VpgRecord, vpg: Vpg, deadline: float) -> None:
        outcome = plan.outcome
        now = self.wall()
        known = known_cadence(record, vpg.name, self.settings, now)
        if known is None:
            since = cadence_window_start(outcome.site_kind, self.settings, now)
            checkpoints = _client(self, plan).list_checkpoints(
                vpg.vpg_id, since=_utc(since), deadline=deadline
            )
            self._note_checkpoints(record, checkpoints)
            observed = observed_cadence([c.timestamp.timestamp() for c in checkpoints if not c.tag])
            cadence = resolve_cadence(
                vpg.name,
                observed,
                outcome.site_kind,
                overrides=self.settings.cadence_s,
                site_defaults=self.settings.site_cadence_s,
            )
            record.cadence_s, record.cadence_source = cadence.seconds, cadence.source
            record.cadence_learned_at = now
        else:
            record.cadence_s, record.cadence_source = known
        outcome.cadence_s, outcome.cadence_source = record.cadence_s, record.cadence_source

    def _note_checkpoints(self, record: VpgRecord, checkpoints: list[Checkpoint]) -> None:
        untagged = [c.timestamp.timestamp() for c in checkpoints if not c.tag]
        if untagged:
            record.last_checkpoint_at = max([*untagged, record.last_checkpoint_at or 0.0])

    def _refresh(self, plan: TagPlan, record: VpgRecord, deadline: float) -> bool:
        """Look once whether a requested tag has landed meanwhile (a retry's first question);
        True when this look found it in the journal."""
        look = landing_look(record, self.wall())
        if look is None:
            return False
        found, _listed = self._look_up(plan, record, look, deadline)
        if found is None:
            return False
        mark_landed(record, MarkLanded(look.name, found.cp_id, found.timestamp.timestamp()))
        return True

    def _look_up(
        self, plan: TagPlan, record: VpgRecord, look: LookUp, deadline: float
    ) -> tuple[Checkpoint | None, list[Checkpoint]]:
        found, listed = tag_in_journal(
            _client(self, plan), record.vpg_id, look.name, look.requested_at, deadline=deadline
        )
        self._note_checkpoints(record, listed)
        return found, listed

    def _carry_out(
        self, plan: TagPlan, record: VpgRecord, actions: list[TagAction], deadline: float
    ) -> None:
        """Do ``actions`` in order on the plan and the record (held under its lock)."""
        for action in actions:
            if plan.done:
                return
            if isinstance(action, RequestTag):
                self._request(plan, record, action, deadline)
            elif isinstance(action, Adopt) and record.tag is not None:
                self._adopt(plan, record, record.tag)
                plan.done = action.done
            elif isinstance(action, AskTask) and plan.task_client is not None:
                # Under the VPG's lock: no poll will ask a tag this call does not wait for.
                task = plan.task_client.get_task(action.task_id, deadline=deadline)
                plan.task_checked = task.done
                answer = on_task(task, action.task_id, plan.tag_name)
                self._carry_out(plan, record, answer, deadline)
            elif isinstance(action, Land):
                self._land(plan, record, action)
            else:
                apply_to_record(record, action)
                apply_to_plan(plan, action)

    def _request(
        self, plan: TagPlan, record: VpgRecord, request: RequestTag, deadline: float
    ) -> None:
        task_id = self._send(plan, record, request, deadline)
        if record.tag is not None:
            remember(record, _summary(record.tag))
        record.tag = TagRecord(
            name=request.name,
            requested_at=request.requested_at,
            expected_at=request.expected_at,
            planned_lag_s=request.lag_s,
            overdue_at=request.overdue_at,
            task_id=task_id,
            requested_by=request.requested_by,
            site=plan.site,
        )
        record.allowed_since_landing = 0
        self._adopt(plan, record, record.tag)
        plan.outcome.new_tag = True

    def _send(
        self, plan: TagPlan, record: VpgRecord, request: RequestTag, deadline: float
    ) -> str | None:
        """Ask the ZVM for the tag: its task's id (a planning executor sends nothing)."""
        return _client(self, plan).tag_checkpoint(record.vpg_id, request.name, deadline=deadline)

    def _adopt(self, plan: TagPlan, record: VpgRecord, tag: TagRecord) -> None:
        out = plan.outcome
        plan.tag_name, plan.task_id, plan.overdue_at = tag.name, tag.task_id, tag.overdue_at
        plan.task_client = _client(self, plan)
        if tag.site is not None and tag.site != plan.site and self.site_client is not None:
            # Requested through another site's ZVM (guard.tag_via any): its task is there.
            plan.task_client = self.site_client(tag.site)
        # expected_at = boundary + the lag planned with. Until this VPG's lag is
        # learned, poll from the boundary on; once learned, poll when it should land.
        plan.lag_used_s = tag.planned_lag_s
        learned = record.lag_s is not None
        plan.next_poll_at = tag.expected_at if learned else tag.expected_at - tag.planned_lag_s
        out.tag, out.requested_at, out.expected_at = tag.name, tag.requested_at, tag.expected_at
        out.checkpoint_id, out.landed_at = tag.checkpoint_id, tag.landed_at
        out.row = Row.CONFIRMED if tag.state == "landed" else Row.PENDING

    # ------------------------------------------------------------------ waiting

    def check_task(self, plan: TagPlan, deadline: float) -> None:
        """Fail fast when the ZVM refused the tag request itself.

        Right after the request the task is usually still running; only a
        finished task settles the question, so a running one is asked again at
        the next poll past the expected landing.
        """
        if plan.task_id is None or plan.done or plan.task_checked or plan.task_client is None:
            return
        task = plan.task_client.get_task(plan.task_id, deadline=deadline)
        plan.task_checked = task.done
        self._record(plan, on_task(task, plan.task_id, plan.tag_name))

    def check_vpg(self, plan: TagPlan, deadline: float) -> None:
        """A tag past its expected landing: did the VPG stop taking checkpoints meanwhile?

        A VPG paused or failing over mid-wait loses the tag; without this look the
        call would poll to the end of its budget and then say *pending*. Asked once
        per plan, and only for a late tag, so a tag that lands on time costs nothing.
        """
        from ..errors import ZertoRewindError

        plan.vpg_checked = True
        try:
            vpg = _client(self, plan).get_vpg(plan.outcome.vpg_id, deadline=deadline)
        except ZertoRewindError:
            return  # the journal polls go on; the guard's last look may still tell
        self._record(plan, on_vpg(vpg, plan.tag_name))

    def wait(self, plans: list[TagPlan], deadline: float) -> None:
        """Poll each waiting plan on its own schedule until it lands, fails or time is up."""
        offset = self.wall() - self.mono()
        while True:
            waiting = [p for p in plans if p.waiting]
            if not waiting:
                return
            plan = min(waiting, key=lambda p: p.next_poll_at)
            if plan.next_poll_at - offset > deadline:
                return
            pause = plan.next_poll_at - self.wall()
            if pause > 0:
                self.sleep(min(pause, max(0.0, deadline - self.mono())))
            if self.mono() >= deadline:
                return
            self._poll(plan, deadline)

    def beyond_budget(self, plan: TagPlan, deadline: float) -> bool:
        """True when the tag cannot land before ``deadline`` (monotonic)."""
        expected = plan.outcome.expected_at or 0.0
        return plan.waiting and exceeds_budget(expected, self.wall(), deadline - self.mono())

    def _poll(self, plan: TagPlan, deadline: float) -> None:
        """One look at the journal; the rules say what follows (:func:`after_poll`)."""
        out = plan.outcome
        requested_at = out.requested_at or self.wall()
        found, listed = tag_in_journal(
            _client(self, plan), out.vpg_id, plan.tag_name, requested_at, deadline=deadline
        )
        now = self.wall()
        facts = PollFacts(
            tag_name=plan.tag_name,
            requested_at=requested_at,
            expected_at=out.expected_at or now,
            overdue_at=plan.overdue_at,
            task_id=plan.task_id,
            task_checked=plan.task_checked,
            vpg_checked=plan.vpg_checked,
            poll_s=plan.poll_s,
            now=now,
            found=found,
        )
        actions = after_poll(facts)
        with self.state.vpg(out.vpg_id) as record:
            self._note_checkpoints(record, listed)
            self._carry_out(plan, record, [a for a in actions if writes_record(a)], deadline)
        for action in actions:  # the ZVM is asked outside the VPG's lock
            if plan.done:
                return
            if isinstance(action, AskTask):
                self.check_task(plan, deadline)
            elif isinstance(action, AskVpg):
                self.check_vpg(plan, deadline)
            elif not writes_record(action):
                apply_to_plan(plan, action)

    def _land(self, plan: TagPlan, record: VpgRecord, land: Land) -> None:
        tag = record.tag
        if tag is not None and tag.name == plan.tag_name and tag.state != "landed":
            tag.mark_landed(land.checkpoint_id, land.landed_at)
            cadence = record.cadence_s or 5.0
            record.lag_s = learned_lag(tag.expected_at, plan.lag_used_s, land.landed_at, cadence)
        out = plan.outcome
        out.checkpoint_id, out.landed_at = land.checkpoint_id, land.landed_at
        out.row = Row.CONFIRMED
        plan.done = True

    def _record(self, plan: TagPlan, actions: list[TagAction]) -> None:
        """The ZVM's answer, carried out: the record's part under the VPG's lock."""
        if not actions:
            return
        with self.state.vpg(plan.outcome.vpg_id) as record:
            for action in actions:
                apply_to_record(record, action)
        for action in actions:
            apply_to_plan(plan, action)

    # ------------------------------------------------------------------ consuming

    def consume(self, plan: TagPlan, call: ToolCall) -> bool:
        """Count the call against the tag; False if the tag no longer covers it."""
        out = plan.outcome
        with self.state.vpg(out.vpg_id) as record:
            verdict = consume_rule(record, plan.tag_name, out.landed_at, call)
            if verdict.counted:
                record.allowed_since_landing += 1
        return verdict.allowed


def tag_in_journal(
    client: ZvmClient, vpg_id: str, name: str, requested_at: float, *, deadline: float | None
) -> tuple[Checkpoint | None, list[Checkpoint]]:
    """The checkpoint carrying tag ``name``, if it has landed, and the checkpoints listed.

    The listing starts a little before the request, for clock skew between us
    and the ZVM.
    """
    since = _utc(requested_at - _SKEW_S)
    listed = client.list_checkpoints(vpg_id, since=since, deadline=deadline)
    return next((c for c in listed if c.tag == name), None), listed


def look_for_landing(
    client: ZvmClient, record: VpgRecord, now: float, *, deadline: float | None
) -> tuple[Checkpoint | None, list[Checkpoint]]:
    """A retry's first question: is the record's requested tag in the journal? Asked only
    once the tag is due (:func:`landing_due`); ``(None, [])`` when not asked."""
    look = landing_look(record, now)
    if look is None:
        return None, []
    return tag_in_journal(client, record.vpg_id, look.name, look.requested_at, deadline=deadline)


# ---------------------------------------------------------------------- helpers


def _client(tagger: Tagger, plan: TagPlan) -> ZvmClient:
    """The ZVM a plan talks to: its VPG's tag site's, else the tagger's."""
    return plan.client if plan.client is not None else tagger.client


def _summary(tag: TagRecord) -> dict[str, object]:
    return {
        "name": tag.name,
        "state": tag.state,
        "requested_at": tag.requested_at,
        "expected_at": tag.expected_at,
        "landed_at": tag.landed_at,
        "checkpoint_id": tag.checkpoint_id,
        "reason": tag.reason,
    }


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)
