"""The approvals page's rewinds: each runs in the gateway process, in a thread of its own.

A person starts a plan on the page (``rewind_web``); :class:`PageRuns` runs it with
:func:`~zerto_rewind.recovery.rewind_run.run_plan`, the CLI's own run: the plan is
rebuilt and compared first (anything that moved refuses it, nothing is done), each
step is a decision-log line naming the approver, and a fault partway leaves each VM
restored or untouched, with the states kept for a resume. This module only holds
what the page shows while it runs: per VM (or VPG) the ZVM task's phase and
percent, then the report, or why it was refused.

One run at a time per plan: a second start of a plan while one runs is refused.
Runs are kept in this process's memory; a finished run's states are also on disk
(``rewind_store``), so a resume works after a restart.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ZertoRewindError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..recovery.rewind_build import RewindPlan
    from ..recovery.rewind_run import Mode, RunReport
    from ..zvm.client import ZvmClient

__all__ = ["ACTIVE", "MODES", "PageRun", "PageRuns", "Step"]

log = logging.getLogger("zerto_rewind.gateway")

MODES: tuple[Mode, ...] = ("restore", "test", "failover")
# checking: the plan is rebuilt and compared; running: the start is logged, VMs run.
ACTIVE = ("checking", "running")
_KEPT = 100  # finished runs remembered for the page, oldest dropped first


@dataclass(frozen=True)
class Step:
    """Where one VM (or VPG, for a failover or a test) is: the ZVM task's phase and percent."""

    label: str
    phase: str
    percent: int


@dataclass
class PageRun:
    """One run started on the page, as the page shows it."""

    plan_id: str
    mode: Mode
    approver: str
    resume: bool
    started_at: float
    state: str = "checking"  # checking | running | finished | refused | stopped
    steps: dict[str, Step] = field(default_factory=dict)
    report: RunReport | None = None
    error: str | None = None
    seq: int = 0

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def version(self) -> str:
        """Changes whenever the page would: its script redraws when it does."""
        return f"{self.state}-{self.seq}"


class PageRuns:
    """The page's rewinds, over the gateway's ZVMs; each run in a daemon thread."""

    def __init__(self, settings: Settings, zvms: Guard | ZvmClient) -> None:
        self.settings = settings
        self.zvms = zvms
        self._lock = threading.Lock()
        self._runs: dict[str, PageRun] = {}
        self.task_wait_s = 600.0

    def get(self, plan_id: str) -> PageRun | None:
        """A copy of the plan's latest run in this process (None: none since it started)."""
        with self._lock:
            found = self._runs.get(plan_id)
            return copy.deepcopy(found) if found is not None else None

    def start(
        self,
        plan: RewindPlan,
        mode: Mode,
        approver: str,
        confirmed: frozenset[str],
        *,
        resume: bool,
    ) -> str | None:
        """Start ``plan`` in the background; why not (one runs already), else None."""
        run = PageRun(plan.plan_id, mode, approver, resume, time.time())
        with self._lock:
            running = self._runs.get(plan.plan_id)
            if running is not None and running.active:
                return (
                    f"plan {plan.plan_id} is already being run ({running.mode}, started by "
                    f"{running.approver}); a second start waits until it ends. Nothing was started."
                )
            self._runs.pop(plan.plan_id, None)
            self._runs[plan.plan_id] = run
            while len(self._runs) > _KEPT:
                oldest = next(iter(self._runs))
                if self._runs[oldest].active:
                    break
                del self._runs[oldest]
        worker = threading.Thread(
            target=self._work, args=(run, plan, confirmed), name=f"rewind-{plan.plan_id}"
        )
        worker.daemon = True  # a stopped gateway leaves uncommitted restores to Zerto's rollback
        worker.start()
        return None

    def _work(self, run: PageRun, plan: RewindPlan, confirmed: frozenset[str]) -> None:
        from ..recovery.rewind_run import run_plan

        try:
            report = run_plan(
                self.zvms, self.settings, plan, mode=run.mode, approver=run.approver,
                confirmed=confirmed, resume=run.resume, task_wait_s=self.task_wait_s,
                progress=lambda label, phase, percent: self._progress(run, label, phase, percent),
                started=lambda vms: self._started(run, vms),
            )  # fmt: skip
        except ZertoRewindError as exc:  # refused before anything ran (moved, already run…)
            self._end(run, "refused", error=str(exc))
        except Exception as exc:  # a thread's end must reach the page, whatever it was
            log.warning("rewind %s stopped: %s", run.plan_id, type(exc).__name__)
            why = (
                f"the run stopped on an error in the gateway ({type(exc).__name__}); what each "
                "VM is now is in the decision log (rewind.step lines) and the resume below"
            )
            self._end(run, "stopped", error=why)
        else:
            self._end(run, "finished", report=report)

    def _started(self, run: PageRun, vms: list[str]) -> None:
        with self._lock:
            run.state = "running"
            if run.mode == "restore":  # a failover or a test shows its progress per VPG
                for vm in vms:
                    run.steps.setdefault(vm, Step(vm, "waiting", 0))
            run.seq += 1

    def _progress(self, run: PageRun, label: str, phase: str, percent: int) -> None:
        with self._lock:
            run.state = "running"
            run.steps[label] = Step(label, phase, max(0, min(100, int(percent))))
            run.seq += 1

    def _end(
        self, run: PageRun, state: str, *, error: str | None = None, report: RunReport | None = None
    ) -> None:
        with self._lock:
            run.state, run.error, run.report = state, error, report
            run.seq += 1
