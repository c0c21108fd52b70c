"""ZVM tasks: created by an operation, finished lazily when someone reads them."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
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
    # Work done outside the simulator (a vCenter link putting a VM back): None while it runs,
    # then (when it finished, why it failed or None). The task runs at least ``duration``.
    waits_for: Callable[[], tuple[float, str | None] | None] | None = None

    def _end(self) -> tuple[float | None, str | None]:
        """When the task is done (None: not known yet) and why it failed."""
        done = self.started + self.duration
        if self.waits_for is None:
            return done, self.fail_reason
        outcome = self.waits_for()
        if outcome is None:
            return None, None
        finished, failure = outcome
        return max(done, finished), failure

    def state_at(self, now: float) -> tuple[int, int, float | None]:
        """``(State, Progress, Completed)`` as seen at ``now``."""
        done, failure = self._end()
        if done is None or now < done:
            elapsed = now - self.started
            progress = int(100 * elapsed / self.duration) if self.duration > 0 else 0
            return TASK_IN_PROGRESS, min(progress, 99), None
        if failure is not None:
            return TASK_FAILED, 100, done
        return TASK_COMPLETED, 100, done

    def complete_reason(self, now: float) -> str:
        """Empty while running; the failure text or empty once done."""
        state, _, _ = self.state_at(now)
        return self._end()[1] or "" if state == TASK_FAILED else ""


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
