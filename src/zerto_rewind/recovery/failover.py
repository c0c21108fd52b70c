"""Bringing a VM back to a checkpoint: the shared pieces and the failover test.

Zerto never rolls the production VM back in place. Every journal recovery
creates VMs from the replica at the recovery site: a *failover test* (test VMs
on an isolated network, production untouched), a *live failover* (the VPG's VMs
come up at the recovery site from the checkpoint; production downtime), or a
*journal VM restore* (one VM recreated from the checkpoint). Rewinding "in
place" means failover with reverse protection, then a move back.

This module holds what every operation shares (the result models, the
checkpoint lookup, :class:`Target`) and the non-disruptive failover test.
:mod:`~zerto_rewind.recovery.plan` says which operations fit, read-only;
:mod:`~zerto_rewind.recovery.live` runs the live ones behind
``recovery.allow_live`` and the confirm rule.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..core.decision import fmt_time
from ..errors import RecoveryError, UsageError, ZvmError, ZvmTimeout
from .protection import CheckpointInfo, select_ref

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from ..zvm.models import Checkpoint, Task, VmRef, Vpg
    from .sites import Purpose

__all__ = [
    "CONFIRM_FORMAT",
    "TASK_WAIT_S",
    "OperationResult",
    "RecoveryStep",
    "confirm_token",
    "find_checkpoint",
    "start_failover_test",
    "stop_failover_test",
]

CONFIRM_FORMAT = "<vm>@<checkpoint>"
# Checkpoints are first looked for this far back, then in the whole journal.
_RECENT_S = 6 * 3600.0
_NEAREST = 5
TASK_WAIT_S = 60.0
_POLL_S = 0.25


# ---------------------------------------------------------------- result models


class RecoveryStep(BaseModel):
    """One thing to run: an MCP tool call, and the CLI command where one exists."""

    tool: str | None = Field(description="the MCP tool to call")
    arguments: dict[str, Any] = Field(description="its arguments")
    cli: str | None = Field(default=None, description="the zerto-rewind command, if any")
    note: str = Field(description="what the step does")


class OperationResult(BaseModel):
    """What a recovery operation did, and what to do next."""

    operation: str
    vm: str
    vpg: str
    vpg_id: str
    checkpoint: CheckpointInfo | None
    task_id: str
    task_state: str = Field(description="COMPLETED, FAILED, IN_PROGRESS, ... or UNKNOWN")
    task_progress: int | None
    task_complete_reason: str | None
    vpg_status: str | None
    vpg_sub_status: str | None
    failover_test_running: bool | None
    summary: str
    next_steps: list[RecoveryStep]
    zvm_site: str | None = Field(
        default=None,
        description="the estate's site whose ZVM ran the operation (several ZVMs; recovery.via)",
    )
    zvm_url: str | None = Field(default=None, description="the ZVM that ran the operation")


# ---------------------------------------------------------------- shared pieces


def confirm_token(vm: str, checkpoint: str) -> str:
    """The exact ``confirm`` value live recovery wants: ``"<vm>@<checkpoint>"``."""
    return f"{vm}@{checkpoint}"


def find_checkpoint(
    client: ZvmClient,
    vpg_id: str,
    vpg_name: str,
    checkpoint_id: str,
    *,
    deadline: float | None = None,
    now: float | None = None,
) -> Checkpoint:
    """The checkpoint in the VPG's journal; UsageError naming the nearest tagged ones if absent."""
    now = time.time() if now is None else now
    since = datetime.fromtimestamp(now - _RECENT_S, UTC)
    listed = client.list_checkpoints(vpg_id, since=since, deadline=deadline)
    found = _match(listed, checkpoint_id)
    # Look in the whole journal only if it may reach back past the window.
    reaches_back = not listed or listed[0].timestamp.timestamp() - since.timestamp() < 120
    if found is None and reaches_back:
        listed = client.list_checkpoints(vpg_id, deadline=deadline)
        found = _match(listed, checkpoint_id)
    if found is not None:
        return found
    msg = (
        f"checkpoint {checkpoint_id!r} is not in the journal of VPG {vpg_name!r} (it may have "
        f"aged out of the journal history). {_nearest_text(listed, checkpoint_id)} "
        "List more with zerto_list_checkpoints(vm=..., tagged_only=true, since='1d')."
    )
    raise UsageError(msg)


def _match(listed: list[Checkpoint], checkpoint_id: str) -> Checkpoint | None:
    return next((c for c in listed if c.cp_id == checkpoint_id), None)


def _nearest_text(listed: list[Checkpoint], checkpoint_id: str) -> str:
    tagged = [c for c in listed if c.tag]
    if not tagged:
        return "The journal holds no tagged checkpoints."
    if checkpoint_id.isdigit():
        wanted = int(checkpoint_id)
        tagged.sort(key=lambda c: abs(int(c.cp_id) - wanted) if c.cp_id.isdigit() else 1 << 62)
    else:
        tagged.reverse()
    shown = "; ".join(
        f"{c.cp_id} at {fmt_time(c.timestamp.timestamp())} tagged {c.tag!r}"
        for c in tagged[:_NEAREST]
    )
    return f"Nearest tagged checkpoints: {shown}."


class Target:
    """The VM, its VPG (picked by ``vpg`` when several), the ZVM to speak to about it and
    the VPG's current state.

    ``zvms`` is the guard (the estate: the VPG is handled on the site
    :func:`~zerto_rewind.recovery.sites.locate` picks for ``purpose``) or one ZVM's client.
    """

    def __init__(
        self,
        zvms: Guard | ZvmClient,
        vm: str,
        vpg: str | None,
        deadline: float | None,
        wait_s: float = TASK_WAIT_S,
        *,
        purpose: Purpose = "recover",
        settings: Settings | None = None,
    ) -> None:
        from .sites import locate

        self.vm, self.deadline, self.wait_s = vm, deadline, wait_s
        self.located = locate(zvms, vm, deadline=deadline, purpose=purpose, settings=settings)
        self.refs = self.located.refs
        self.located.require_choice(vpg)
        self.ref: VmRef = select_ref(self.refs, vm, vpg)
        place = self.located.place(self.ref.vpg_id)
        self.client: ZvmClient = place.client
        self.site = place.site if self.located.several_sites else None
        self.zvm_url = place.url
        self.vpg: Vpg = self.client.get_vpg(self.ref.vpg_id, deadline=deadline)

    def where(self) -> str:
        """The ZVM this target is handled on, as a summary names it."""
        if self.site is None:
            return f"the ZVM at {self.zvm_url}"
        return f"the ZVM of site {self.site} ({self.zvm_url})"

    def args(self, **extra: Any) -> dict[str, Any]:
        """Tool arguments naming this VM (and its VPG when the VM is in several)."""
        base: dict[str, Any] = {"vm": self.vm}
        if len(self.refs) > 1:
            base["vpg"] = self.vpg.name
        return {**base, **extra}

    def checkpoint(self, checkpoint_id: str) -> Checkpoint:
        """The checkpoint in this VPG's journal, or UsageError."""
        v = self.vpg
        return find_checkpoint(self.client, v.vpg_id, v.name, checkpoint_id, deadline=self.deadline)

    def result(
        self,
        operation: str,
        task_id: str,
        checkpoint: Checkpoint | None,
        summary: str,
        steps: list[RecoveryStep] | None = None,
    ) -> OperationResult:
        """Follow the task (bounded), re-read the VPG; RecoveryError if the task failed."""
        task = _follow(self.client, task_id, self.wait_s)
        if task is not None and task.failed:
            reason = task.complete_reason or "no reason given"
            msg = (
                f"{operation} on VPG {self.vpg.name!r}: ZVM task {task_id} ended "
                f"{task.state_name}: {reason}. Check the VPG with "
                f"zerto_protection_status(vm={self.vm!r})."
            )
            raise RecoveryError(msg)
        vpg = self.client.get_vpg(self.vpg.vpg_id, deadline=time.monotonic() + 30.0)
        if task is not None and not task.done:
            summary += f" The ZVM task is still {task.state_name} after {self.wait_s:.0f} s."
        if self.site is not None:
            summary += f" Run through {self.where()}."
        return OperationResult(
            operation=operation,
            vm=self.vm,
            vpg=vpg.name,
            vpg_id=vpg.vpg_id,
            checkpoint=CheckpointInfo.of(checkpoint) if checkpoint else None,
            task_id=task_id,
            task_state=task.state_name if task else "UNKNOWN",
            task_progress=task.progress if task else None,
            task_complete_reason=task.complete_reason if task else None,
            vpg_status=vpg.status_text,
            vpg_sub_status=vpg.sub_status_text,
            failover_test_running=vpg.failover_test_running,
            summary=summary,
            next_steps=steps or [],
            zvm_site=self.site,
            zvm_url=self.zvm_url,
        )


def step(tool: str, arguments: dict[str, Any], note: str, cli: str | None = None) -> RecoveryStep:
    """One next step: the MCP tool call, its note and the CLI command if there is one."""
    return RecoveryStep(tool=tool, arguments=arguments, cli=cli, note=note)


def recovery_site(v: Vpg) -> str:
    """The VPG's recovery site by name, for summaries."""
    return v.recovery_site_name or "the recovery site"


def failover_finish_steps(target: Target, token: str) -> list[RecoveryStep]:
    """The next steps after a live failover: commit with reverse protection, or roll back."""
    return [
        step("zerto_failover_commit", target.args(confirm=token, reverse_protection=True),
             "keep the recovered VMs; reverse protection replicates them back"),
        step("zerto_failover_rollback", target.args(confirm=token),
             "or undo the failover: the recovered VMs are removed"),
    ]  # fmt: skip


def restore_finish_steps(target: Target, token: str) -> list[RecoveryStep]:
    """The next steps after a journal VM restore: commit or roll back."""
    return [
        step("zerto_restore_commit", target.args(confirm=token), "keep the restored VM"),
        step("zerto_restore_rollback", target.args(confirm=token), "or discard it"),
    ]


def _follow(client: ZvmClient, task_id: str, wait_s: float) -> Task | None:
    """The task once done, or as it stands after ``wait_s``; None if it cannot be read."""
    try:
        return client.wait_for_task(task_id, deadline=time.monotonic() + wait_s, poll_s=_POLL_S)
    except ZvmTimeout:
        try:
            return client.get_task(task_id, deadline=time.monotonic() + 10.0)
        except ZvmError:
            return None


# ---------------------------------------------------------------- failover test


def start_failover_test(
    zvms: Guard | ZvmClient,
    vm: str,
    checkpoint: str,
    *,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Start a failover test of ``vm`` from ``checkpoint`` and wait (bounded) for its task."""
    target = Target(zvms, vm, vpg, deadline, wait_s)
    v, found = target.vpg, target.checkpoint(checkpoint)
    task_id = target.client.failover_test(
        v.vpg_id, found.cp_id, [target.ref.vm_id], deadline=deadline
    )
    summary = (
        f"Failover test of {vm} started on VPG {v.name!r} from checkpoint {found.cp_id}: test VMs "
        f"run at {recovery_site(v)}; production is untouched."
    )
    stop = step(
        "zerto_stop_failover_test",
        target.args(success=True, summary="checkpoint verified"),
        "when done checking: success=true/false and a summary; deletes the test VMs",
    )
    return target.result("failover_test", task_id, found, summary, [stop])


def stop_failover_test(
    zvms: Guard | ZvmClient,
    vm: str,
    success: bool,
    summary: str,
    *,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Stop the running failover test on ``vm``'s VPG, recording the result."""
    target = Target(zvms, vm, vpg, deadline, wait_s)
    task_id = target.client.failover_test_stop(
        target.vpg.vpg_id, success, summary, deadline=deadline
    )
    verdict = "passed" if success else "failed"
    text = f"Failover test on VPG {target.vpg.name!r} stopped and recorded as {verdict}."
    return target.result("failover_test_stop", task_id, None, text)
