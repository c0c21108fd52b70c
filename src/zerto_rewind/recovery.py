"""Bringing a VM back to a checkpoint: the plan, the failover test, and live recovery.

Zerto never rolls the production VM back in place. Every journal recovery
creates VMs from the replica at the recovery site: a *failover test* (test VMs
on an isolated network, production untouched), a *live failover* (the VPG's VMs
come up at the recovery site from the checkpoint; production downtime), or a
*journal VM restore* (one VM recreated from the checkpoint). Rewinding "in
place" means failover with reverse protection, then a move back.

Live operations are refused unless the config says ``"recovery": {"allow_live":
true}``, and every live call must repeat the VM and checkpoint in ``confirm``
as ``"<vm>@<checkpoint>"`` (see :func:`confirm_token`). Commit and rollback
take the same token: the checkpoint the operation was started from, which this
module records in ``<state_dir>/recovery/`` when it starts one.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from .decision import fmt_time
from .errors import ZertoRewindError, ZvmError, ZvmTimeout
from .protection import CheckpointInfo, UsageError, entity_type_names, select_ref, vm_refs

if TYPE_CHECKING:
    from .config import Settings
    from .zvm.client import ZvmClient
    from .zvm.models import Checkpoint, Task, VmRef, Vpg

__all__ = [
    "CONFIRM_FORMAT",
    "IN_PLACE_NOTE",
    "OperationResult",
    "RecoveryError",
    "RecoveryOption",
    "RecoveryPlan",
    "RecoveryStep",
    "confirm_token",
    "failover",
    "find_checkpoint",
    "finish_failover",
    "finish_restore",
    "recovery_plan",
    "restore_vm",
    "start_failover_test",
    "stop_failover_test",
]

CONFIRM_FORMAT = "<vm>@<checkpoint>"
IN_PLACE_NOTE = (
    "Zerto never rolls the production VM back in place: every recovery creates VMs from the "
    "replica at the recovery site. To end up with the VM at the checkpoint in production, fail "
    "over to the checkpoint, commit with reverse protection, then move the VPG back."
)
CommitPolicy = Literal["rollback", "commit", "none"]
ShutdownPolicy = Literal["none", "shutdown", "force_shutdown"]
_COMMIT_POLICIES: dict[str, int] = {"rollback": 0, "commit": 1, "none": 2}
_SHUTDOWN_POLICIES: dict[str, int] = {"none": 0, "shutdown": 1, "force_shutdown": 2}
# Checkpoints are first looked for this far back, then in the whole journal.
_RECENT_S = 6 * 3600.0
_NEAREST = 5
TASK_WAIT_S = 60.0
_POLL_S = 0.25
# Substatuses 14-20 and 29: a failover, move or rollback holds the VPG.
_BUSY_SUBSTATUS = frozenset((14, 15, 16, 17, 18, 19, 20, 29))
_FAILOVER_OPS = ("Failover", "FailoverCommit", "FailoverRollback")
_RESTORE_OPS = ("Restore", "RestoreCommit", "RestoreRollback")


class RecoveryError(ZertoRewindError):
    """A recovery operation was refused (not enabled, wrong confirm) or its task failed."""


# ---------------------------------------------------------------- result models


class RecoveryStep(BaseModel):
    """One thing to run: an MCP tool call, and the CLI command where one exists."""

    tool: str | None = Field(description="the MCP tool to call")
    arguments: dict[str, Any] = Field(description="its arguments")
    cli: str | None = Field(default=None, description="the zerto-rewind command, if any")
    note: str = Field(description="what the step does")


class RecoveryOption(BaseModel):
    """One Zerto operation that brings the VM's data back to the checkpoint."""

    operation: str = Field(description="failover_test, live_failover or journal_vm_restore")
    zerto_api: list[str] = Field(description="the ZVM REST calls involved")
    disruptive: bool = Field(description="true if production is affected")
    affects: str = Field(description="what it touches: test VMs, production downtime, ...")
    what_happens: str
    available: bool = Field(description="whether the tools for it can run now")
    unavailable_reason: str | None = None
    steps: list[RecoveryStep]


class RecoveryPlan(BaseModel):
    """How to bring a VM back to a checkpoint, read-only."""

    vm: str
    vm_id: str
    vpg: str
    vpg_id: str
    site_kind: str
    protected_site: str | None
    recovery_site: str | None
    checkpoint: CheckpointInfo
    vpg_status: str
    vpg_sub_status: str
    failover_test_running: bool
    in_place_rewind: str = Field(description="why there is no in-place rollback, and the way round")
    live_recovery_allowed: bool = Field(description="config recovery.allow_live")
    confirm: str = Field(description="the confirm value the live tools need for this VM/checkpoint")
    options: list[RecoveryOption]
    inspect: list[RecoveryStep] = Field(description="read-only ways to look before acting")


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


class _Target:
    """The VM, its VPG (picked by ``vpg`` when several) and the VPG's current state."""

    def __init__(
        self,
        client: ZvmClient,
        vm: str,
        vpg: str | None,
        deadline: float | None,
        wait_s: float = TASK_WAIT_S,
    ) -> None:
        self.client, self.vm, self.deadline, self.wait_s = client, vm, deadline, wait_s
        self.refs = vm_refs(client, vm, deadline=deadline)
        self.ref: VmRef = select_ref(self.refs, vm, vpg)
        self.vpg: Vpg = client.get_vpg(self.ref.vpg_id, deadline=deadline)

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
        )


def _step(tool: str, arguments: dict[str, Any], note: str, cli: str | None = None) -> RecoveryStep:
    return RecoveryStep(tool=tool, arguments=arguments, cli=cli, note=note)


def _require_live(settings: Settings) -> None:
    if not settings.allow_live_recovery:
        msg = (
            "live recovery (failover, journal VM restore, their commit and rollback) is disabled: "
            f'an operator must set "recovery": {{"allow_live": true}} in {settings.path}. '
            "The non-disruptive check is zerto_start_failover_test."
        )
        raise RecoveryError(msg)


def _require_confirm(confirm: str, vm: str, checkpoint: str, operation: str) -> None:
    expected = confirm_token(vm, checkpoint)
    if confirm != expected:
        msg = (
            f"{operation} refused: confirm must repeat the VM and checkpoint exactly as "
            f"{CONFIRM_FORMAT}, here {expected!r} (got {confirm!r}). Nothing was changed."
        )
        raise RecoveryError(msg)


def _follow(client: ZvmClient, task_id: str, wait_s: float) -> Task | None:
    """The task once done, or as it stands after ``wait_s``; None if it cannot be read."""
    try:
        return client.wait_for_task(task_id, deadline=time.monotonic() + wait_s, poll_s=_POLL_S)
    except ZvmTimeout:
        try:
            return client.get_task(task_id, deadline=time.monotonic() + 10.0)
        except ZvmError:
            return None


# ---------------------------------------------------------------- in-progress records


def _record_path(settings: Settings, kind: str, key: str) -> str:
    import hashlib

    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return os.path.join(settings.state_dir, "recovery", f"{kind}-{digest}.json")


def _remember(settings: Settings, kind: str, key: str, vm: str, checkpoint: str) -> None:
    from .fsutil import atomic_write_json, ensure_private_dir

    ensure_private_dir(os.path.join(settings.state_dir, "recovery"))
    record = {"vm": vm, "checkpoint_id": checkpoint, "started_at": time.time()}
    atomic_write_json(_record_path(settings, kind, key), record)


def _recalled(settings: Settings, kind: str, key: str) -> str | None:
    from .fsutil import read_json

    raw = read_json(_record_path(settings, kind, key))
    checkpoint = raw.get("checkpoint_id") if isinstance(raw, dict) else None
    return checkpoint if isinstance(checkpoint, str) else None


def _forget(settings: Settings, kind: str, key: str) -> None:
    import contextlib

    with contextlib.suppress(FileNotFoundError):
        os.unlink(_record_path(settings, kind, key))


def _confirm_finish(settings: Settings, target: _Target, confirm: str, kind: str, key: str) -> str:
    """Check ``confirm`` for a commit/rollback; returns the operation's checkpoint id."""
    operation = f"{kind} commit/rollback"
    recorded = _recalled(settings, kind, key)
    if recorded is not None:
        _require_confirm(confirm, target.vm, recorded, operation)
        return recorded
    # Started elsewhere (Zerto UI): the checkpoint named must at least be in the journal.
    vm_part, sep, checkpoint = confirm.rpartition("@")
    if not sep or vm_part != target.vm or not checkpoint:
        _require_confirm(confirm, target.vm, "<checkpoint the operation started from>", operation)
    return target.checkpoint(checkpoint).cp_id


# ---------------------------------------------------------------- the plan


def recovery_plan(
    client: ZvmClient,
    settings: Settings,
    vm: str,
    checkpoint: str,
    *,
    vpg: str | None = None,
    deadline: float | None = None,
) -> RecoveryPlan:
    """Which Zerto operations bring ``vm`` back to ``checkpoint``; read-only."""
    from .zvm.models import site_kind

    target = _Target(client, vm, vpg, deadline)
    v = target.vpg
    found = target.checkpoint(checkpoint)
    names = entity_type_names(client, deadline=deadline)
    token = confirm_token(vm, checkpoint)
    return RecoveryPlan(
        vm=vm,
        vm_id=target.ref.vm_id,
        vpg=v.name,
        vpg_id=v.vpg_id,
        site_kind=site_kind(v.protected_entity, names, settings.guard.site_types),
        protected_site=v.protected_site_name,
        recovery_site=v.recovery_site_name,
        checkpoint=CheckpointInfo.of(found),
        vpg_status=v.status_text,
        vpg_sub_status=v.sub_status_text,
        failover_test_running=v.failover_test_running,
        in_place_rewind=IN_PLACE_NOTE,
        live_recovery_allowed=settings.allow_live_recovery,
        confirm=token,
        options=[
            _test_option(target, checkpoint),
            _failover_option(target, checkpoint, token, _live_blocked(settings, v)),
            _restore_option(target, checkpoint, token, _live_blocked(settings, v)),
        ],
        inspect=[
            _step(
                "zerto_protection_status",
                {"vm": vm},
                "VPG health, RPO and cadence before acting",
                cli=f"zerto-rewind status {vm}",
            ),
            _step(
                "zerto_list_checkpoints",
                {"vm": vm, "tagged_only": True, "since": "1d"},
                "the tagged checkpoints to choose from",
                cli=f"zerto-rewind checkpoints {vm} --tagged --since 1d",
            ),
        ],
    )


def _busy(v: Vpg) -> str | None:
    if v.sub_status in _BUSY_SUBSTATUS:
        return f"VPG {v.name!r} is busy ({v.sub_status_text}); commit or roll that back first"
    return None


def _live_blocked(settings: Settings, v: Vpg) -> str | None:
    if not settings.allow_live_recovery:
        return 'disabled by config: an operator must set "recovery": {"allow_live": true}'
    return _busy(v)


def _recovery_site(v: Vpg) -> str:
    return v.recovery_site_name or "the recovery site"


def _test_option(target: _Target, checkpoint: str) -> RecoveryOption:
    v = target.vpg
    running = f"a failover test is already running on VPG {v.name!r}; stop it first"
    blocked = _busy(v) or (running if v.failover_test_running else None)
    return RecoveryOption(
        operation="failover_test",
        zerto_api=[f"POST /v1/vpgs/{v.vpg_id}/{op}" for op in ("FailoverTest", "FailoverTestStop")],
        disruptive=False,
        affects=(
            f"creates test VMs at {_recovery_site(v)} on the test network; production keeps "
            "running and replication continues"
        ),
        what_happens=(
            "Zerto boots copies of the VPG's VMs from the checkpoint so you can check that it "
            "is good. Stopping the test deletes the test VMs and records the result."
        ),
        available=blocked is None,
        unavailable_reason=blocked,
        steps=[
            _step("zerto_start_failover_test", target.args(checkpoint=checkpoint),
                  "start the test from the checkpoint"),
            _step("zerto_stop_failover_test",
                  target.args(success=True, summary="checkpoint verified"),
                  "stop it (success=false if the checkpoint was bad); deletes the test VMs"),
        ],
    )  # fmt: skip


def _failover_option(
    target: _Target, checkpoint: str, token: str, blocked: str | None
) -> RecoveryOption:
    v = target.vpg
    return RecoveryOption(
        operation="live_failover",
        zerto_api=[f"POST /v1/vpgs/{v.vpg_id}/{op}" for op in _FAILOVER_OPS],
        disruptive=True,
        affects=(
            "production downtime: the protected VMs are shut down and every VM of the VPG "
            f"comes up at {_recovery_site(v)} from the checkpoint; data written after the "
            "checkpoint is not in the recovered VMs; commit with reverse_protection=true to "
            "replicate back, which allows a later move back"
        ),
        what_happens=(
            "The VPG waits before commit: check the recovered VMs, then commit (keep them) or "
            "roll back (delete them and return to the state before the failover)."
        ),
        available=blocked is None,
        unavailable_reason=blocked,
        steps=[
            _step("zerto_failover",
                  target.args(checkpoint=checkpoint, confirm=token, commit_policy="none"),
                  "fail over to the checkpoint and wait for an explicit commit"),
            *_failover_finish_steps(target, token),
        ],
    )  # fmt: skip


def _failover_finish_steps(target: _Target, token: str) -> list[RecoveryStep]:
    return [
        _step("zerto_failover_commit", target.args(confirm=token, reverse_protection=True),
              "keep the recovered VMs; reverse protection replicates them back"),
        _step("zerto_failover_rollback", target.args(confirm=token),
              "or undo the failover: the recovered VMs are removed"),
    ]  # fmt: skip


def _restore_option(
    target: _Target, checkpoint: str, token: str, blocked: str | None
) -> RecoveryOption:
    v, vm_id = target.vpg, target.ref.vm_id
    return RecoveryOption(
        operation="journal_vm_restore",
        zerto_api=[f"POST /v1/vms/{vm_id}/{op}" for op in _RESTORE_OPS],
        disruptive=True,
        affects=(
            f"only {target.vm}: a restored VM is created from the checkpoint; until commit or "
            f"rollback the VPG {v.name!r} waits before commit and takes no new tagged checkpoints"
        ),
        what_happens=(
            "Zerto recreates this one VM from the journal at the checkpoint; commit keeps the "
            "restored VM, rollback discards it."
        ),
        available=blocked is None,
        unavailable_reason=blocked,
        steps=[
            _step("zerto_restore_vm", target.args(checkpoint=checkpoint, confirm=token),
                  "restore the VM from the checkpoint"),
            *_restore_finish_steps(target, token),
        ],
    )  # fmt: skip


def _restore_finish_steps(target: _Target, token: str) -> list[RecoveryStep]:
    return [
        _step("zerto_restore_commit", target.args(confirm=token), "keep the restored VM"),
        _step("zerto_restore_rollback", target.args(confirm=token), "or discard it"),
    ]


# ---------------------------------------------------------------- failover test


def start_failover_test(
    client: ZvmClient,
    vm: str,
    checkpoint: str,
    *,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Start a failover test of ``vm`` from ``checkpoint`` and wait (bounded) for its task."""
    target = _Target(client, vm, vpg, deadline, wait_s)
    v, found = target.vpg, target.checkpoint(checkpoint)
    task_id = client.failover_test(v.vpg_id, found.cp_id, [target.ref.vm_id], deadline=deadline)
    summary = (
        f"Failover test of {vm} started on VPG {v.name!r} from checkpoint {found.cp_id}: test VMs "
        f"run at {_recovery_site(v)}; production is untouched."
    )
    stop = _step(
        "zerto_stop_failover_test",
        target.args(success=True, summary="checkpoint verified"),
        "when done checking: success=true/false and a summary; deletes the test VMs",
    )
    return target.result("failover_test", task_id, found, summary, [stop])


def stop_failover_test(
    client: ZvmClient,
    vm: str,
    success: bool,
    summary: str,
    *,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Stop the running failover test on ``vm``'s VPG, recording the result."""
    target = _Target(client, vm, vpg, deadline, wait_s)
    task_id = client.failover_test_stop(target.vpg.vpg_id, success, summary, deadline=deadline)
    verdict = "passed" if success else "failed"
    text = f"Failover test on VPG {target.vpg.name!r} stopped and recorded as {verdict}."
    return target.result("failover_test_stop", task_id, None, text)


# ---------------------------------------------------------------- live failover


def failover(
    client: ZvmClient,
    settings: Settings,
    vm: str,
    checkpoint: str,
    confirm: str,
    *,
    commit_policy: CommitPolicy = "none",
    reverse_protection: bool = False,
    shutdown_policy: ShutdownPolicy = "shutdown",
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Live failover of ``vm``'s VPG to ``checkpoint``; refused unless enabled and confirmed."""
    _require_live(settings)
    _require_confirm(confirm, vm, checkpoint, "failover")
    target = _Target(client, vm, vpg, deadline, wait_s)
    v, found = target.vpg, target.checkpoint(checkpoint)
    task_id = client.failover(
        v.vpg_id,
        found.cp_id,
        commit_policy=_COMMIT_POLICIES[commit_policy],
        shutdown_policy=_SHUTDOWN_POLICIES[shutdown_policy],
        reverse_protection=reverse_protection,
        deadline=deadline,
    )
    _remember(settings, "failover", v.vpg_id, vm, found.cp_id)
    summary = (
        f"Live failover of VPG {v.name!r} to checkpoint {found.cp_id} started (commit policy "
        f"{commit_policy}, shutdown policy {shutdown_policy}): its VMs come up at "
        f"{_recovery_site(v)}. Check them, then commit or roll back."
    )
    steps = _failover_finish_steps(target, confirm_token(vm, found.cp_id))
    return target.result("failover", task_id, found, summary, steps)


def finish_failover(
    client: ZvmClient,
    settings: Settings,
    vm: str,
    confirm: str,
    *,
    commit: bool,
    reverse_protection: bool = False,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Commit (``commit=True``) or roll back the failover waiting before commit on ``vm``'s VPG."""
    _require_live(settings)
    target = _Target(client, vm, vpg, deadline, wait_s)
    key = target.vpg.vpg_id
    checkpoint = _confirm_finish(settings, target, confirm, "failover", key)
    if commit:
        task_id = client.failover_commit(key, reverse_protection, deadline=deadline)
        protection = "with" if reverse_protection else "without"
        what = f"committed {protection} reverse protection"
    else:
        task_id = client.failover_rollback(key, deadline=deadline)
        what = "rolled back: the recovered VMs are removed and the VPG returns to protecting"
    _forget(settings, "failover", key)
    summary = f"Failover of VPG {target.vpg.name!r} to checkpoint {checkpoint} {what}."
    operation = "failover_commit" if commit else "failover_rollback"
    return target.result(operation, task_id, None, summary)


# ---------------------------------------------------------------- journal VM restore


def restore_vm(
    client: ZvmClient,
    settings: Settings,
    vm: str,
    checkpoint: str,
    confirm: str,
    *,
    restored_vm_name: str | None = None,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Journal VM restore of ``vm`` to ``checkpoint``; refused unless enabled and confirmed."""
    _require_live(settings)
    _require_confirm(confirm, vm, checkpoint, "restore")
    target = _Target(client, vm, vpg, deadline, wait_s)
    v, vm_id, found = target.vpg, target.ref.vm_id, target.checkpoint(checkpoint)
    task_id = client.restore_vm(
        vm_id, v.vpg_id, found.cp_id, restored_vm_name=restored_vm_name, deadline=deadline
    )
    _remember(settings, "restore", f"{vm_id}|{v.vpg_id}", vm, found.cp_id)
    name = restored_vm_name or "the ZVM's default name"
    summary = (
        f"Journal restore of {vm} from checkpoint {found.cp_id} started as {name}. It waits for "
        "commit or rollback (commit policy rollback: left alone, Zerto rolls it back)."
    )
    steps = _restore_finish_steps(target, confirm_token(vm, found.cp_id))
    return target.result("restore", task_id, found, summary, steps)


def finish_restore(
    client: ZvmClient,
    settings: Settings,
    vm: str,
    confirm: str,
    *,
    commit: bool,
    vpg: str | None = None,
    wait_s: float = TASK_WAIT_S,
    deadline: float | None = None,
) -> OperationResult:
    """Commit (``commit=True``: the restored VM stays) or roll back ``vm``'s journal restore."""
    _require_live(settings)
    target = _Target(client, vm, vpg, deadline, wait_s)
    vm_id, vpg_id = target.ref.vm_id, target.vpg.vpg_id
    key = f"{vm_id}|{vpg_id}"
    checkpoint = _confirm_finish(settings, target, confirm, "restore", key)
    end = client.restore_commit if commit else client.restore_rollback
    task_id = end(vm_id, vpg_id, deadline=deadline)
    _forget(settings, "restore", key)
    what = "committed: the restored VM stays" if commit else "rolled back: the restored VM is gone"
    summary = f"Journal restore of {vm} from checkpoint {checkpoint} {what}."
    return target.result("restore_commit" if commit else "restore_rollback", task_id, None, summary)
