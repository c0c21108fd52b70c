"""Integer enums the simulator puts on the wire, with their names.

Each list's index is the integer value, which is also how ``/v1/vpgs/statuses`` and
friends are served. Values marked UNCONFIRMED in docs/simulator.md are this
simulator's choice.
"""

from __future__ import annotations

import re
from typing import Final

STATUSES_DOCS: Final = [
    "Initializing",
    "MeetingSLA",
    "NotMeetingSLA",
    "RpoNotMeetingSLA",
    "HistoryNotMeetingSLA",
    "FailingOver",
    "Moving",
    "Deleting",
    "Recovered",
]
# Community code that parses live data swaps 3 and 4; which is right is UNCONFIRMED.
STATUSES_COMMUNITY: Final = [
    *STATUSES_DOCS[:3],
    "HistoryNotMeetingSLA",
    "RpoNotMeetingSLA",
    *STATUSES_DOCS[5:],
]

SUB_STATUSES: Final = [
    "None",
    "InitialSync",
    "Creating",
    "VolumeInitialSync",
    "Sync",
    "RecoveryPossible",
    "DeltaSync",
    "NeedsConfiguration",
    "Error",
    "EmptyProtectionGroup",
    "DisconnectedFromPeerNoRecoveryPoints",
    "FullSync",
    "VolumeDeltaSync",
    "VolumeFullSync",
    "FailingOverCommitting",
    "FailingOverBeforeCommit",
    "FailingOverRollingBack",
    "Promoting",
    "MovingCommitting",
    "MovingBeforeCommit",
    "MovingRollingBack",
    "Deleting",
    "PendingRemove",
    "BitmapSync",
    "DisconnectedFromPeer",
    "ReplicationPausedUserInitiated",
    "ReplicationPausedSystemInitiated",
    "RecoveryStorageProfileError",
    "Backup",
    "RollingBack",
    "RecoveryStorageError",
    "JournalStorageError",
    "VmNotProtectedError",
]

# 3 = AWS and 5 = Azure are this simulator's choice; the real numbering is UNCONFIRMED.
ENTITY_TYPES: Final = ["VCVpg", "VCvApp", "VCDvApp", "AWS", "HyperV", "Azure"]
ENTITY_BY_KIND: Final = {"vcenter": 0, "vcd": 2, "aws": 3, "hyperv": 4, "azure": 5}
SITE_TYPE_BY_KIND: Final = {
    "vcenter": "VCenter",
    "vcd": "VCD",
    "aws": "AWS",
    "hyperv": "HyperV",
    "azure": "Azure",
}
DEFAULT_CADENCE_S: Final = {"vcenter": 5.0, "hyperv": 5.0, "vcd": 5.0, "azure": 60.0, "aws": 630.0}
SITE_KINDS: Final = tuple(sorted(DEFAULT_CADENCE_S))

PRIORITIES: Final = ["Low", "Medium", "High"]
COMMIT_POLICIES: Final = ["Rollback", "Commit", "None"]
SHUTDOWN_POLICIES: Final = ["None", "Shutdown", "ForceShutdown"]

# Status values that do not depend on the 3/4 numbering choice.
INITIALIZING, MEETING_SLA, NOT_MEETING_SLA = 0, 1, 2
FAILING_OVER, MOVING, DELETING, RECOVERED = 5, 6, 7, 8

SUB_NONE, SUB_INITIAL_SYNC, SUB_ERROR = 0, 1, 8
SUB_FAILING_OVER_BEFORE_COMMIT = 15
SUB_PAUSED_USER, SUB_PAUSED_SYSTEM = 25, 26

# TaskStatusEnumApi.
TASK_IN_PROGRESS, TASK_FAILED, TASK_COMPLETED = 1, 4, 6

_NO_TAG_STATUSES: Final = {INITIALIZING, FAILING_OVER, MOVING, DELETING, RECOVERED}
_NO_TAG_SUBSTATUSES: Final = {
    1,  # InitialSync
    2,  # Creating
    3,  # VolumeInitialSync
    7,  # NeedsConfiguration
    8,  # Error
    9,  # EmptyProtectionGroup
    10,  # DisconnectedFromPeerNoRecoveryPoints
    21,  # Deleting
    22,  # PendingRemove
    24,  # DisconnectedFromPeer
    25,  # ReplicationPausedUserInitiated
    26,  # ReplicationPausedSystemInitiated
    27,  # RecoveryStorageProfileError
    30,  # RecoveryStorageError
    31,  # JournalStorageError
    32,  # VmNotProtectedError
}

_WORD = re.compile(r"SLA|RPO|[A-Z][a-z]*|[a-z]+|\d+")


def sub_status_name(value: int) -> str:
    """The name of a SubStatus value, or ``SubStatus<n>`` beyond the known list."""
    return SUB_STATUSES[value] if 0 <= value < len(SUB_STATUSES) else f"SubStatus{value}"


def status_name(value: int, names: list[str]) -> str:
    """The name of a Status value in the given numbering."""
    return names[value] if 0 <= value < len(names) else f"Status{value}"


def describe(name: str) -> str:
    """``ReplicationPausedUserInitiated`` → ``Replication Paused User Initiated``."""
    return " ".join(_WORD.findall(name)) or name


def tag_refusal(status: int, sub_status: int, names: list[str]) -> str | None:
    """Why a VPG in this state cannot take a checkpoint, or None when it can."""
    if sub_status in _NO_TAG_SUBSTATUSES:
        return sub_status_name(sub_status)
    if status in _NO_TAG_STATUSES:
        return status_name(status, names)
    return None
