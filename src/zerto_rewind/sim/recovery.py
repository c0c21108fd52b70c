"""Recovery operations: failover test, live failover, journal VM restore.

Each returns the task it started and moves the VPG's Status/SubStatus at once (the
task then completes after the configured duration). Bodies arrive with lowercased
keys, because ZVM accepts any casing on input.
"""

from __future__ import annotations

from typing import Any

from zerto_rewind.sim import enums
from zerto_rewind.sim.errors import bad_request
from zerto_rewind.sim.journal import Checkpoint
from zerto_rewind.sim.models import Failover, FailoverTest, Restore, Vm, Vpg
from zerto_rewind.sim.state import Backend
from zerto_rewind.sim.tasks import Task
from zerto_rewind.sim.vmstate import VmState

_PROTECTING = {
    enums.MEETING_SLA,
    enums.NOT_MEETING_SLA,
    3,  # RpoNotMeetingSLA or HistoryNotMeetingSLA, depending on the numbering
    4,
}


def _require_side(backend: Backend, vpg: Vpg) -> None:
    """400 when this ZVM is not the side of the VPG that takes recovery operations."""
    refused = backend.accepts(vpg, "recovery")
    if refused is not None:
        raise bad_request(refused)


def _require_protecting(backend: Backend, vpg: Vpg, operation: str) -> None:
    _require_side(backend, vpg)
    if vpg.status not in _PROTECTING:
        name = enums.status_name(vpg.status, backend.status_names)
        msg = f"Cannot {operation}: VPG '{vpg.name}' is {name}"
        raise bad_request(msg)
    if vpg.failover is not None:
        msg = f"Cannot {operation}: VPG '{vpg.name}' has a failover in progress"
        raise bad_request(msg)
    if vpg.test is not None:
        msg = f"Cannot {operation}: VPG '{vpg.name}' has a failover test in progress"
        raise bad_request(msg)


def _enum(body: dict[str, Any], key: str, names: list[str], default: int) -> int:
    value = body.get(key.lower(), default)
    if isinstance(value, str) and not value.isdigit():
        lowered = [n.lower() for n in names]
        if value.lower() in lowered:
            return lowered.index(value.lower())
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if not 0 <= number < len(names):
        msg = f"{key} must be one of {', '.join(names)} (got {value!r})"
        raise bad_request(msg)
    return number


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key.lower(), False)
    return value.lower() == "true" if isinstance(value, str) else bool(value)


def _vm_ids(vpg: Vpg, body: dict[str, Any]) -> tuple[str, ...]:
    wanted = body.get("vmidentifiers") or []
    if not isinstance(wanted, list):
        msg = "vmIdentifiers must be a list"
        raise bad_request(msg)
    known = {vm.identifier.lower() for vm in vpg.vms}
    unknown = [v for v in wanted if str(v).lower() not in known]
    if unknown:
        msg = f"VM {unknown[0]} is not protected by VPG '{vpg.name}'"
        raise bad_request(msg)
    return tuple(str(v) for v in wanted) or tuple(vm.identifier for vm in vpg.vms)


def _checkpoint_id(backend: Backend, vpg: Vpg, body: dict[str, Any]) -> str:
    wanted = body.get("checkpointidentifier")
    return backend.checkpoint(vpg, None if wanted in (None, "") else str(wanted)).identifier


def failover_test(backend: Backend, vpg: Vpg, body: dict[str, Any]) -> Task:
    """Start a test: Status stays as it is, ActiveProcessesApi shows the test."""
    _require_protecting(backend, vpg, "start a failover test")
    vm_ids = _vm_ids(vpg, body)
    checkpoint_id = _checkpoint_id(backend, vpg, body)
    vpg.test = FailoverTest(checkpoint_id, backend.clock(), vm_ids)
    return backend.new_task("FailOverTest", vpg)


def failover_test_stop(backend: Backend, vpg: Vpg, body: dict[str, Any]) -> Task:
    """End the running test and record it as the VPG's LastTest."""
    _require_side(backend, vpg)
    if vpg.test is None:
        msg = f"VPG '{vpg.name}' has no failover test in progress"
        raise bad_request(msg)
    vpg.test = None
    vpg.last_test = backend.clock()
    return backend.new_task("StopFailOverTest", vpg)


def failover(backend: Backend, vpg: Vpg, body: dict[str, Any]) -> Task:
    """Live failover: FailingOver / FailingOverBeforeCommit until commit or rollback."""
    _require_protecting(backend, vpg, "fail over")
    _vm_ids(vpg, body)
    commit = _enum(body, "commitPolicy", enums.COMMIT_POLICIES, 0)
    _enum(body, "shutdownPolicy", enums.SHUTDOWN_POLICIES, 0)
    checkpoint_id = _checkpoint_id(backend, vpg, body)
    vpg.failover = Failover(checkpoint_id, commit, (vpg.status, vpg.sub_status))
    backend.set_state(vpg, enums.FAILING_OVER, enums.SUB_FAILING_OVER_BEFORE_COMMIT)
    return backend.new_task("FailOver", vpg)


def failover_commit(backend: Backend, vpg: Vpg, body: dict[str, Any]) -> Task:
    """Commit: Recovered, or protecting the other way round with reverse protection."""
    _end_failover(backend, vpg)
    if _flag(body, "isReverseProtection"):
        vpg.protected, vpg.recovery = vpg.recovery, vpg.protected
        backend.set_state(vpg, enums.MEETING_SLA, enums.SUB_NONE)
        vpg.journal.set_cadence(backend.config.cadence_for(vpg.protected.kind))
    else:
        backend.set_state(vpg, enums.RECOVERED, enums.SUB_NONE)
    return backend.new_task("FailoverCommit", vpg)


def failover_rollback(backend: Backend, vpg: Vpg, body: dict[str, Any]) -> Task:
    """Roll back: the VPG returns to the state it had before the failover."""
    status, sub_status = _end_failover(backend, vpg).previous
    backend.set_state(vpg, status, sub_status)
    return backend.new_task("FailoverRollback", vpg)


def _end_failover(backend: Backend, vpg: Vpg) -> Failover:
    """The live failover waiting for commit on ``vpg``, taken off it (400 if there is none)."""
    _require_side(backend, vpg)
    if vpg.failover is None:
        msg = f"VPG '{vpg.name}' has no failover waiting for commit"
        raise bad_request(msg)
    ended, vpg.failover = vpg.failover, None
    return ended


def restore(backend: Backend, vm_id: str, body: dict[str, Any]) -> Task:
    """Journal VM restore: SubStatus FailingOverBeforeCommit until commit/rollback."""
    vpg_id = body.get("vpgidentifier")
    vm, vpg = backend.vm_row(vm_id, None if vpg_id in (None, "") else str(vpg_id))
    _require_protecting(backend, vpg, "restore a VM")
    if vm.identifier in vpg.restores:
        msg = f"VM '{vm.name}' already has a restore waiting for commit"
        raise bad_request(msg)
    _enum(body, "commitPolicy", enums.COMMIT_POLICIES, 0)
    wanted = body.get("checkpointidentifier")
    checkpoint = backend.checkpoint(vpg, None if wanted in (None, "") else str(wanted))
    kept = _kept_state(backend, vm, checkpoint)
    name = str(body.get("restoredvmname") or f"{vm.name}-restored")
    vpg.restores[vm.identifier] = Restore(
        vm.identifier, checkpoint.identifier, name, vpg.sub_status, kept
    )
    backend.set_state(vpg, vpg.status, enums.SUB_FAILING_OVER_BEFORE_COMMIT)
    return backend.new_task("JournalVmRestore", vpg)


def restore_end(backend: Backend, vm_id: str, vpg_id: object, *, commit: bool) -> Task:
    """Commit or roll back a journal VM restore (the body is the VPG id string)."""
    if not isinstance(vpg_id, str) or not vpg_id:
        msg = "The request body must be the VPG identifier as a JSON string"
        raise bad_request(msg)
    vm, vpg = backend.vm_row(vm_id, vpg_id)
    _require_side(backend, vpg)
    pending = vpg.restores.pop(vm.identifier, None)
    if pending is None:
        msg = f"VM '{vm.name}' has no restore waiting for commit"
        raise bad_request(msg)
    if not vpg.restores:
        backend.set_state(vpg, vpg.status, pending.previous_sub_status)
    kind = "JournalVmRestoreCommit" if commit else "JournalVmRestoreRollback"
    task = backend.new_task(kind, vpg)
    replica = backend.world.replica
    if commit and replica is not None and pending.kept_state is not None:
        task.waits_for = replica.restore(vm.identifier, pending.kept_state).result
    return task


def _kept_state(backend: Backend, vm: Vm, checkpoint: Checkpoint) -> VmState | None:
    """The linked vCenter VM's state at the checkpoint (None: the VM is not linked); 400
    when the link kept none that old, since a commit could not put the VM back."""
    replica = backend.world.replica
    if replica is None or not replica.linked(vm.identifier):
        return None
    kept = replica.state_at(vm.identifier, checkpoint.timestamp)
    if kept is None:
        msg = (
            f"Cannot restore VM '{vm.name}' to checkpoint {checkpoint.identifier}: the "
            "simulator's vCenter link kept no state that old (it reads vCenter from its start)"
        )
        raise bad_request(msg)
    return kept
