"""Parsing of ZVM wire objects and the pure rules over them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest

from unit.zvm.zvm_fakes import VM_WIRE, VPG_WIRE
from zerto_rewind.zvm.models import (
    VPG_STATUS_NAMES,
    VPG_SUBSTATUS_NAMES,
    Checkpoint,
    Task,
    TaskState,
    VmRef,
    Vpg,
    format_iso,
    parse_iso,
    site_kind,
    tag_refusal,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2019-07-11T13:47:23Z", datetime(2019, 7, 11, 13, 47, 23, tzinfo=UTC)),
        ("2019-07-11T16:51:07.022Z", datetime(2019, 7, 11, 16, 51, 7, 22000, tzinfo=UTC)),
        ("2024-01-02T03:04:05.1234567Z", datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
        ("2024-01-02T03:04:05.5+00:00", datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)),
        ("2024-01-02T05:04:05+02:00", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05.1234567", datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
        ("/Date(1479726853000)/", datetime(2016, 11, 21, 11, 14, 13, tzinfo=UTC)),
    ],
)
def test_parse_iso_variants(text: str, expected: datetime) -> None:
    """Z, offsets, naive values and fractions of any length all parse to aware UTC."""
    parsed = parse_iso(text)
    assert parsed == expected
    assert parsed.tzinfo == UTC


@pytest.mark.parametrize("text", ["", "yesterday", "2024-13-45T00:00:00Z", "12:00"])
def test_parse_iso_rejects_garbage(text: str) -> None:
    """Anything that is not a timestamp raises ValueError."""
    with pytest.raises(ValueError, match=r"timestamp|month|day|ISO"):
        parse_iso(text)


def test_format_iso_is_utc_millis_z() -> None:
    """Query arguments are formatted as YYYY-MM-DDTHH:MM:SS.fffZ in UTC."""
    tz = timezone(timedelta(hours=2))
    assert (
        format_iso(datetime(2024, 1, 2, 5, 4, 5, 123999, tzinfo=tz)) == "2024-01-02T03:04:05.123Z"
    )
    assert format_iso(datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02T03:04:05.000Z"


def test_vmref_from_wire() -> None:
    """A VmApi row gives the VM and the VPG that protects it."""
    ref = VmRef.from_wire(VM_WIRE)
    assert ref == VmRef(VM_WIRE["VmIdentifier"], "jp-ubuntu", VPG_WIRE["VpgIdentifier"], "jp-local")


def test_vpg_from_wire_full() -> None:
    """Every Vpg field comes from its PascalCase wire field."""
    vpg = Vpg.from_wire(VPG_WIRE)
    assert (vpg.name, vpg.status, vpg.sub_status) == ("jp-local", 1, 0)
    assert (vpg.status_text, vpg.sub_status_text) == ("MeetingSLA", "None")
    assert (vpg.protected_entity, vpg.recovery_entity) == (0, 0)
    assert (vpg.protected_site_name, vpg.recovery_site_name) == ("Site-A", "Site-B")
    assert (vpg.actual_rpo_s, vpg.configured_rpo_s, vpg.history_minutes) == (6, 300, 60)
    assert vpg.vms_count == 1
    assert vpg.failover_test_running is False


def test_vpg_from_wire_minimal_and_test_running() -> None:
    """Optional fields may be missing; a running test is seen in ActiveProcessesApi."""
    vpg = Vpg.from_wire(
        {
            "VpgIdentifier": "v",
            "VpgName": "n",
            "Status": 2,
            "SourceSite": "Old-A",
            "ActiveProcessesApi": {"RunningFailOverTestApi": {"Stage": 1}},
        }
    )
    assert vpg.sub_status == 0
    assert vpg.protected_entity is None
    assert vpg.actual_rpo_s is None
    assert vpg.protected_site_name == "Old-A"
    assert vpg.failover_test_running is True


@pytest.mark.parametrize(
    "wire",
    [
        [],
        "text",
        {"VpgName": "n", "Status": 1},
        {"VpgIdentifier": "v", "VpgName": "n"},
        {"VpgIdentifier": "v", "VpgName": "n", "Status": "MeetingSLA"},
        {"VpgIdentifier": "v", "VpgName": "n", "Status": 1, "ActualRPO": "6"},
    ],
)
def test_vpg_from_wire_malformed(wire: object) -> None:
    """A body without the required fields or with wrong types raises ValueError."""
    with pytest.raises(ValueError, match=r"\w"):
        Vpg.from_wire(wire)


def test_checkpoint_from_wire_seven_digit_fraction() -> None:
    """Checkpoint ids are strings; 7-digit fractions and missing tags parse."""
    cp = Checkpoint.from_wire(
        {"CheckpointIdentifier": 786, "TimeStamp": "2024-05-01T10:00:00.1234567Z", "Tag": None}
    )
    assert cp == Checkpoint("786", datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC), None, None)
    tagged = Checkpoint.from_wire(
        {"CheckpointIdentifier": "7", "TimeStamp": "2024-05-01T10:00:00Z", "Tag": "t", "Type": 1}
    )
    assert (tagged.tag, tagged.type) == ("t", 1)


def test_checkpoint_from_wire_malformed() -> None:
    """A checkpoint without a timestamp or with a bad one raises ValueError."""
    with pytest.raises(ValueError, match="TimeStamp"):
        Checkpoint.from_wire({"CheckpointIdentifier": "1"})
    with pytest.raises(ValueError, match="ISO"):
        Checkpoint.from_wire({"CheckpointIdentifier": "1", "TimeStamp": "soon"})


def test_task_from_wire_and_states() -> None:
    """A TaskApi object parses; done/failed/succeeded follow the state."""
    wire = {
        "TaskIdentifier": "t.s",
        "Type": "InsertTaggedCP",
        "Status": {"State": 6, "Progress": 100},
        "CompleteReason": "",
        "Started": "2024-05-01T10:00:00Z",
        "Completed": "2024-05-01T10:00:01.5Z",
    }
    task = Task.from_wire(wire)
    assert (task.task_id, task.type, task.progress, task.complete_reason) == (
        "t.s",
        "InsertTaggedCP",
        100,
        None,
    )
    assert task.completed == datetime(2024, 5, 1, 10, 0, 1, 500000, tzinfo=UTC)
    assert (task.done, task.succeeded, task.failed) == (True, True, False)
    running = dataclasses.replace(task, state=TaskState.IN_PROGRESS)
    assert (running.done, running.succeeded, running.failed) == (False, False, False)
    failed = dataclasses.replace(task, state=TaskState.FAILED)
    assert (failed.done, failed.failed, failed.state_name) == (True, True, "FAILED")
    assert dataclasses.replace(task, state=99).state_name == "UNKNOWN(99)"


def test_task_from_wire_requires_state() -> None:
    """A task without Status.State raises ValueError."""
    with pytest.raises(ValueError, match="State"):
        Task.from_wire({"TaskIdentifier": "t", "Status": {}})


def test_status_tables_complete() -> None:
    """The status table covers 0..8 and the substatus table 0..32."""
    assert sorted(VPG_STATUS_NAMES) == list(range(9))
    assert sorted(VPG_SUBSTATUS_NAMES) == list(range(33))


def _vpg(status: int, sub: int, name: str = "paused-vpg") -> Vpg:
    return dataclasses.replace(Vpg.from_wire(VPG_WIRE), name=name, status=status, sub_status=sub)


def test_tag_refusal_paused_message() -> None:
    """A user-paused VPG is refused with the substatus and what to do."""
    assert tag_refusal(_vpg(1, 25)) == (
        "VPG 'paused-vpg' cannot take a checkpoint: replication is paused "
        "(SubStatus 25 ReplicationPausedUserInitiated); "
        "resume replication in the Zerto UI, then retry"
    )


@pytest.mark.parametrize(
    "sub",
    [1, 2, 3, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 25, 26, 27, 29, 30, 31, 32],
)
def test_tag_refusal_refused_substatuses(sub: int) -> None:
    """Substatuses where no tag can be made are refused, naming the substatus."""
    reason = tag_refusal(_vpg(1, sub))
    assert reason is not None
    assert f"SubStatus {sub} {VPG_SUBSTATUS_NAMES[sub]}" in reason


@pytest.mark.parametrize("sub", [0, 4, 5, 6, 12, 23, 24, 28])
def test_tag_refusal_allowed_substatuses(sub: int) -> None:
    """Healthy and catching-up substatuses allow a tag."""
    assert tag_refusal(_vpg(1, sub)) is None


@pytest.mark.parametrize(
    ("status", "refused"),
    [
        (0, True),
        (1, False),
        (2, False),
        (3, False),
        (4, False),
        (5, True),
        (6, True),
        (7, True),
        (8, True),
    ],
)
def test_tag_refusal_statuses(status: int, refused: bool) -> None:
    """Initializing, failing over, moving, deleting and recovered VPGs are refused."""
    reason = tag_refusal(_vpg(status, 0))
    assert (reason is not None) is refused
    if reason:
        assert f"Status {status} {VPG_STATUS_NAMES[status]}" in reason


SIM_TYPES = ["VCVpg", "VCvApp", "VCDvApp", "AWS", "HyperV", "Azure"]


@pytest.mark.parametrize(
    ("entity", "names", "overrides", "expected"),
    [
        (0, SIM_TYPES, None, "vcenter"),
        (1, SIM_TYPES, None, "vcenter"),
        (2, SIM_TYPES, None, "vcd"),
        (3, SIM_TYPES, None, "aws"),
        (4, SIM_TYPES, None, "hyperv"),
        (5, SIM_TYPES, None, "azure"),
        (3, ["VCVpg", "VCvApp", "VCDvApp", "PublicCloud", "HyperV"], None, "public_cloud"),
        (4, ["a", "b", "c", "d", "SCVMM"], None, "hyperv"),
        (6, [*SIM_TYPES, "GCP"], None, "gcp"),
        (3, SIM_TYPES, {3: "azure"}, "azure"),
        (3, None, None, "aws"),
        (5, ["VCVpg"], None, "azure"),
        (9, None, None, "unknown"),
        (None, SIM_TYPES, None, "unknown"),
        (1, ["VCVpg", "mystery"], None, "vcenter"),
    ],
)
def test_site_kind(
    entity: int | None, names: list[str] | None, overrides: dict[int, str] | None, expected: str
) -> None:
    """Overrides beat the ZVM's entity-type names, which beat the built-in fallback."""
    assert site_kind(entity, names, overrides) == expected
