"""The tag rules: pure functions of a VPG's record, a call and the clock.

No IO here: the :class:`~zerto_rewind.core.tagging.Tagger` asks the ZVM and acts
on these rules; ``recovery/preview.py`` predicts with them (no side effects), so
there is one copy of the rules. The rules themselves are told in ``tagging``'s
docstring.
"""

from __future__ import annotations

import time

from ..config.settings import GuardSettings
from ..zvm.models import Checkpoint, Task
from .cadence import expected_landing, overdue_after
from .decision import ToolCall, fmt_time
from .state import TagRecord, VpgRecord

__all__ = [
    "FAIL_OVERDUE",
    "JOIN_PENDING",
    "REQUEST_NEW",
    "REUSE_LANDED",
    "TAG_MAX",
    "covers",
    "exceeds_budget",
    "is_overdue",
    "journal_confirms",
    "known_cadence",
    "landing_due",
    "landing_lag",
    "overdue_reason",
    "plan_action",
    "planned_landing",
    "tag_bound_reason",
    "tag_name",
    "task_failure",
]

# How often a learned cadence is re-measured from the journal.
_CADENCE_TTL_S = 600.0
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
