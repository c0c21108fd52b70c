"""Shapes and filters of the read API: PascalCase, lowercase links, int enums, Z times."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
LINK_KEYS = {"href", "identifier", "rel", "type"}
GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def assert_pascal(obj: Any, path: str = "") -> None:
    """Every key is PascalCase except inside link objects."""
    if isinstance(obj, list):
        for item in obj:
            assert_pascal(item, path)
    elif isinstance(obj, dict):
        if set(obj) >= LINK_KEYS:
            return
        for key, value in obj.items():
            assert key[:1].isupper(), f"{path}.{key} is not PascalCase"
            assert_pascal(value, f"{path}.{key}")


def test_vpg_shape(api: httpx.Client, vpg_id: Callable[[str], str]) -> None:
    """A VPG carries the documented fields with int enums, links and Z times."""
    vpg = api.get(f"/v1/vpgs/{vpg_id('jp-local')}").json()
    assert_pascal(vpg)
    assert GUID.match(vpg["VpgIdentifier"])
    for key in ("Status", "SubStatus", "Priority", "AlertStatus", "ConfiguredRpoSeconds"):
        assert isinstance(vpg[key], int)
    assert vpg["Status"] == 1
    assert vpg["SubStatus"] == 0
    assert vpg["StatusDescription"] == "Meeting SLA"
    assert set(vpg["ProtectedSite"]) == LINK_KEYS
    assert vpg["ProtectedSite"]["type"] == "LocalSiteApi"
    assert vpg["Entities"] == {"Protected": 0, "Recovery": 0}
    history = vpg["HistoryStatusApi"]
    assert history["ConfiguredHistoryInMinutes"] == 60
    assert history["ActualHistoryInMinutes"] >= 59
    assert ISO_Z.match(history["EarliestCheckpoint"]["TimeStamp"])
    assert 0 <= vpg["ActualRPO"] <= 2
    assert vpg["ActiveProcessesApi"] == {"RunningFailOverTestApi": None}


def test_entities_mark_cloud_protected_sites(api: httpx.Client) -> None:
    """AWS-protected VPGs show Protected 3, Azure-protected 5."""
    by_name = {v["VpgName"]: v for v in api.get("/v1/vpgs").json()}
    assert by_name["CMH-AWS-1"]["Entities"]["Protected"] == 3
    assert by_name["EUS-AZ-1"]["Entities"]["Protected"] == 5
    assert by_name["CMH-AWS-1"]["ProtectedSiteName"] == "CMH-AWS"


def test_vms_filter_is_case_insensitive_exact(api: httpx.Client) -> None:
    """vmName matches exactly, ignoring case."""
    rows = api.get("/v1/vms", params={"vmname": "JP-UBUNTU"}).json()
    assert [r["VmName"] for r in rows] == ["jp-ubuntu"]
    assert api.get("/v1/vms", params={"vmName": "jp-ubunt"}).json() == []


def test_vm_row_shape(api: httpx.Client) -> None:
    """A VM row has its VPG, a link whose identifier names the VPG, volumes and NICs."""
    row = api.get("/v1/vms", params={"vmName": "jp-ubuntu"}).json()[0]
    assert_pascal(row)
    site = row["ProtectedSite"]["identifier"]
    assert re.match(rf"^{site}\.vm-\d+$", row["VmIdentifier"])
    assert (
        row["Link"]["identifier"] == f"{row['VmIdentifier']}?VpgIdentifier={row['VpgIdentifier']}"
    )
    assert row["VpgName"] == "jp-local"
    assert row["Volumes"][0]["VmVolumeIdentifier"] == "scsi:0:0"
    assert row["Nics"][0]["NicIdentifier"]


def test_vpg_name_and_vm_identifier_filters(api: httpx.Client) -> None:
    """vpgName and vmIdentifier filter /v1/vms; name filters /v1/vpgs."""
    rows = api.get("/v1/vms", params={"vpgName": "MULTI-B"}).json()
    assert [(r["VmName"], r["VpgName"]) for r in rows] == [("multi-1", "multi-b")]
    same = api.get("/v1/vms", params={"vmIdentifier": rows[0]["VmIdentifier"].upper()}).json()
    assert {r["VpgName"] for r in same} == {"multi-a", "multi-b"}
    assert [v["VpgName"] for v in api.get("/v1/vpgs", params={"name": "Jp-Local"}).json()] == [
        "jp-local"
    ]


def test_vm_in_two_vpgs(api: httpx.Client) -> None:
    """A VM in two VPGs gives two rows; GET by id needs vpgIdentifier, else 400."""
    rows = api.get("/v1/vms", params={"vmName": "multi-1"}).json()
    assert sorted(r["VpgName"] for r in rows) == ["multi-a", "multi-b"]
    assert rows[0]["VmIdentifier"] == rows[1]["VmIdentifier"]
    vm_id = rows[0]["VmIdentifier"]
    ambiguous = api.get(f"/v1/vms/{vm_id}")
    assert ambiguous.status_code == 400
    assert "Multiple VPGs" in ambiguous.json()["Message"]
    one = api.get(f"/v1/vms/{vm_id}", params={"vpgIdentifier": rows[1]["VpgIdentifier"]})
    assert one.json()["VpgName"] == rows[1]["VpgName"]


def test_unknown_ids_are_404_with_message(api: httpx.Client) -> None:
    """Unknown VPG, VM and task ids answer 404 with an ASP.NET Message body."""
    for path in ("/v1/vpgs/nope", "/v1/vms/nope", "/v1/tasks/nope", "/v1/vpgs/nope/checkpoints"):
        response = api.get(path)
        assert response.status_code == 404, path
        assert "Message" in response.json()


def test_unknown_path_404_wrong_method_405(api: httpx.Client) -> None:
    """An unknown path is 404; a known path with the wrong method is 405 with Allow."""
    assert api.get("/v1/nothing-here").status_code == 404
    response = api.delete("/v1/vpgs")
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET"


def test_paths_match_case_insensitively(api: httpx.Client, vpg_id: Callable[[str], str]) -> None:
    """Routing ignores case, as ZVM's does."""
    assert api.get(f"/V1/VPGS/{vpg_id('jp-local')}/CHECKPOINTS/stats").status_code == 200


def test_lookup_arrays(api: httpx.Client) -> None:
    """statuses, substatuses and entitytypes are string arrays indexed by value."""
    statuses = api.get("/v1/vpgs/statuses").json()
    assert statuses[1] == "MeetingSLA"
    assert statuses[3] == "RpoNotMeetingSLA"
    assert api.get("/v1/vpgs/substatuses").json()[25] == "ReplicationPausedUserInitiated"
    types = api.get("/v1/vpgs/entitytypes").json()
    assert types == ["VCVpg", "VCvApp", "VCDvApp", "AWS", "HyperV", "Azure"]


def test_sites(api: httpx.Client) -> None:
    """localsite and peersites describe the sites."""
    local = api.get("/v1/localsite").json()
    assert_pascal(local)
    assert local["SiteType"] == "VCenter"
    assert local["Version"] == "10.0.60"
    assert GUID.match(local["SiteIdentifier"])
    peers = {p["PeerSiteName"]: p for p in api.get("/v1/peersites").json()}
    assert peers["CMH-AWS"]["SiteType"] == "AWS"


def test_checkpoints_ascending_with_date_filters(
    api: httpx.Client, vpg_id: Callable[[str], str]
) -> None:
    """Checkpoints come oldest first; startDate/endDate take ISO Z or epoch ms."""
    path = f"/v1/vpgs/{vpg_id('jp-local')}/checkpoints"
    full = api.get(path).json()
    assert len(full) > 3000  # an hour of 1-second checkpoints
    ids = [int(c["CheckpointIdentifier"]) for c in full]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(ISO_Z.match(c["TimeStamp"]) and c["Type"] == 0 for c in full)
    now_ms = int(time.time() * 1000)
    recent = api.get(path, params={"startDate": str(now_ms - 5000)}).json()
    assert 3 <= len(recent) <= 7
    start = recent[1]["TimeStamp"]
    assert api.get(path, params={"startDate": start}).json()[0]["TimeStamp"] == start
    no_fraction = start.split(".")[0] + "Z"
    assert api.get(path, params={"startDate": no_fraction, "endDate": start}).json()
    assert api.get(path, params={"startDate": "yesterday"}).status_code == 400


def test_checkpoint_stats(api: httpx.Client, vpg_id: Callable[[str], str]) -> None:
    """stats gives Earliest and Latest checkpoints of the journal."""
    stats = api.get(f"/v1/vpgs/{vpg_id('jp-local')}/checkpoints/stats").json()
    assert set(stats) == {"Earliest", "Latest"}
    assert int(stats["Earliest"]["CheckpointIdentifier"]) < int(
        stats["Latest"]["CheckpointIdentifier"]
    )


def test_syncing_vpg_has_no_checkpoints(api: httpx.Client, vpg_id: Callable[[str], str]) -> None:
    """A VPG in initial sync has no journal yet: empty list, null stats."""
    vid = vpg_id("syncing-vpg")
    assert api.get(f"/v1/vpgs/{vid}/checkpoints").json() == []
    assert api.get(f"/v1/vpgs/{vid}/checkpoints/stats").json() == {
        "Earliest": None,
        "Latest": None,
    }
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    assert (vpg["Status"], vpg["SubStatus"]) == (0, 1)


def test_paused_vpg_keeps_old_history(api: httpx.Client, vpg_id: Callable[[str], str]) -> None:
    """The paused VPG shows checkpoints from before the pause and a growing ActualRPO."""
    vpg = api.get(f"/v1/vpgs/{vpg_id('paused-vpg')}").json()
    assert (vpg["Status"], vpg["SubStatus"]) == (2, 25)
    assert vpg["ActualRPO"] >= 600
    assert vpg["HistoryStatusApi"]["EarliestCheckpoint"] is not None


def test_tasks_list(api: httpx.Client, vpg_id: Callable[[str], str]) -> None:
    """/v1/tasks lists the tasks started so far."""
    vid = vpg_id("jp-local")
    task_id = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "t"}).json()
    tasks = api.get("/v1/tasks").json()
    assert [t["TaskIdentifier"] for t in tasks] == [task_id]
    assert api.get("/v1/tasks", params={"type": "FailOver"}).json() == []
