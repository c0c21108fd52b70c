"""Carrying out a rewind plan: a person's act, checked again, each VM restored or untouched.

Only an approver runs a plan (:func:`approver_refusal`: the approvals' identity
rules; an agent's user or token name never qualifies). Before anything runs the
plan is rebuilt; if a fact under its id moved (the log, a checkpoint, a VPG), the
run is refused naming what moved, and nothing is done.

Per VM (the default): a journal VM restore from the rewind point, then its commit.
``failover``: a live failover of each VPG (every VM in it moves) to the earliest
rewind point among its VMs, committed with reverse protection; only for the VPGs
the person named. ``test``: a failover test of the same checkpoints instead.

A fault partway (a ZVM that stops answering, a failed task, Ctrl-C) ends the run:
the VM in hand is rolled back if its restore had started, so each VM is either
restored or untouched; the report says which (or, if even the rollback could not
be sent, that Zerto rolls an uncommitted restore back by itself). The states are
kept per plan (:mod:`.rewind_store`) for ``--resume``. Every step is a decision-log
line with ``event_type`` ``rewind.step``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..core.decision import fmt_time
from ..errors import ApiError, RecoveryError, StateError, ZertoRewindError, ZvmError
from .rewind_build import RewindPlan, VmRewind, build_plan, changed_facts, place_of
from .rewind_plan import Scope
from .rewind_store import load_run, save_run

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from ..zvm.models import Task

__all__ = ["EVENT", "Mode", "RunReport", "VmResult", "approver_refusal", "run_plan"]

EVENT = "rewind.step"
Mode = Literal["restore", "failover", "test"]
# (VM or VPG, phase, percent): what a progress display shows.
Progress = Callable[[str, str, int], None]
# The VMs about to be run, once the plan was checked again and the start logged.
Started = Callable[[list[str]], None]
_POLL_S = 0.25
_COMMIT_NONE, _SHUTDOWN = 2, 1  # failover: wait for our commit; shut the VMs down cleanly


@dataclass(frozen=True)
class VmResult:
    """What the run did to one VM."""

    vm: str
    state: str  # done | failed | skipped
    vm_state: str  # restored | untouched | unknown | failed over | test running
    why: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class RunReport:
    """The run's end: per VM, done, failed or skipped, and why."""

    plan_id: str
    mode: str
    results: list[VmResult] = field(default_factory=list)
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(r.state == "done" for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "mode": self.mode,
            "interrupted": self.interrupted,
            "results": [r.to_json() for r in self.results],
        }


def approver_refusal(settings: Settings) -> str | None:
    """Why this process's user may not run a rewind; None if they may (approvals' rules)."""
    import grp
    import os
    import pwd

    from ..core.approvals import Approver, refusal_to_approve

    # The effective uid, not $USER: the environment is the caller's to set.
    name = pwd.getpwuid(os.geteuid()).pw_name
    groups = set()
    for gid in os.getgroups():
        with contextlib.suppress(KeyError):
            groups.add(grp.getgrgid(gid).gr_name)
    config = settings.approvals
    refused = refusal_to_approve(
        Approver("unix", name, tuple(sorted(groups))),
        None,
        users=config.approver_users,
        groups=config.approver_groups,
        agent_users=config.agent_users,
        agent_principals=tuple(settings.gateway.clients),
    )
    if refused is None:
        return None
    return f"{refused}: a rewind is run by an approver, never by an agent. Nothing was changed."


def run_plan(
    zvms: Guard | ZvmClient,
    settings: Settings,
    saved: RewindPlan,
    *,
    mode: Mode = "restore",
    approver: str,
    confirmed: frozenset[str] = frozenset(),
    resume: bool = False,
    progress: Progress | None = None,
    log_path: str | None = None,
    task_wait_s: float = 600.0,
    started: Started | None = None,
) -> RunReport:
    """Run ``saved`` (see the module docstring); RecoveryError, with nothing done, if it moved.

    ``started(vms)`` is told the VMs to run once the check passed (the page shows them).
    """
    run = _Run(zvms, settings, saved, mode, approver, log_path or settings.log_path)
    run.progress, run.task_wait_s = progress, task_wait_s
    states = load_run(settings.state_dir, saved.plan_id, mode)
    if states and not resume:
        msg = (
            f"plan {saved.plan_id} was already run ({mode}): carry on with the VMs not done "
            f"with `rewind --resume {saved.plan_id}`, or build a new plan. Nothing was changed."
        )
        raise RecoveryError(msg)
    todo = {v.vm for v in saved.vms if states.get(v.vm, {}).get("state") != "done"}
    fresh = run.check(todo, resume)
    run.event("start", {"vms": sorted(todo)})
    if started is not None:
        started(sorted(todo))
    report = RunReport(saved.plan_id, mode)
    report.results += [_kept(vm, s) for vm, s in states.items() if vm not in todo]
    groups = _groups([v for v in fresh.vms if v.vm in todo], mode)
    for index, group in enumerate(groups):
        try:
            report.results += run.group(group, confirmed)
        except KeyboardInterrupt:
            report.interrupted = True
            report.results += run.interrupted(group)
        failed = report.interrupted or any(r.state == "failed" for r in report.results)
        states.update({r.vm: {"state": r.state, "why": r.why} for r in report.results})
        save_run(settings.state_dir, saved.plan_id, mode, states)
        if failed:
            report.results += _not_started(groups[index + 1 :], report)
            break
    with contextlib.suppress(StateError):
        run.event("end", {"results": [r.to_json() for r in report.results]})
    return report


def _kept(vm: str, state: dict[str, str]) -> VmResult:
    return VmResult(vm, "done", "done earlier", f"done by an earlier run: {state.get('why', '')}")


def _not_started(groups: list[list[VmRewind]], report: RunReport) -> list[VmResult]:
    stopped = "interrupted" if report.interrupted else "a step failed"
    why = f"not started: the run stopped ({stopped}); carry on with `rewind --resume`"
    return [VmResult(v.vm, "skipped", "untouched", why) for group in groups for v in group]


def _groups(vms: list[VmRewind], mode: Mode) -> list[list[VmRewind]]:
    """One group per VM for restores; one per VPG for a failover or a test."""
    if mode == "restore":
        return [[v] for v in vms]
    by_vpg: dict[str, list[VmRewind]] = {}
    for v in vms:
        by_vpg.setdefault(v.vpg_id or v.vm, []).append(v)
    return list(by_vpg.values())


class _Run:
    """One run's context: where to speak, where to log, how to show progress."""

    def __init__(
        self,
        zvms: Guard | ZvmClient,
        settings: Settings,
        saved: RewindPlan,
        mode: Mode,
        approver: str,
        log_path: str,
    ) -> None:
        self.zvms, self.settings, self.saved, self.mode = zvms, settings, saved, mode
        self.approver, self.log_path = approver, log_path
        self.progress: Progress | None = None
        self.task_wait_s = 600.0
        self.undone: VmResult | None = None  # what a rollback after Ctrl-C left

    # ------------------------------------------------------------------ checks and log

    def check(self, todo: set[str], resume: bool) -> RewindPlan:
        """The plan rebuilt now; RecoveryError naming what moved since the dry run."""
        scope = Scope.from_json(self.saved.scope)
        fresh = build_plan(self.zvms, self.settings, scope, log_path=self.log_path)
        if not resume and fresh.plan_id == self.saved.plan_id:
            return fresh
        vms = todo if resume else {v.vm for v in (*self.saved.vms, *fresh.vms)}
        moved = changed_facts(self.saved.facts, fresh.facts, vms)
        if not moved and (resume or fresh.plan_id == self.saved.plan_id):
            return fresh
        what = "; ".join(moved) or "the plan's inputs"
        self.event("refused", {"reason": f"changed since the dry run: {what}"})
        msg = (
            f"plan {self.saved.plan_id} refused: since the dry run, {what}. Nothing was "
            "changed. Build the plan again (rewind --dry-run), read it, and run the new one."
        )
        raise RecoveryError(msg)

    def event(self, step: str, extra: dict[str, Any]) -> None:
        """One decision-log line; StateError if it cannot be written (nothing runs unlogged)."""
        from ..core.decisions_log import write_record

        outcome = extra.pop("outcome", "allowed" if step != "refused" else "denied")
        record = {
            "time": fmt_time(time.time()),
            "origin": "rewind",
            "event_type": EVENT,
            "outcome": outcome,
            "decision": "rewind",
            "tool": f"rewind.{step}",
            "client": self.approver,
            "plan_id": self.saved.plan_id,
            "mode": self.mode,
            "rewound": self.saved.scope,
            "step": step,
            **extra,
        }
        write_record(self.log_path, record)

    def _step(self, step: str, v: VmRewind, checkpoint: str, **extra: Any) -> None:
        self.event(
            step,
            {
                "vms": [v.vm],
                "vpgs": [v.vpg] if v.vpg else [],
                "vpg_ids": [v.vpg_id] if v.vpg_id else [],
                "checkpoint_ids": [checkpoint],
                **extra,
            },
        )

    def _result(self, v: VmRewind, result: VmResult, checkpoint: str) -> VmResult:
        outcome = "allowed" if result.state == "done" else "error"
        with contextlib.suppress(StateError):  # the report still says it
            self._step("result", v, checkpoint, outcome=outcome, **result.to_json())
        return result

    # ------------------------------------------------------------------ one group

    def group(self, group: list[VmRewind], confirmed: frozenset[str]) -> list[VmResult]:
        blocked = [v for v in group if v.blocked]
        if blocked:
            why = "; ".join(f"{v.blocked}" for v in blocked)
            return [self._result(v, VmResult(v.vm, "skipped", "untouched", why), v.checkpoint_id)
                    for v in group]  # fmt: skip
        lead = min(group, key=lambda v: (v.checkpoint_time or "", v.checkpoint_id))
        if self.mode == "failover" and lead.vpg not in confirmed:
            why = f"VPG {lead.vpg!r} not confirmed: a failover moves every VM in it; type its name"
            return [VmResult(v.vm, "skipped", "untouched", why) for v in group]
        try:
            client = self._client(lead)
        except ZertoRewindError as exc:
            why = f"nothing was sent: the ZVM could not be asked about {lead.vm}: {exc}"
            return [self._result(v, VmResult(v.vm, "failed", "untouched", why), v.checkpoint_id)
                    for v in group]  # fmt: skip
        if self.mode == "restore":
            return [self._restore(client, lead)]
        if self.mode == "test":
            return self._test(client, group, lead)
        return self._failover(client, group, lead)

    def interrupted(self, group: list[VmRewind]) -> list[VmResult]:
        """The group's results after Ctrl-C: what the rollback left, else untouched."""
        undone, self.undone = self.undone, None
        if undone is not None:
            return [replace(undone, vm=v.vm) for v in group]
        why = "interrupted (Ctrl-C) before it ran, or while a failover or test ran"
        return [VmResult(v.vm, "failed", "unknown", why) for v in group]

    def _client(self, v: VmRewind) -> ZvmClient:
        assert v.vpg_id is not None  # a VM the ZVM did not show is blocked
        return place_of(self.zvms, self.settings, v.vm, v.vpg_id, None).client

    def follow(self, client: ZvmClient, task_id: str, label: str, phase: str) -> Task:
        """Poll the task, showing its progress, until it ends; RecoveryError if it failed."""
        deadline = time.monotonic() + self.task_wait_s
        while True:
            task = client.get_task(task_id, deadline=time.monotonic() + 30.0)
            if self.progress is not None:
                self.progress(label, phase, 100 if task.done else task.progress)
            if task.failed:
                reason = task.complete_reason or "no reason given"
                msg = f"{phase}: ZVM task {task_id} ended {task.state_name}: {reason}"
                raise RecoveryError(msg)
            if task.done:
                return task
            if time.monotonic() > deadline:
                msg = f"{phase}: ZVM task {task_id} still {task.state_name} after "
                raise RecoveryError(msg + f"{self.task_wait_s:.0f} s")
            time.sleep(_POLL_S)

    # ------------------------------------------------------------------ the operations

    def _restore(self, client: ZvmClient, v: VmRewind) -> VmResult:
        assert v.vm_id is not None  # a VM the ZVM did not show is blocked
        assert v.vpg_id is not None
        cp, committing = v.checkpoint_id, False
        try:
            self._step("restore", v, cp)
            task_id = client.restore_vm(v.vm_id, v.vpg_id, cp)
            self.follow(client, task_id, v.vm, "restore")
            self._step("commit", v, cp, task_id=task_id)
            committing = True
            task_id = client.restore_commit(v.vm_id, v.vpg_id)
            self.follow(client, task_id, v.vm, "commit")
        except KeyboardInterrupt:
            self.undone = self._undo(client, v, committing, "interrupted (Ctrl-C)")
            raise
        except (ZvmError, RecoveryError, StateError) as exc:
            return self._result(v, self._undo(client, v, committing, str(exc)), cp)
        done = VmResult(v.vm, "done", "restored", f"restored from checkpoint {cp}, committed")
        return self._result(v, done, cp)

    def _undo(self, client: ZvmClient, v: VmRewind, committing: bool, why: str) -> VmResult:
        """Roll back the VM's restore if one waits for commit; say what the VM is now."""
        assert v.vm_id is not None
        assert v.vpg_id is not None
        with contextlib.suppress(StateError):
            self._step("rollback", v, v.checkpoint_id, reason=why)
        try:
            task_id = client.restore_rollback(v.vm_id, v.vpg_id)
            self.follow(client, task_id, v.vm, "rollback")
        except ApiError as exc:
            if exc.status is not None and 400 <= exc.status < 500:  # nothing waits for commit
                if committing:
                    return VmResult(v.vm, "done", "restored", f"committed despite: {why}")
                return VmResult(v.vm, "failed", "untouched", why)
            return VmResult(v.vm, "failed", "unknown", _unknown(v, why, exc))
        except (ZvmError, RecoveryError) as exc:
            return VmResult(v.vm, "failed", "unknown", _unknown(v, why, exc))
        return VmResult(v.vm, "failed", "untouched", f"{why}; the restore was rolled back")

    def _test(self, client: ZvmClient, group: list[VmRewind], lead: VmRewind) -> list[VmResult]:
        assert lead.vpg_id is not None
        cp = lead.checkpoint_id
        vm_ids = [v.vm_id for v in group if v.vm_id]
        try:
            self._step("failover_test", lead, cp, vms_tested=[v.vm for v in group])
            task_id = client.failover_test(lead.vpg_id, cp, vm_ids)
            self.follow(client, task_id, lead.vpg or lead.vm, "failover test")
        except (ZvmError, RecoveryError) as exc:
            return [self._result(v, VmResult(v.vm, "failed", "unknown", str(exc)), cp)
                    for v in group]  # fmt: skip
        why = (
            f"failover test of VPG {lead.vpg!r} from checkpoint {cp} running: test VMs at the "
            "recovery site, production untouched; look, then stop it (zerto_stop_failover_test "
            "or the Zerto UI)"
        )
        return [self._result(v, VmResult(v.vm, "done", "test running", why), cp) for v in group]

    def _failover(self, client: ZvmClient, group: list[VmRewind], lead: VmRewind) -> list[VmResult]:
        assert lead.vpg_id is not None
        cp, vpg_id = lead.checkpoint_id, lead.vpg_id
        started = False
        try:
            self._step("failover", lead, cp, touches=lead.failover_touches)
            task_id = client.failover(
                vpg_id, cp, commit_policy=_COMMIT_NONE, shutdown_policy=_SHUTDOWN
            )
            started = True
            self.follow(client, task_id, lead.vpg or lead.vm, "failover")
            self._step("failover_commit", lead, cp, task_id=task_id)
            task_id = client.failover_commit(vpg_id, True)
            self.follow(client, task_id, lead.vpg or lead.vm, "commit")
        except KeyboardInterrupt:
            state = self._failover_undo(client, vpg_id, started)
            self.undone = VmResult(lead.vm, "failed", state, "interrupted (Ctrl-C)")
            raise
        except (ZvmError, RecoveryError, StateError) as exc:
            state = self._failover_undo(client, vpg_id, started)
            return [VmResult(v.vm, "failed", state, str(exc)) for v in group]
        why = (
            f"VPG {lead.vpg!r} failed over to checkpoint {cp} and committed with reverse "
            f"protection; it also moved {', '.join(lead.failover_touches) or 'no other VM'}"
        )
        return [self._result(v, VmResult(v.vm, "done", "failed over", why), cp) for v in group]

    def _failover_undo(self, client: ZvmClient, vpg_id: str, started: bool) -> str:
        if not started:
            return "untouched"
        try:
            task_id = client.failover_rollback(vpg_id)
            self.follow(client, task_id, vpg_id, "rollback")
        except (ZvmError, RecoveryError):
            return "unknown"
        return "untouched"


def _unknown(v: VmRewind, why: str, exc: Exception) -> str:
    return (
        f"{why}; the rollback could not be sent either ({exc}). A restore of {v.vm} from "
        f"checkpoint {v.checkpoint_id} may be waiting for commit in VPG {v.vpg!r}: its commit "
        "policy is rollback, so Zerto rolls it back by itself when its wait ends (1 h); check "
        "the VPG in the Zerto UI, then `rewind --resume`"
    )
