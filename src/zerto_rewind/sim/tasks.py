"""ZVM tasks: created by an operation, finished lazily when someone reads them."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field

from zerto_rewind.sim.enums import TASK_COMPLETED, TASK_FAILED, TASK_IN_PROGRESS

_generation = itertools.count(1)


@dataclass
class Task:
    """One task; its state at any time follows from ``started`` and ``duration``."""

    identifier: str
    type: str
    started: float
    duration: float
    vpg_ids: tuple[str, ...]
    site_id: str
    fail_reason: str | None = None
    initiated_by: str = "admin"
    generation: int = field(default_factory=lambda: next(_generation))

    def state_at(self, now: float) -> tuple[int, int, float | None]:
        """``(State, Progress, Completed)`` as seen at ``now``."""
        elapsed = now - self.started
        if elapsed < self.duration:
            progress = int(100 * elapsed / self.duration) if self.duration > 0 else 0
            return TASK_IN_PROGRESS, min(progress, 99), None
        done = self.started + self.duration
        if self.fail_reason is not None:
            return TASK_FAILED, 100, done
        return TASK_COMPLETED, 100, done

    def complete_reason(self, now: float) -> str:
        """Empty while running; the failure text or empty once done."""
        state, _, _ = self.state_at(now)
        return self.fail_reason or "" if state == TASK_FAILED else ""


class TaskBook:
    """All tasks of one simulator run, by identifier."""

    def __init__(self, site_id: str) -> None:
        self.site_id = site_id
        self.tasks: dict[str, Task] = {}

    def create(
        self,
        *,
        kind: str,
        now: float,
        duration: float,
        vpg_ids: tuple[str, ...],
        fail_reason: str | None = None,
        initiated_by: str = "admin",
    ) -> Task:
        """Record a new task and return it."""
        identifier = f"{uuid.uuid4()}.{self.site_id}"
        task = Task(
            identifier, kind, now, duration, vpg_ids, self.site_id, fail_reason, initiated_by
        )
        self.tasks[identifier.lower()] = task
        return task

    def get(self, identifier: str) -> Task | None:
        """A task by identifier (case-insensitive, as ZVM routes are)."""
        return self.tasks.get(identifier.lower())
