"""The tag rules, free of IO: facts in, actions out.

The executor, :class:`~zerto_rewind.core.tagging.Tagger`, gathers facts (the VPG's
record under its lock, the call, the clock, what the journal and the ZVM's tasks
said) and asks :func:`plan_tag` (a call plans on a VPG), :func:`after_poll` (a wait's
look at the journal), :func:`on_task` and :func:`on_vpg` (the ZVM's answers) and
:func:`consume_rule` (the call is allowed) what to do. They answer with actions
(:data:`TagAction`): look in the journal, request a tag, adopt the recorded one,
ask its task, mark it landed or failed, poll again at a time, fail the plan with a
reason. The executor does the ZVM calls and the record's writes those actions name,
and feeds what it learns back in. The preview (``recovery/preview_guard.py``) runs
the same rules through a planning executor that sends no tag request and writes
nothing, so there is one copy of the rules. The rules themselves are told in
``tagging``'s docstring.
"""

from __future__ import annotations

import time

from ..config.settings import GuardSettings
from ..zvm.models import Checkpoint, Task, Vpg, tag_refusal
from .cadence import expected_landing, overdue_after
from .decision import ToolCall, fmt_time
from .state import TagRecord, VpgRecord
from .tag_actions import (
    Adopt,
    AskTask,
    AskVpg,
    Consumption,
    Fail,
    KeepTagTimes,
    Land,
    LookUp,
    MarkFailed,
    MarkLanded,
    PollAt,
    PollFacts,
    RequestTag,
    TagAction,
    TagFacts,
)

__all__ = [
    "FAIL_OVERDUE",
    "JOIN_PENDING",
    "REQUEST_NEW",
    "REUSE_LANDED",
    "TAG_MAX",
    "after_poll",
    "cadence_window_start",
    "consume_rule",
    "covers",
    "exceeds_budget",
    "is_overdue",
    "journal_confirms",
    "known_cadence",
    "landing_due",
    "landing_lag",
    "landing_look",
    "learned_lag",
    "on_task",
    "on_vpg",
    "overdue_reason",
    "plan_action",
    "plan_tag",
    "planned_landing",
    "poll_interval",
    "request_tag",
    "tag_bound_reason",
    "tag_name",
    "task_failure",
    "unconfirmed_reason",
]

# How often a learned cadence is re-measured from the journal.
_CADENCE_TTL_S = 600.0
# Checkpoints listed when learning the cadence: this many site-cadences back.
_CADENCE_WINDOW_STEPS = 12
# The window of guard.max_tags_per_minute.
_TAG_WINDOW_S = 60.0
# What to do about a tag that never reached the journal.
_OVERDUE_ADVICE = "check that the VPG is replicating, then retry: the next call requests a new tag"

REUSE_LANDED = "reuse_landed"
JOIN_PENDING = "join_pending"
FAIL_OVERDUE = "fail_overdue"
REQUEST_NEW = "request_new"


def plan_action(record: VpgRecord, call: ToolCall, now: float) -> str:
    """What a plan does on this VPG at ``now``: reuse a landed tag that covers the call, join
    a requested tag until it is overdue, fail it once overdue, else request a new tag."""
    tag = record.tag
    if tag is not None and covers(record, tag, call):
        return REUSE_LANDED
    if tag is not None and tag.state == "requested":
        return FAIL_OVERDUE if is_overdue(tag.overdue_at, now) else JOIN_PENDING
    return REQUEST_NEW


def covers(record: VpgRecord, tag: TagRecord, call: ToolCall) -> bool:
    """A landed tag covers a call that started before it landed (it waited for it), or any
    call while no mutating call on the VPG has been allowed since it landed."""
    if tag.state != "landed" or tag.landed_at is None:
        return False
    return record.allowed_since_landing == 0 or call.started_at <= tag.landed_at


def journal_confirms(
    tag: TagRecord, found: Checkpoint, listed: list[Checkpoint], prefix: str
) -> bool:
    """Whether the journal bears out a recorded landed tag: the checkpoint carrying its name
    is the one recorded (when one is), and no later checkpoint carries another guard tag
    (a later tag means calls were allowed since, whatever the record says)."""
    if tag.checkpoint_id is not None and found.cp_id != tag.checkpoint_id:
        return False
    return not any(
        c.tag
        and c.tag != tag.name
        and c.tag.startswith(prefix + " ")
        and c.timestamp > found.timestamp
        for c in listed
    )


def is_overdue(overdue_at: float, now: float) -> bool:
    """A requested tag is failed once ``now`` is past its overdue time (joined until then)."""
    return now > overdue_at


def landing_due(record: VpgRecord, tag: TagRecord, now: float) -> bool:
    """Whether a requested tag may be listable by now: from its journal boundary on (the
    expected landing less the VPG's learned lag); before that nobody looks."""
    return now >= tag.expected_at - (record.lag_s or 0.0)


def landing_lag(record: VpgRecord, settings: GuardSettings) -> float:
    """Boundary to listable: the VPG's learned lag, else ``guard.landing_allowance_s``."""
    return record.lag_s if record.lag_s is not None else settings.landing_allowance_s


def planned_landing(
    requested_at: float,
    last_checkpoint_at: float | None,
    cadence: float,
    lag: float,
    settings: GuardSettings,
) -> tuple[float, float]:
    """(expected landing, overdue time) of a tag requested at ``requested_at``."""
    expected = expected_landing(requested_at, last_checkpoint_at, cadence, lag)
    overdue = overdue_after(
        expected, cadence, factor=settings.overdue_factor, minimum_s=settings.overdue_min_s
    )
    return expected, overdue


def exceeds_budget(expected_at: float, now: float, remaining_s: float) -> bool:
    """The tag is expected later than the time left: answer *pending* at once, unwaited."""
    return expected_at - now > remaining_s


def overdue_reason(tag: TagRecord) -> str:
    """Why an overdue tag is failed."""
    return (
        f"tag {tag.name!r} requested at {fmt_time(tag.requested_at)} never reached the journal "
        f"(expected by {fmt_time(tag.expected_at)}; overdue since {fmt_time(tag.overdue_at)})"
    )


def tag_bound_reason(bound: int, recent: list[float], now: float) -> str:
    """Why a call is refused past ``guard.max_tags_per_minute``, and when a tag is possible."""
    next_at = sorted(recent)[len(recent) - bound] + _TAG_WINDOW_S
    return (
        f"zerto-rewind already requested {len(recent)} checkpoint tags on this VPG in the last "
        f"minute, its bound (guard.max_tags_per_minute: {bound}), so it requests no more for "
        f"now; the next tag is possible from {fmt_time(max(next_at, now))}"
    )


def task_failure(task: Task, task_id: str) -> str | None:
    """The reason to fail a tag whose ZVM task failed, with its CompleteReason; else None."""
    if not task.failed:
        return None
    reason = task.complete_reason or f"the ZVM task {task_id} failed without a reason"
    return f"the ZVM refused the tag: {reason}"


def known_cadence(
    record: VpgRecord, vpg_name: str, settings: GuardSettings, now: float
) -> tuple[float, str] | None:
    """The cadence to plan with when the record's is still good, else None: measure again.

    Re-measured when older than ten minutes, while only the site default is known (the
    journal may have grown enough checkpoints to observe by now), or when a config
    override appeared or went away. A config override always wins.
    """
    source, cadence = record.cadence_source, record.cadence_s
    if source is None or source.startswith("site:") or cadence is None:
        return None  # never measured, or only the site default is known so far
    learned_at = record.cadence_learned_at
    stale = learned_at is None or now - learned_at > _CADENCE_TTL_S
    override_changed = (source == "config") != (vpg_name in settings.cadence_s)
    if stale or override_changed:
        return None
    if vpg_name in settings.cadence_s:
        return settings.cadence_s[vpg_name], "config"
    return cadence, source


_TAG_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ._:=,-")
TAG_MAX = 100


def tag_name(prefix: str, call: ToolCall, vms: tuple[str, ...], now: float) -> str:
    """A readable, traceable tag: prefix, tool, VM(s), short session id (if any), UTC time.

    Within TAG_MAX the session id and the time always survive (they make the
    tag unique); the VM list and then the tool name are shortened instead.
    """
    tool = call.tool_name.removeprefix("mcp__").replace("__", ".")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    # No session id (a caller that has none): no session part, rather than a fake one.
    tail = f"s={call.session_id[:8]} {stamp}" if call.session_id else stamp
    room = TAG_MAX - len(prefix) - len(tail) - 3  # three separating spaces
    vm_text = ",".join(vms)
    vm_room = max(8, room - len(tool))
    vm_text = _shorten(vm_text, vm_room)
    tool = _shorten(tool, max(0, room - len(vm_text)))
    text = " ".join(part for part in (prefix, tool, vm_text, tail) if part)
    cleaned = "".join(ch if ch in _TAG_SAFE else "_" for ch in text)
    return cleaned[-TAG_MAX:] if len(cleaned) > TAG_MAX else cleaned


def _shorten(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    return text[: max(0, room - 3)] + "..." if room > 3 else text[:room]


# ---------------------------------------------------------------------- planning a call


def plan_tag(facts: TagFacts) -> list[TagAction]:
    """Reuse a landed tag that covers the call (once the journal bears it out), join a
    requested one, fail it once overdue, else request a new tag (within the bound)."""
    record, tag = facts.record, facts.record.tag
    action = plan_action(record, facts.call, facts.now)
    if action == REUSE_LANDED and tag is not None and not facts.landed_now:
        # The state directory is the agent's to write: no allow on the record alone.
        if facts.journal is None:
            return [LookUp(tag.name, tag.requested_at)]
        found = facts.journal.found
        prefix = facts.settings.tag_prefix
        if found is None or not journal_confirms(tag, found, list(facts.journal.listed), prefix):
            return [MarkFailed(tag.name, unconfirmed_reason(tag)), *request_tag(facts)]
        # The journal's time, not the record's.
        landed = MarkLanded(tag.name, None, found.timestamp.timestamp())
        return [landed, Adopt(tag.name, done=True)]
    if action == REUSE_LANDED and tag is not None:
        return [Adopt(tag.name, done=True)]
    if action == REQUEST_NEW or tag is None:
        return request_tag(facts)
    if action == FAIL_OVERDUE:
        reason = overdue_reason(tag)
        return [MarkFailed(tag.name, reason), Adopt(tag.name), Fail(f"{reason}; {_OVERDUE_ADVICE}")]
    joined: list[TagAction] = [Adopt(tag.name)]
    if tag.task_id is not None and exceeds_budget(tag.expected_at, facts.now, facts.remaining_s):
        # Nobody polls a tag this call will not wait for: ask its task now.
        joined.append(AskTask(tag.task_id))
    return joined


def request_tag(facts: TagFacts) -> list[TagAction]:
    """A new tag's request, planned from the VPG's cadence and lag; past
    ``guard.max_tags_per_minute``, a failed plan that says when a tag is possible."""
    record, now, settings = facts.record, facts.now, facts.settings
    recent = tuple(t for t in record.tag_times if t > now - _TAG_WINDOW_S)
    bound = settings.max_tags_per_minute
    if bound is not None and len(recent) >= bound:
        return [KeepTagTimes(recent), Fail(tag_bound_reason(bound, list(recent), now), True)]
    lag = landing_lag(record, settings)
    cadence = record.cadence_s or 630.0
    expected, overdue = planned_landing(now, record.last_checkpoint_at, cadence, lag, settings)
    named = facts.vms or (facts.vpg_name,)  # a VPG the catalog names
    request = RequestTag(
        name=tag_name(settings.tag_prefix, facts.call, named, now),
        requested_at=now,
        expected_at=expected,
        overdue_at=overdue,
        lag_s=lag,
        requested_by=f"{facts.call.tool_name} {','.join(facts.vms)}",
    )
    return [KeepTagTimes((*recent, now)), request]


def unconfirmed_reason(tag: TagRecord) -> str:
    """Why a recorded landed tag the journal does not bear out is failed, not reused."""
    return (
        f"tag {tag.name!r} is recorded as landed, but the ZVM journal does not confirm it "
        "as the VPG's latest guard checkpoint; not reused"
    )


def landing_look(record: VpgRecord, now: float) -> LookUp | None:
    """A retry's first question, once the record's requested tag is due
    (:func:`landing_due`): is it in the journal? None: nothing to ask."""
    tag = record.tag
    if tag is None or tag.state != "requested" or not landing_due(record, tag, now):
        return None
    return LookUp(tag.name, tag.requested_at)


def cadence_window_start(site_kind: str, settings: GuardSettings, now: float) -> float:
    """Where the journal is listed from to learn a VPG's cadence: twelve site-cadences back."""
    site_default = settings.site_cadence_s.get(site_kind, 630.0)
    return now - site_default * _CADENCE_WINDOW_STEPS


def poll_interval(cadence_s: float | None) -> float:
    """How often a wait looks at the journal: a twentieth of the cadence, 0.1 to 2 s."""
    return min(2.0, max(0.1, (cadence_s or 5.0) / 20))


# ---------------------------------------------------------------------- waiting


def after_poll(facts: PollFacts) -> list[TagAction]:
    """What a wait does after a look at the journal: land, fail an overdue tag, ask the
    ZVM about a late one (its task, then its VPG, once each), or look again later."""
    if facts.found is not None:
        return [Land(facts.found.cp_id, facts.found.timestamp.timestamp())]
    if is_overdue(facts.overdue_at, facts.now):
        ours = TagRecord(facts.tag_name, facts.requested_at, facts.expected_at, facts.overdue_at)
        reason = overdue_reason(ours)
        # Failed in the record only while the record still holds it; the plan fails anyway,
        # or the wait would poll it again at once, until the deadline.
        return [MarkFailed(facts.tag_name, reason), Fail(f"{reason}; {_OVERDUE_ADVICE}")]
    steps: list[TagAction] = []
    if facts.now > facts.expected_at:
        if facts.task_id is not None and not facts.task_checked:
            steps.append(AskTask(facts.task_id))
        if not facts.vpg_checked:
            steps.append(AskVpg())
    return [*steps, PollAt(facts.now + facts.poll_s)]


def on_task(task: Task, task_id: str, name: str) -> list[TagAction]:
    """The ZVM's answer about tag ``name``'s task: a failed task fails the tag, for all."""
    reason = task_failure(task, task_id)
    return [MarkFailed(name, reason), Fail(reason)] if reason else []


def on_vpg(vpg: Vpg, name: str) -> list[TagAction]:
    """A VPG read during a late tag's wait: one that stopped taking checkpoints lost it."""
    refusal = tag_refusal(vpg)
    if not refusal:
        return []
    reason = f"{refusal} (it stopped taking checkpoints while tag {name!r} was pending)"
    return [MarkFailed(name, reason), Fail(reason)]


def learned_lag(expected_at: float, lag_used_s: float, landed_at: float, cadence: float) -> float:
    """A VPG's landing lag from one landing: boundary to listable, within its cadence."""
    boundary = expected_at - lag_used_s
    return min(max(landed_at - boundary, 0.0), cadence)


# ---------------------------------------------------------------------- consuming


def consume_rule(
    record: VpgRecord, name: str, landed_at: float | None, call: ToolCall
) -> Consumption:
    """Whether tag ``name`` (landed at ``landed_at``) still lets ``call`` run: while the record
    holds it, by :func:`covers`, and the call counts; once replaced, only for a call that
    started by its landing (it waited for it)."""
    tag = record.tag
    if tag is not None and tag.name == name:
        return (
            Consumption(allowed=True, counted=True)
            if covers(record, tag, call)
            else Consumption(False)
        )
    return Consumption(allowed=landed_at is not None and call.started_at <= landed_at)
