"""``zerto-rewind tag``'s progress on stderr: each VPG against its expected landing time.

On a terminal, a rich progress bar per VPG (elapsed over expected seconds). Otherwise
(a pipe, a log, CI) plain lines: one when each VPG starts waiting, then one every
``every_s`` seconds and one when it lands, so a long wait is never silent.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["TagProgress"]


class TagProgress:
    """Context manager; :meth:`update` after each poll, :meth:`landed` once it landed."""

    def __init__(
        self,
        err: Console,
        vm: str,
        *,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.err = err
        self.vm = vm
        self.every_s = every_s
        self.clock = clock
        self._bars: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._said: dict[str, float] = {}

    def __enter__(self) -> TagProgress:
        if self.err.is_terminal:
            self._bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[waited]:.0f} s of ~{task.total:.0f} s"),
                TimeElapsedColumn(),
                console=self.err,
                transient=False,
            )
            self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._bars.stop()

    def update(self, vpg: str, waited_s: float, expected_s: float, what: str) -> None:
        """``vpg`` has waited ``waited_s`` of about ``expected_s``; ``what`` it waits for."""
        label = f"VM {self.vm}, VPG {vpg}: {what}"
        if self._bars is not None:
            task = self._tasks.get(vpg)
            if task is None:
                task = self._bars.add_task(escape(label), total=max(expected_s, 1.0), waited=0.0)
                self._tasks[vpg] = task
            total = max(expected_s, waited_s, 1.0)
            self._bars.update(
                task, description=escape(label), completed=waited_s, total=total, waited=waited_s
            )
            return
        now = self.clock()
        last = self._said.get(vpg)
        if last is not None and now - last < self.every_s:
            return
        self._said[vpg] = now
        late = " (later than expected)" if waited_s > expected_s else ""
        self.err.print(
            f"{label}, {waited_s:.0f} s of ~{expected_s:.0f} s expected{late}",
            highlight=False,
            markup=False,
        )

    def landed(self, vpg: str, waited_s: float) -> None:
        """The tag is listed on ``vpg``."""
        if self._bars is not None:
            task = self._tasks.get(vpg)
            if task is not None:
                self._bars.update(task, completed=self._bars.tasks[task].total, waited=waited_s)
            return
        self.err.print(
            f"VM {self.vm}, VPG {vpg}: the tag landed after {waited_s:.0f} s",
            highlight=False,
            markup=False,
        )
