"""Live recovery: failover and journal VM restore, with their commit and rollback.

Live operations are refused unless the config says ``"recovery": {"allow_live":
true}``, and every live call must repeat the VM and checkpoint in ``confirm``
as ``"<vm>@<checkpoint>"`` (see :func:`~zerto_rewind.recovery.failover.confirm_token`).
Commit and rollback take the same token: the checkpoint the operation was
started from, which this module records in ``<state_dir>/recovery/`` when it
starts one.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Literal

from ..errors import RecoveryError
from .failover import (
    CONFIRM_FORMAT,
    TASK_WAIT_S,
    OperationResult,
    Target,
    confirm_token,
    failover_finish_steps,
    recovery_site,
    restore_finish_steps,
)

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from ..zvm.models import Checkpoint

__all__ = [
    "CommitPolicy",
    "ShutdownPolicy",
    "failover",
    "finish_failover",
    "finish_restore",
    "restore_vm",
]

CommitPolicy = Literal["rollback", "commit", "none"]
ShutdownPolicy = Literal["none", "shutdown", "force_shutdown"]
_COMMIT_POLICIES: dict[str, int] = {"rollback": 0, "commit": 1, "none": 2}
_SHUTDOWN_POLICIES: dict[str, int] = {"none": 0, "shutdown": 1, "force_shutdown": 2}


def _gate(
    zvms: Guard | ZvmClient,
    settings: Settings,
    vm: str,
    checkpoint: str,
    confirm: str,
    operation: str,
    vpg: str | None,
    wait_s: float,
    deadline: float | None,
) -> tuple[Target, Checkpoint]:
    """Before starting a live operation: enabled, confirmed, then the target and its checkpoint."""
    _require_live(settings)
    _require_confirm(confirm, vm, checkpoint, operation)
    target = Target(zvms, vm, vpg, deadline, wait_s, settings=settings)
    return target, target.checkpoint(checkpoint)


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


# ---------------------------------------------------------------- in-progress records


def _record_path(settings: Settings, kind: str, key: str) -> str:
    import hashlib

    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return os.path.join(settings.state_dir, "recovery", f"{kind}-{digest}.json")


def _record_key(kind: str, target: Target) -> str:
    """The in-progress record's key: a failover is its VPG's, a restore one VM's of it."""
    vpg_id = target.vpg.vpg_id
    return vpg_id if kind == "failover" else f"{target.ref.vm_id}|{vpg_id}"


def _remember(settings: Settings, kind: str, target: Target, checkpoint: str) -> None:
    from ..fsutil import atomic_write_json, ensure_private_dir

    ensure_private_dir(os.path.join(settings.state_dir, "recovery"))
    record = {"vm": target.vm, "checkpoint_id": checkpoint, "started_at": time.time()}
    if target.site is not None:
        record["site"] = target.site  # its commit and rollback go to the same site's ZVM
    atomic_write_json(_record_path(settings, kind, _record_key(kind, target)), record)


def _recalled(settings: Settings, kind: str, key: str) -> tuple[str | None, str | None]:
    """(the checkpoint the operation started from, the site whose ZVM started it)."""
    from ..fsutil import read_json

    raw = read_json(_record_path(settings, kind, key))
    if not isinstance(raw, dict):
        return None, None
    checkpoint, site = raw.get("checkpoint_id"), raw.get("site")
    return (
        checkpoint if isinstance(checkpoint, str) else None,
        site if isinstance(site, str) else None,
    )


def _forget(settings: Settings, kind: str, target: Target) -> None:
    import contextlib

    with contextlib.suppress(FileNotFoundError):
        os.unlink(_record_path(settings, kind, _record_key(kind, target)))


def _started(
    settings: Settings, kind: str, target: Target, found: Checkpoint, task_id: str, summary: str
) -> OperationResult:
    """A live operation of ``kind`` the ZVM took: recorded for its commit or rollback, then
    followed, with the steps that finish it (confirmed by the same token)."""
    _remember(settings, kind, target, found.cp_id)
    finish_steps = failover_finish_steps if kind == "failover" else restore_finish_steps
    steps = finish_steps(target, confirm_token(target.vm, found.cp_id))
    return target.result(kind, task_id, found, summary, steps)


def _finishing(
    zvms: Guard | ZvmClient,
    settings: Settings,
    vm: str,
    confirm: str,
    kind: str,
    vpg: str | None,
    wait_s: float,
    deadline: float | None,
) -> tuple[Target, str]:
    """Before a commit or rollback of ``kind``: enabled, then the target and the checkpoint
    the operation started from, which ``confirm`` must name."""
    _require_live(settings)
    target = Target(zvms, vm, vpg, deadline, wait_s, settings=settings)
    return target, _confirm_finish(settings, target, confirm, kind)


def _confirm_finish(settings: Settings, target: Target, confirm: str, kind: str) -> str:
    """Check ``confirm`` for a commit/rollback; returns the operation's checkpoint id."""
    operation = f"{kind} commit/rollback"
    recorded, started_at = _recalled(settings, kind, _record_key(kind, target))
    if started_at is not None and target.site is not None and started_at != target.site:
        msg = (
            f"the {kind} of VPG {target.vpg.name!r} was started through the ZVM of site "
            f"{started_at}, and this {operation} would go through {target.where()} "
            "(recovery.via, or which sites answer, changed since): nothing was done. Finish it "
            f"where it started: with recovery.via naming site {started_at}'s side, while its "
            "ZVM answers, or in the Zerto UI"
        )
        raise RecoveryError(msg)
    if recorded is not None:
        _require_confirm(confirm, target.vm, recorded, operation)
        return recorded
    # Started elsewhere (Zerto UI): the checkpoint named must at least be in the journal.
    vm_part, sep, checkpoint = confirm.rpartition("@")
    if not sep or vm_part != target.vm or not checkpoint:
        _require_confirm(confirm, target.vm, "<checkpoint the operation started from>", operation)
    return target.checkpoint(checkpoint).cp_id


# ---------------------------------------------------------------- live failover


def failover(
    zvms: Guard | ZvmClient,
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
    target, found = _gate(
        zvms, settings, vm, checkpoint, confirm, "failover", vpg, wait_s, deadline
    )
    v = target.vpg
    task_id = target.client.failover(
        v.vpg_id,
        found.cp_id,
        commit_policy=_COMMIT_POLICIES[commit_policy],
        shutdown_policy=_SHUTDOWN_POLICIES[shutdown_policy],
        reverse_protection=reverse_protection,
        deadline=deadline,
    )
    summary = (
        f"Live failover of VPG {v.name!r} to checkpoint {found.cp_id} started (commit policy "
        f"{commit_policy}, shutdown policy {shutdown_policy}): its VMs come up at "
        f"{recovery_site(v)}. Check them, then commit or roll back."
    )
    return _started(settings, "failover", target, found, task_id, summary)


def finish_failover(
    zvms: Guard | ZvmClient,
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
    target, checkpoint = _finishing(zvms, settings, vm, confirm, "failover", vpg, wait_s, deadline)
    key = target.vpg.vpg_id
    if commit:
        task_id = target.client.failover_commit(key, reverse_protection, deadline=deadline)
        protection = "with" if reverse_protection else "without"
        what = f"committed {protection} reverse protection"
    else:
        task_id = target.client.failover_rollback(key, deadline=deadline)
        what = "rolled back: the recovered VMs are removed and the VPG returns to protecting"
    _forget(settings, "failover", target)
    summary = f"Failover of VPG {target.vpg.name!r} to checkpoint {checkpoint} {what}."
    operation = "failover_commit" if commit else "failover_rollback"
    return target.result(operation, task_id, None, summary)


# ---------------------------------------------------------------- journal VM restore


def restore_vm(
    zvms: Guard | ZvmClient,
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
    target, found = _gate(zvms, settings, vm, checkpoint, confirm, "restore", vpg, wait_s, deadline)
    v, vm_id = target.vpg, target.ref.vm_id
    task_id = target.client.restore_vm(
        vm_id, v.vpg_id, found.cp_id, restored_vm_name=restored_vm_name, deadline=deadline
    )
    name = restored_vm_name or "the ZVM's default name"
    summary = (
        f"Journal restore of {vm} from checkpoint {found.cp_id} started as {name}. It waits for "
        "commit or rollback (commit policy rollback: left alone, Zerto rolls it back)."
    )
    return _started(settings, "restore", target, found, task_id, summary)


def finish_restore(
    zvms: Guard | ZvmClient,
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
    target, checkpoint = _finishing(zvms, settings, vm, confirm, "restore", vpg, wait_s, deadline)
    vm_id, vpg_id = target.ref.vm_id, target.vpg.vpg_id
    client = target.client
    end = client.restore_commit if commit else client.restore_rollback
    task_id = end(vm_id, vpg_id, deadline=deadline)
    _forget(settings, "restore", target)
    what = "committed: the restored VM stays" if commit else "rolled back: the restored VM is gone"
    summary = f"Journal restore of {vm} from checkpoint {checkpoint} {what}."
    return target.result("restore_commit" if commit else "restore_rollback", task_id, None, summary)
