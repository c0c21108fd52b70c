"""The tag rules' vocabulary: the facts the executor gathers and the actions it is asked for.

:mod:`~zerto_rewind.core.tag_rules` maps facts to actions with no IO;
:class:`~zerto_rewind.core.tagging.Tagger` carries the actions out against the ZVM
and the VPG's record. Plain frozen values, so a test builds facts and compares
actions with ``==``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.settings import GuardSettings
from ..zvm.models import Checkpoint
from .decision import ToolCall
from .state import VpgRecord

__all__ = [
    "Adopt",
    "AskTask",
    "AskVpg",
    "Consumption",
    "Fail",
    "JournalAnswer",
    "KeepTagTimes",
    "Land",
    "LookUp",
    "MarkFailed",
    "MarkLanded",
    "PollAt",
    "PollFacts",
    "RequestTag",
    "TagAction",
    "TagFacts",
]


@dataclass(frozen=True)
class JournalAnswer:
    """What a journal listing said about one tag: its checkpoint, if listed, and the listing."""

    found: Checkpoint | None
    listed: tuple[Checkpoint, ...]


@dataclass(frozen=True)
class TagFacts:
    """What the executor knows as a call plans on one VPG (under the VPG's lock)."""

    record: VpgRecord  # as read, after the first look (:func:`landing_look`); never written here
    call: ToolCall
    vpg_name: str
    vms: tuple[str, ...]  # the call's VMs on this VPG; none when the catalog names the VPG
    settings: GuardSettings
    now: float  # wall clock
    remaining_s: float  # of the call's budget
    landed_now: bool = False  # the first look found the requested tag in the journal
    journal: JournalAnswer | None = None  # the answer to a LookUp of a recorded landed tag


@dataclass(frozen=True)
class PollFacts:
    """What a wait's look at the journal found for one plan's tag."""

    tag_name: str
    requested_at: float
    expected_at: float
    overdue_at: float
    task_id: str | None
    task_checked: bool  # the ZVM said how the tag's task ended (or it was asked, finished)
    vpg_checked: bool
    poll_s: float
    now: float
    found: Checkpoint | None


@dataclass(frozen=True)
class LookUp:
    """List the journal from just before ``requested_at`` for tag ``name``; plan again."""

    name: str
    requested_at: float


@dataclass(frozen=True)
class MarkLanded:
    """The record's tag ``name`` is in the journal (``checkpoint_id`` None: keep the record's)."""

    name: str
    checkpoint_id: str | None
    landed_at: float


@dataclass(frozen=True)
class MarkFailed:
    """Fail the record's tag, if it is still ``name`` (another call may have moved it on)."""

    name: str
    reason: str


@dataclass(frozen=True)
class KeepTagTimes:
    """The request times of the last minute, the record keeps for guard.max_tags_per_minute."""

    times: tuple[float, ...]


@dataclass(frozen=True)
class RequestTag:
    """Ask the ZVM for a tagged checkpoint and record it; the plan follows it."""

    name: str
    requested_at: float
    expected_at: float
    overdue_at: float
    lag_s: float
    requested_by: str


@dataclass(frozen=True)
class Adopt:
    """The plan follows the record's tag ``name``; ``done`` when it is landed and covers."""

    name: str
    done: bool = False


@dataclass(frozen=True)
class AskTask:
    """Ask the ZVM how the tag's task ``task_id`` went; its answer goes to :func:`on_task`."""

    task_id: str


@dataclass(frozen=True)
class AskVpg:
    """Read the VPG once more: did it stop taking checkpoints? Answer to :func:`on_vpg`."""


@dataclass(frozen=True)
class Land:
    """The plan's tag is in the journal as ``checkpoint_id``: confirmed; learn the lag."""

    checkpoint_id: str
    landed_at: float


@dataclass(frozen=True)
class PollAt:
    """Look at the journal again at ``at`` (wall clock)."""

    at: float


@dataclass(frozen=True)
class Fail:
    """The plan fails with ``reason`` (``bounded``: past guard.max_tags_per_minute)."""

    reason: str
    bounded: bool = False


# What the executor is asked to do: the journal and the ZVM (LookUp, RequestTag, AskTask,
# AskVpg), the VPG's record (MarkLanded, MarkFailed, KeepTagTimes) and the plan (Adopt,
# Land, PollAt, Fail).
TagAction = (
    LookUp
    | MarkLanded
    | MarkFailed
    | KeepTagTimes
    | RequestTag
    | Adopt
    | AskTask
    | AskVpg
    | Land
    | PollAt
    | Fail
)


@dataclass(frozen=True)
class Consumption:
    """Whether a plan's tag lets the call run, and whether the record counts it as a change."""

    allowed: bool
    counted: bool = False
