"""One VPG's plan in a call, and what a tag rule's action writes on it and on the record.

No IO: the :class:`~zerto_rewind.core.tagging.Tagger` calls these under the VPG's
lock (the record) or on its own plan, once it has done the ZVM's part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .decision import Row, VpgOutcome
from .state import VpgRecord
from .tag_actions import Fail, KeepTagTimes, Land, MarkFailed, MarkLanded, PollAt, TagAction

if TYPE_CHECKING:
    from ..zvm.client import ZvmClient

__all__ = [
    "TagPlan",
    "apply_to_plan",
    "apply_to_record",
    "fail_plan",
    "mark_landed",
    "writes_record",
]


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


def writes_record(action: TagAction) -> bool:
    """Whether ``action`` writes the VPG's record (so runs under its lock)."""
    return isinstance(action, Land | MarkFailed | MarkLanded | KeepTagTimes)


def apply_to_record(record: VpgRecord, action: TagAction) -> None:
    """The record's part of ``action``; a tag another call moved on from is left alone."""
    tag = record.tag
    if isinstance(action, KeepTagTimes):
        record.tag_times = list(action.times)
    elif isinstance(action, MarkLanded):
        mark_landed(record, action)
    elif isinstance(action, MarkFailed) and tag is not None and tag.name == action.name:
        tag.state, tag.reason = "failed", action.reason


def mark_landed(record: VpgRecord, action: MarkLanded) -> None:
    tag = record.tag
    if tag is None or tag.name != action.name:
        return
    if action.checkpoint_id is None:
        tag.landed_at = action.landed_at  # confirmed by the journal: its time, the rest stays
    else:
        tag.mark_landed(action.checkpoint_id, action.landed_at)


def apply_to_plan(plan: TagPlan, action: TagAction) -> None:
    """The plan's part of ``action``: fail it, or set its next look at the journal."""
    if isinstance(action, Fail):
        plan.outcome.bounded = plan.outcome.bounded or action.bounded
        fail_plan(plan, action.reason)
    elif isinstance(action, PollAt):
        plan.next_poll_at = action.at


def fail_plan(plan: TagPlan, reason: str) -> None:
    plan.outcome.row = Row.FAILED
    plan.outcome.reason = reason
    plan.done = True
