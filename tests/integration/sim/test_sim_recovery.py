"""Recovery operations drive the VPG's Status/SubStatus through tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

Vpg = Callable[[str], str]
Wait = Callable[[str], dict[str, Any]]


def state(api: httpx.Client, vid: str) -> tuple[int, int]:
    """(Status, SubStatus) of a VPG."""
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    return vpg["Status"], vpg["SubStatus"]


def run(api: httpx.Client, wait: Wait, path: str, body: Any = None) -> dict[str, Any]:
    """POST an operation, expect a task id, wait for the task."""
    response = api.post(path, json=body)
    assert response.status_code == 200, response.text
    return wait(response.json())


def test_failover_test_start_and_stop(api: httpx.Client, vpg_id: Vpg, wait_task: Wait) -> None:
    """A test keeps MeetingSLA with RunningFailOverTestApi set; stopping records LastTest."""
    vid = vpg_id("jp-local")
    task = run(api, wait_task, f"/v1/vpgs/{vid}/FailoverTest", {})
    assert task["Type"] == "FailOverTest"
    assert task["Status"]["State"] == 6
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    assert vpg["Status"] == 1
    assert vpg["ActiveProcessesApi"]["RunningFailOverTestApi"] is not None
    again = api.post(f"/v1/vpgs/{vid}/FailoverTest", json={})
    assert again.status_code == 400
    body = {"failoverTestSuccess": True, "failoverTestSummary": "ok"}
    run(api, wait_task, f"/v1/vpgs/{vid}/FailoverTestStop", body)
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    assert vpg["ActiveProcessesApi"]["RunningFailOverTestApi"] is None
    assert vpg["LastTest"].endswith("Z")


def test_failover_test_with_unknown_checkpoint_is_400(api: httpx.Client, vpg_id: Vpg) -> None:
    """An unknown checkpointIdentifier is refused with a Message."""
    vid = vpg_id("jp-local")
    response = api.post(f"/v1/vpgs/{vid}/FailoverTest", json={"checkpointIdentifier": "1"})
    assert response.status_code == 400
    assert "checkpoint 1" in response.json()["Message"]


def test_failover_commit(api: httpx.Client, vpg_id: Vpg, wait_task: Wait) -> None:
    """Failover → 5/15; commit → Recovered(8); tags are then refused."""
    vid = vpg_id("jp-local")
    checkpoint = api.get(f"/v1/vpgs/{vid}/checkpoints").json()[-2]["CheckpointIdentifier"]
    body = {"CheckpointIdentifier": checkpoint, "CommitPolicy": 0, "ShutdownPolicy": 0}
    body |= {"TimeToWaitBeforeShutdownInSec": 3600, "IsReverseProtection": False}
    run(api, wait_task, f"/v1/vpgs/{vid}/Failover", body)
    assert state(api, vid) == (5, 15)
    run(api, wait_task, f"/v1/vpgs/{vid}/FailoverCommit", {"isReverseProtection": False})
    assert state(api, vid) == (8, 0)
    tag = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "x"}).json()
    assert wait_task(tag)["Status"]["State"] == 4


def test_failover_commit_with_reverse_protection(
    api: httpx.Client, vpg_id: Vpg, wait_task: Wait
) -> None:
    """Reverse protection swaps the sites and the VPG protects again."""
    vid = vpg_id("CMH-AWS-1")
    run(api, wait_task, f"/v1/vpgs/{vid}/Failover", {"commitPolicy": "Rollback"})
    run(api, wait_task, f"/v1/vpgs/{vid}/FailoverCommit", {"isReverseProtection": True})
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    assert (vpg["Status"], vpg["SubStatus"]) == (1, 0)
    assert vpg["Entities"] == {"Protected": 0, "Recovery": 3}


def test_failover_rollback(api: httpx.Client, vpg_id: Vpg, wait_task: Wait) -> None:
    """Rollback returns the VPG to MeetingSLA."""
    vid = vpg_id("jp-local")
    run(api, wait_task, f"/v1/vpgs/{vid}/Failover", {})
    run(api, wait_task, f"/v1/vpgs/{vid}/FailoverRollback")
    assert state(api, vid) == (1, 0)


@pytest.mark.parametrize("operation", ["FailoverCommit", "FailoverRollback", "FailoverTestStop"])
def test_operation_out_of_state_is_400(api: httpx.Client, vpg_id: Vpg, operation: str) -> None:
    """Commit/rollback/stop with nothing in progress is 400 with a Message."""
    response = api.post(f"/v1/vpgs/{vpg_id('jp-local')}/{operation}", json={})
    assert response.status_code == 400
    assert "no failover" in response.json()["Message"]


def test_failover_of_recovering_vpg_is_400(api: httpx.Client, vpg_id: Vpg) -> None:
    """A VPG in initial sync cannot fail over."""
    response = api.post(f"/v1/vpgs/{vpg_id('syncing-vpg')}/Failover", json={})
    assert response.status_code == 400


def test_bad_commit_policy_is_400(api: httpx.Client, vpg_id: Vpg) -> None:
    """commitPolicy outside 0..2 is refused."""
    response = api.post(f"/v1/vpgs/{vpg_id('jp-local')}/Failover", json={"commitPolicy": 7})
    assert response.status_code == 400


def test_vm_restore_commit_and_rollback(api: httpx.Client, wait_task: Wait) -> None:
    """Restore puts SubStatus 15 on the VPG; commit and rollback clear it."""
    row = api.get("/v1/vms", params={"vmName": "jp-ubuntu"}).json()[0]
    vm, vid = row["VmIdentifier"], row["VpgIdentifier"]
    body = {"vpgIdentifier": vid, "restoredVmName": "jp-ubuntu-restored", "commitPolicy": 2}
    task = run(api, wait_task, f"/v1/vms/{vm}/Restore", body)
    assert task["Type"] == "JournalVmRestore"
    assert state(api, vid) == (1, 15)
    assert api.post(f"/v1/vms/{vm}/Restore", json=body).status_code == 400
    run(api, wait_task, f"/v1/vms/{vm}/RestoreCommit", vid)
    assert state(api, vid) == (1, 0)
    run(api, wait_task, f"/v1/vms/{vm}/Restore", body)
    run(api, wait_task, f"/v1/vms/{vm}/RestoreRollback", vid)
    assert state(api, vid) == (1, 0)
    assert api.post(f"/v1/vms/{vm}/RestoreCommit", json=vid).status_code == 400


def test_restore_of_vm_in_two_vpgs_needs_vpg(api: httpx.Client) -> None:
    """Restore without vpgIdentifier for a VM in two VPGs is 400."""
    vm = api.get("/v1/vms", params={"vmName": "multi-1"}).json()[0]["VmIdentifier"]
    response = api.post(f"/v1/vms/{vm}/Restore", json={})
    assert response.status_code == 400
    assert "Multiple VPGs" in response.json()["Message"]
