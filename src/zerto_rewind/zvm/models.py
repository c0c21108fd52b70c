"""Typed values of the ZVM's wire JSON (read with :mod:`.wire`), and pure rules over them.

Every ``from_wire`` classmethod takes one decoded JSON object and raises
``ValueError`` when a required field is missing or has the wrong type; the
client turns that into an :class:`~zerto_rewind.errors.ApiError`. Optional
fields that are absent become ``None`` so older and newer ZVMs both parse.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .wire import (
    format_iso,
    obj,
    opt_int,
    opt_obj,
    opt_str,
    opt_time,
    parse_iso,
    req_int,
    req_str,
    site_identifier,
)

__all__ = [
    "SITE_KINDS",
    "VPG_STATUS_NAMES",
    "VPG_SUBSTATUS_NAMES",
    "Checkpoint",
    "Task",
    "TaskState",
    "VmRef",
    "Vpg",
    "format_iso",
    "parse_iso",
    "site_identifier",
    "site_kind",
    "status_name",
    "substatus_name",
    "tag_refusal",
]

# VpgVisualStatusApi. 3 and 4 follow the official docs (DOC4.5/DOC7.5); much
# community code swaps them. UNCONFIRMED for 10.x: `GET /v1/vpgs/statuses`
# is the runtime truth. Neither 3 nor 4 blocks a tag, so the swap is harmless here.
VPG_STATUS_NAMES: dict[int, str] = {
    0: "Initializing",
    1: "MeetingSLA",
    2: "NotMeetingSLA",
    3: "RpoNotMeetingSLA",
    4: "HistoryNotMeetingSLA",
    5: "FailingOver",
    6: "Moving",
    7: "Deleting",
    8: "Recovered",
}

# VpgVisualSubStatusApi 0..32 (VK common.py, ZertoModule); 33..42 are unknown.
VPG_SUBSTATUS_NAMES: dict[int, str] = {
    0: "None",
    1: "InitialSync",
    2: "Creating",
    3: "VolumeInitialSync",
    4: "Sync",
    5: "RecoveryPossible",
    6: "DeltaSync",
    7: "NeedsConfiguration",
    8: "Error",
    9: "EmptyProtectionGroup",
    10: "DisconnectedFromPeerNoRecoveryPoints",
    11: "FullSync",
    12: "VolumeDeltaSync",
    13: "VolumeFullSync",
    14: "FailingOverCommitting",
    15: "FailingOverBeforeCommit",
    16: "FailingOverRollingBack",
    17: "Promoting",
    18: "MovingCommitting",
    19: "MovingBeforeCommit",
    20: "MovingRollingBack",
    21: "Deleting",
    22: "PendingRemove",
    23: "BitmapSync",
    24: "DisconnectedFromPeer",
    25: "ReplicationPausedUserInitiated",
    26: "ReplicationPausedSystemInitiated",
    27: "RecoveryStorageProfileError",
    28: "Backup",
    29: "RollingBack",
    30: "RecoveryStorageError",
    31: "JournalStorageError",
    32: "VmNotProtectedError",
}


def status_name(status: int) -> str:
    """The name of a VPG ``Status`` value, or ``Unknown(n)``."""
    return VPG_STATUS_NAMES.get(status, f"Unknown({status})")


def substatus_name(sub_status: int) -> str:
    """The name of a VPG ``SubStatus`` value, or ``Unknown(n)``."""
    return VPG_SUBSTATUS_NAMES.get(sub_status, f"Unknown({sub_status})")


# ---------------------------------------------------------------- models


@dataclass(frozen=True)
class VmRef:
    """One (VM, VPG) pair from ``GET /v1/vms``; a VM in two VPGs gives two."""

    vm_id: str
    vm_name: str
    vpg_id: str
    vpg_name: str
    # ``Link.instance_identifier`` (swagger's VmResourceLink); what it holds on a real
    # ZVM (the vCenter instance UUID?) is UNCONFIRMED, so only an explicit
    # ``catalog.resolvers.*.zerto_field`` compares with it.
    instance_id: str | None = None
    # ``ProtectedSite.identifier``: the site the VPG protects this VM from. A ZVM lists
    # VMs in either direction; comparing this with its ``localsite`` tells which.
    protected_site_id: str | None = None

    @classmethod
    def from_wire(cls, data: Any) -> VmRef:
        """Parse a ``VmApi`` object."""
        d = obj(data, "VM")
        link = d.get("Link")
        instance = link.get("instance_identifier") if isinstance(link, dict) else None
        return cls(
            vm_id=req_str(d, "VmIdentifier"),
            vm_name=req_str(d, "VmName"),
            vpg_id=req_str(d, "VpgIdentifier"),
            vpg_name=opt_str(d, "VpgName") or "",
            instance_id=instance if isinstance(instance, str) and instance else None,
            protected_site_id=site_identifier(d, "ProtectedSite"),
        )


@dataclass(frozen=True)
class Vpg:
    """A VPG's identity, health and sites, from a ``VpgApi`` object."""

    vpg_id: str
    name: str
    status: int
    sub_status: int
    status_text: str
    sub_status_text: str
    protected_entity: int | None
    recovery_entity: int | None
    protected_site_name: str | None
    recovery_site_name: str | None
    actual_rpo_s: int | None
    configured_rpo_s: int | None
    history_minutes: int | None
    vms_count: int | None
    failover_test_running: bool
    protected_site_id: str | None = None
    recovery_site_id: str | None = None

    @classmethod
    def from_wire(cls, data: Any) -> Vpg:
        """Parse a ``VpgApi`` object."""
        d = obj(data, "VPG")
        status, sub = req_int(d, "Status"), opt_int(d, "SubStatus") or 0
        entities = opt_obj(d, "Entities")
        active = opt_obj(d, "ActiveProcessesApi")
        return cls(
            vpg_id=req_str(d, "VpgIdentifier"),
            name=req_str(d, "VpgName"),
            status=status,
            sub_status=sub,
            status_text=status_name(status),
            sub_status_text=substatus_name(sub),
            protected_entity=opt_int(entities, "Protected"),
            recovery_entity=opt_int(entities, "Recovery"),
            protected_site_name=opt_str(d, "ProtectedSiteName") or opt_str(d, "SourceSite"),
            recovery_site_name=opt_str(d, "RecoverySiteName") or opt_str(d, "TargetSite"),
            actual_rpo_s=opt_int(d, "ActualRPO"),
            configured_rpo_s=opt_int(d, "ConfiguredRpoSeconds"),
            history_minutes=opt_int(opt_obj(d, "HistoryStatusApi"), "ActualHistoryInMinutes"),
            vms_count=opt_int(d, "VmsCount"),
            failover_test_running=bool(active and active.get("RunningFailOverTestApi")),
            protected_site_id=site_identifier(d, "ProtectedSite"),
            recovery_site_id=site_identifier(d, "RecoverySite"),
        )


@dataclass(frozen=True)
class Checkpoint:
    """A journal checkpoint; ``tag`` is set on tagged (user) checkpoints."""

    cp_id: str
    timestamp: datetime
    tag: str | None
    type: int | None

    @classmethod
    def from_wire(cls, data: Any) -> Checkpoint:
        """Parse a ``CheckpointApi`` object."""
        d = obj(data, "checkpoint")
        stamp = d.get("TimeStamp")
        if stamp in (None, ""):
            msg = "missing 'TimeStamp'"
            raise ValueError(msg)
        return cls(
            cp_id=req_str(d, "CheckpointIdentifier"),
            timestamp=parse_iso(stamp),
            tag=opt_str(d, "Tag"),
            type=opt_int(d, "Type"),
        )

    def sort_key(self) -> tuple[datetime, int, str]:
        """Order by time, then by numeric id (ids are decimal strings)."""
        numeric = int(self.cp_id) if self.cp_id.isdigit() else -1
        return (self.timestamp, numeric, self.cp_id)


class TaskState(enum.IntEnum):
    """``TaskStatusEnumApi`` (zerto-api.md §6)."""

    FIRST_UNUSED_VALUE = 0
    IN_PROGRESS = 1
    WAITING_FOR_USER_INPUT = 2
    PAUSED = 3
    FAILED = 4
    STOPPED = 5
    COMPLETED = 6
    CANCELLING = 7


_TERMINAL = {TaskState.FAILED, TaskState.STOPPED, TaskState.COMPLETED}


@dataclass(frozen=True)
class Task:
    """A ZVM task (``TaskApi``); ``state`` is a :class:`TaskState` value."""

    task_id: str
    type: str | None
    state: int
    progress: int
    complete_reason: str | None
    started: datetime | None
    completed: datetime | None

    @classmethod
    def from_wire(cls, data: Any) -> Task:
        """Parse a ``TaskApi`` object."""
        d = obj(data, "task")
        status = obj(d.get("Status"), "task Status")
        return cls(
            task_id=req_str(d, "TaskIdentifier"),
            type=opt_str(d, "Type"),
            state=req_int(status, "State"),
            progress=opt_int(status, "Progress") or 0,
            complete_reason=opt_str(d, "CompleteReason"),
            started=opt_time(d, "Started"),
            completed=opt_time(d, "Completed"),
        )

    @property
    def state_name(self) -> str:
        """The state's enum name, e.g. ``COMPLETED``."""
        try:
            return TaskState(self.state).name
        except ValueError:
            return f"UNKNOWN({self.state})"

    @property
    def done(self) -> bool:
        """True once the task reached Failed, Stopped or Completed."""
        return self.state in _TERMINAL

    @property
    def failed(self) -> bool:
        """True if the task ended without completing (Failed or Stopped)."""
        return self.state in (TaskState.FAILED, TaskState.STOPPED)

    @property
    def succeeded(self) -> bool:
        """True if the task completed."""
        return self.state == TaskState.COMPLETED


# ---------------------------------------------------------------- tag refusal

_PAUSED = ("replication is paused", "resume replication in the Zerto UI, then retry")
_SYNC = ("the VPG has no consistent journal yet", "wait until the sync finishes, then retry")
_BROKEN = ("the VPG needs attention", "fix the VPG in the Zerto UI, then retry")
_STORAGE = ("the VPG has a storage error", "fix the recovery/journal storage in the Zerto UI")
_RECOVERY = (
    "a failover, move or rollback is in progress",
    "finish (commit or roll back) the operation in the Zerto UI, then retry",
)
_DELETING = ("the VPG is being deleted", "protect the VM in another VPG")

# SubStatus → (what, what to do). Sync states that only delay checkpoints
# (4 Sync, 6 DeltaSync, 12 VolumeDeltaSync, 23 BitmapSync, 24 DisconnectedFromPeer)
# are allowed: the tag is accepted and lands late, which the guard reports as pending.
_SUBSTATUS_REFUSALS: dict[int, tuple[str, str]] = {
    1: _SYNC,
    2: _SYNC,
    3: _SYNC,
    7: _BROKEN,
    8: _BROKEN,
    9: ("the VPG protects no VMs", "add the VM to the VPG, then retry"),
    10: ("the recovery site is unreachable and there are no recovery points", _BROKEN[1]),
    11: _SYNC,
    13: _SYNC,
    14: _RECOVERY,
    15: _RECOVERY,
    16: _RECOVERY,
    17: _RECOVERY,
    18: _RECOVERY,
    19: _RECOVERY,
    20: _RECOVERY,
    21: _DELETING,
    22: _DELETING,
    25: _PAUSED,
    26: _PAUSED,
    27: _STORAGE,
    29: _RECOVERY,
    30: _STORAGE,
    31: _STORAGE,
    32: ("a VM in the VPG is not protected", _BROKEN[1]),
}

_STATUS_REFUSALS: dict[int, tuple[str, str]] = {
    0: ("the VPG is still initializing", "wait until initial sync completes, then retry"),
    5: _RECOVERY,
    6: _RECOVERY,
    7: _DELETING,
    8: ("the VPG was failed over and is not replicating", "re-protect the VPG, then retry"),
}


def tag_refusal(vpg: Vpg) -> str | None:
    """Why ``vpg`` cannot take a tagged checkpoint now, or ``None`` if it can.

    Pure: decided from Status/SubStatus alone (tables in docs/client.md).
    """
    if vpg.sub_status in _SUBSTATUS_REFUSALS:
        what, todo = _SUBSTATUS_REFUSALS[vpg.sub_status]
        where = f"SubStatus {vpg.sub_status} {substatus_name(vpg.sub_status)}"
    elif vpg.status in _STATUS_REFUSALS:
        what, todo = _STATUS_REFUSALS[vpg.status]
        where = f"Status {vpg.status} {status_name(vpg.status)}"
    else:
        return None
    return f"VPG '{vpg.name}' cannot take a checkpoint: {what} ({where}); {todo}"


# ---------------------------------------------------------------- site kind

SITE_KINDS = ("vcenter", "hyperv", "vcd", "aws", "azure", "gcp", "public_cloud", "unknown")

# 0 VCVpg and 2 VCDvApp are official; 1 VCvApp and 4 HyperV are community
# mappings; 3 = AWS and 5 = Azure are UNCONFIRMED (the simulator uses them).
_FALLBACK_KINDS: dict[int, str] = {
    0: "vcenter",
    1: "vcenter",
    2: "vcd",
    3: "aws",
    4: "hyperv",
    5: "azure",
}


def _kind_from_name(name: str) -> str | None:
    n = name.casefold()
    for needle, kind in (("aws", "aws"), ("azure", "azure"), ("gcp", "gcp")):
        if needle in n:
            return kind
    if "hyperv" in n or "scvmm" in n:
        return "hyperv"
    if "vcd" in n:
        return "vcd"
    if "publiccloud" in n:
        return "public_cloud"
    if n.startswith("vc"):  # VCVpg, VCvApp
        return "vcenter"
    return None


def site_kind(
    entity: int | None,
    entity_type_names: list[str] | None,
    overrides: Mapping[int, str] | None = None,
) -> str:
    """Map ``Entities.Protected`` to a site kind such as ``vcenter`` or ``aws``.

    Precedence: ``overrides`` (config) > the ZVM's ``/v1/vpgs/entitytypes``
    name at that index > the built-in fallback; ``unknown`` if none applies.
    """
    if entity is None:
        return "unknown"
    if overrides and entity in overrides:
        return overrides[entity]
    if entity_type_names and 0 <= entity < len(entity_type_names):
        kind = _kind_from_name(entity_type_names[entity])
        if kind:
            return kind
    return _FALLBACK_KINDS.get(entity, "unknown")
