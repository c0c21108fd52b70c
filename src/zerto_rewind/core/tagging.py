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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ..config.settings import GuardSettings
from ..zvm.client import ZvmClient
from ..zvm.models import Checkpoint, Vpg
from .cadence import observed_cadence, resolve_cadence
from .decision import Row, ToolCall, VpgOutcome
from .state import GuardStateLike, TagRecord, VpgRecord, remember
from .tag_rules import (
    _OVERDUE_ADVICE,
    _TAG_WINDOW_S,
    FAIL_OVERDUE,
    JOIN_PENDING,
    REQUEST_NEW,
    REUSE_LANDED,
    TAG_MAX,
    covers,
    exceeds_budget,
    is_overdue,
    journal_confirms,
    known_cadence,
    landing_due,
    landing_lag,
    overdue_reason,
    plan_action,
    planned_landing,
    tag_bound_reason,
    tag_name,
    task_failure,
)

__all__ = [
    "FAIL_OVERDUE",
    "JOIN_PENDING",
    "REQUEST_NEW",
    "REUSE_LANDED",
    "TAG_MAX",
    "TagPlan",
    "Tagger",
    "covers",
    "exceeds_budget",
    "is_overdue",
    "journal_confirms",
    "known_cadence",
    "landing_due",
    "landing_lag",
    "look_for_landing",
    "overdue_reason",
    "plan_action",
    "planned_landing",
    "tag_bound_reason",
    "tag_in_journal",
    "tag_name",
    "task_failure",
]

# Checkpoints listed when learning the cadence: this many site-cadences back.
_CADENCE_WINDOW_STEPS = 12
# Tolerance when matching a landing against the request time (clock skew).
_SKEW_S = 5.0


@dataclass
class TagPlan:
    """One VPG's part in a call: which tag covers it and where it stands."""

    outcome: VpgOutcome
    tag_name: str = ""
    task_id: str | None = None
    poll_s: float = 1.0
    task_checked: bool = False
    vpg_checked: bool = False
    next_poll_at: float = 0.0  # wall clock
    overdue_at: float = 0.0
    lag_used_s: float = 0.0
    done: bool = False
    # The ZVM that takes this VPG's tag and lists its journal (its site's, in an estate).
    client: ZvmClient | None = None
    site: str | None = None
    # The ZVM that knows the adopted tag's task: the one that took the request (None: no
    # ZVM can be asked now, so only the journal and the overdue time decide).
    task_client: ZvmClient | None = None

    @property
    def waiting(self) -> bool:
        return not self.done


class Tagger:
    """Runs the tag lifecycle for the VPGs of one call."""

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
            plan.poll_s = min(2.0, max(0.1, (record.cadence_s or 5.0) / 20))
            confirmed = self._refresh(plan, record, deadline)
            action = plan_action(record, call, self.wall())
            tag = record.tag
            if action == REUSE_LANDED and tag is not None and not confirmed:
                # The state directory is the agent's to write: no allow on it alone.
                action = (
                    REUSE_LANDED if self._in_journal(plan, record, tag, deadline) else REQUEST_NEW
                )
            if action == REQUEST_NEW or tag is None:
                self._request(plan, record, vpg, call, deadline)
            elif action == FAIL_OVERDUE:
                self._fail_overdue(plan, record, tag)
            else:
                self._adopt(plan, record, tag)
                plan.done = action == REUSE_LANDED
                if action == JOIN_PENDING and self.beyond_budget(plan, deadline):
                    self._check_joined_task(plan, tag, deadline)
        return plan

    def _learn_cadence(self, plan: TagPlan, record: VpgRecord, vpg: Vpg, deadline: float) -> None:
        outcome = plan.outcome
        now = self.wall()
        known = known_cadence(record, vpg.name, self.settings, now)
        if known is None:
            site_default = self.settings.site_cadence_s.get(outcome.site_kind, 630.0)
            since = now - site_default * _CADENCE_WINDOW_STEPS
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

    def _request(
        self, plan: TagPlan, record: VpgRecord, vpg: Vpg, call: ToolCall, deadline: float
    ) -> None:
        if not self._within_bound(plan, record):
            return
        cadence = record.cadence_s or 630.0
        lag = landing_lag(record, self.settings)
        named = plan.outcome.vms or (plan.outcome.vpg_name,)  # a VPG the catalog names
        name = tag_name(self.settings.tag_prefix, call, named, self.wall())
        requested_at = self.wall()
        task_id = _client(self, plan).tag_checkpoint(vpg.vpg_id, name, deadline=deadline)
        expected, overdue = planned_landing(
            requested_at, record.last_checkpoint_at, cadence, lag, self.settings
        )
        if record.tag is not None:
            remember(record, _summary(record.tag))
        record.tag = TagRecord(
            name=name,
            requested_at=requested_at,
            expected_at=expected,
            planned_lag_s=lag,
            overdue_at=overdue,
            task_id=task_id,
            requested_by=f"{call.tool_name} {','.join(plan.outcome.vms)}",
            site=plan.site,
        )
        record.allowed_since_landing = 0
        self._adopt(plan, record, record.tag)
        plan.outcome.new_tag = True

    def _within_bound(self, plan: TagPlan, record: VpgRecord) -> bool:
        """Count a new tag against ``guard.max_tags_per_minute``; False (plan failed) past it."""
        bound = self.settings.max_tags_per_minute
        now = self.wall()
        recent = [t for t in record.tag_times if t > now - _TAG_WINDOW_S]
        if bound is not None and len(recent) >= bound:
            record.tag_times = recent
            plan.outcome.bounded = True
            _fail(plan, tag_bound_reason(bound, recent, now))
            return False
        record.tag_times = [*recent, now]
        return True

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

    def _fail_overdue(self, plan: TagPlan, record: VpgRecord, tag: TagRecord) -> None:
        tag.state = "failed"
        tag.reason = overdue_reason(tag)
        self._adopt(plan, record, tag)
        _fail(plan, f"{tag.reason}; {_OVERDUE_ADVICE}")

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
        reason = task_failure(task, plan.task_id)
        if reason:
            self._record_failure(plan, reason)

    def check_vpg(self, plan: TagPlan, deadline: float) -> None:
        """A tag past its expected landing: did the VPG stop taking checkpoints meanwhile?

        A VPG paused or failing over mid-wait loses the tag; without this look the
        call would poll to the end of its budget and then say *pending*. Asked once
        per plan, and only for a late tag, so a tag that lands on time costs nothing.
        """
        from ..errors import ZertoRewindError
        from ..zvm.models import tag_refusal

        plan.vpg_checked = True
        try:
            vpg = _client(self, plan).get_vpg(plan.outcome.vpg_id, deadline=deadline)
        except ZertoRewindError:
            return  # the journal polls go on; the guard's last look may still tell
        refusal = tag_refusal(vpg)
        if refusal:
            why = f"it stopped taking checkpoints while tag {plan.tag_name!r} was pending"
            self._record_failure(plan, f"{refusal} ({why})")

    def _check_joined_task(self, plan: TagPlan, tag: TagRecord, deadline: float) -> None:
        """A joined tag this call will not wait for (it lands past the budget): ask its task
        now, under the VPG's lock, since no poll will; a failed task fails the tag for all."""
        if tag.task_id is None or plan.task_client is None:
            return
        task = plan.task_client.get_task(tag.task_id, deadline=deadline)
        plan.task_checked = task.done
        reason = task_failure(task, tag.task_id)
        if reason:
            tag.state, tag.reason = "failed", reason
            _fail(plan, reason)

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
        out = plan.outcome
        requested_at = out.requested_at or self.wall()
        found, checkpoints = tag_in_journal(
            _client(self, plan), out.vpg_id, plan.tag_name, requested_at, deadline=deadline
        )
        with self.state.vpg(out.vpg_id) as record:
            self._note_checkpoints(record, checkpoints)
            if found is not None:
                self._land(plan, record, found)
                return
        now = self.wall()
        if is_overdue(plan.overdue_at, now):
            with self.state.vpg(out.vpg_id) as record:
                if record.tag is not None and record.tag.name == plan.tag_name:
                    self._fail_overdue(plan, record, record.tag)
                    return
            # The record moved on (another call failed this tag and requested a new one):
            # fail this plan alone, or the wait would poll it again at once, until the deadline.
            ours = TagRecord(plan.tag_name, requested_at, out.expected_at or now, plan.overdue_at)
            _fail(plan, f"{overdue_reason(ours)}; {_OVERDUE_ADVICE}")
            return
        if now > (out.expected_at or now):
            if not plan.task_checked:
                self.check_task(plan, deadline)
            if not plan.done and not plan.vpg_checked:
                self.check_vpg(plan, deadline)
            if plan.done:
                return
        plan.next_poll_at = now + plan.poll_s

    def _land(self, plan: TagPlan, record: VpgRecord, checkpoint: Checkpoint) -> None:
        landed_at = checkpoint.timestamp.timestamp()
        tag = record.tag
        if tag is not None and tag.name == plan.tag_name and tag.state != "landed":
            tag.mark_landed(checkpoint.cp_id, landed_at)
            boundary = tag.expected_at - plan.lag_used_s
            cadence = record.cadence_s or 5.0
            record.lag_s = min(max(landed_at - boundary, 0.0), cadence)
        out = plan.outcome
        out.checkpoint_id, out.landed_at, out.row = checkpoint.cp_id, landed_at, Row.CONFIRMED
        plan.done = True

    def _refresh(self, plan: TagPlan, record: VpgRecord, deadline: float) -> bool:
        """Look once whether a requested tag has landed meanwhile (a retry's first question);
        True when this look found it in the journal."""
        found, checkpoints = look_for_landing(
            _client(self, plan), record, self.wall(), deadline=deadline
        )
        self._note_checkpoints(record, checkpoints)
        if found is not None and record.tag is not None:
            record.tag.mark_landed(found.cp_id, found.timestamp.timestamp())
            return True
        return False

    def _in_journal(
        self, plan: TagPlan, record: VpgRecord, tag: TagRecord, deadline: float
    ) -> bool:
        """Confirm a recorded landed tag in the ZVM journal before reusing it (one listing).

        A record the journal does not bear out (stale, or forged in the state directory)
        is failed and kept in the history; the caller then requests a new tag.
        """
        found, checkpoints = tag_in_journal(
            _client(self, plan), record.vpg_id, tag.name, tag.requested_at, deadline=deadline
        )
        self._note_checkpoints(record, checkpoints)
        if found is not None and journal_confirms(
            tag, found, checkpoints, self.settings.tag_prefix
        ):
            tag.landed_at = found.timestamp.timestamp()  # the journal's time, not the record's
            return True
        tag.state = "failed"
        tag.reason = (
            f"tag {tag.name!r} is recorded as landed, but the ZVM journal does not confirm it "
            "as the VPG's latest guard checkpoint; not reused"
        )
        return False

    def _record_failure(self, plan: TagPlan, reason: str) -> None:
        with self.state.vpg(plan.outcome.vpg_id) as record:
            tag = record.tag
            if tag is not None and tag.name == plan.tag_name:
                tag.state, tag.reason = "failed", reason
        _fail(plan, reason)

    # ------------------------------------------------------------------ consuming

    def consume(self, plan: TagPlan, call: ToolCall) -> bool:
        """Count the call against the tag; False if the tag no longer covers it."""
        out = plan.outcome
        with self.state.vpg(out.vpg_id) as record:
            tag = record.tag
            ours = tag is not None and tag.name == plan.tag_name
            if ours and tag is not None and not covers(record, tag, call):
                return False
            if not ours and not (out.landed_at is not None and call.started_at <= out.landed_at):
                return False
            if ours:
                record.allowed_since_landing += 1
        return True


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
    tag = record.tag
    if tag is None or tag.state != "requested" or not landing_due(record, tag, now):
        return None, []
    return tag_in_journal(client, record.vpg_id, tag.name, tag.requested_at, deadline=deadline)


# ---------------------------------------------------------------------- helpers


def _client(tagger: Tagger, plan: TagPlan) -> ZvmClient:
    """The ZVM a plan talks to: its VPG's tag site's, else the tagger's."""
    return plan.client if plan.client is not None else tagger.client


def _fail(plan: TagPlan, reason: str) -> None:
    plan.outcome.row = Row.FAILED
    plan.outcome.reason = reason
    plan.done = True


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
