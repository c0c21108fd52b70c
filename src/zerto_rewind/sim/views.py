"""Wire shapes: PascalCase objects, lowercase link objects, integer enums, ``Z`` times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from zerto_rewind.sim import enums
from zerto_rewind.sim.journal import Checkpoint
from zerto_rewind.sim.models import Site, Vm, Vpg
from zerto_rewind.sim.state import Backend
from zerto_rewind.sim.tasks import Task

VERSION = "10.0.60"


def iso(t: float | None) -> str | None:
    """Epoch seconds as ``2024-05-01T12:00:00.123Z``."""
    if t is None:
        return None
    # From whole milliseconds, so a time never displays as the millisecond before it.
    stamp = datetime.fromtimestamp(round(t * 1000) / 1000, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def link(
    base: str, kind: str, path: str, identifier: str, rel: str | None = None
) -> dict[str, Any]:
    """A ResourceLink; these alone keep lowercase keys on the wire."""
    return {"href": f"{base}{path}", "identifier": identifier, "rel": rel, "type": kind}


def site_link(base: str, site: Site, local: Site) -> dict[str, Any]:
    """Link to the answering ZVM's own site (``local``) or to a peer site."""
    if site is local:
        return link(base, "LocalSiteApi", "/v1/localsite", site.identifier)
    return link(base, "PeerSiteApi", f"/v1/peersites/{site.identifier}", site.identifier)


def checkpoint(cp: Checkpoint | None) -> dict[str, Any] | None:
    """CheckpointApi."""
    if cp is None:
        return None
    return {
        "CheckpointIdentifier": cp.identifier,
        "Tag": cp.tag,
        "TimeStamp": iso(cp.timestamp),
        "Type": cp.type,
    }


def _entities(vpg: Vpg) -> dict[str, int]:
    return {
        "Protected": enums.ENTITY_BY_KIND[vpg.protected.kind],
        "Recovery": enums.ENTITY_BY_KIND[vpg.recovery.kind],
    }


def _common(backend: Backend, base: str, vpg: Vpg) -> dict[str, Any]:
    """Fields VPG and VM rows share."""
    latest = vpg.journal.latest()
    now = backend.clock()
    return {
        "ActualRPO": 0 if latest is None else int(now - latest.timestamp),
        "Entities": _entities(vpg),
        "Priority": vpg.priority,
        "ProtectedSite": site_link(base, vpg.protected, backend.local),
        "RecoverySite": site_link(base, vpg.recovery, backend.local),
        "ProtectedSiteName": vpg.protected.name,
        "RecoverySiteName": vpg.recovery.name,
        "Status": backend.effective_status(vpg),
        "SubStatus": vpg.sub_status,
        "LastTest": iso(vpg.last_test),
        "OrganizationName": None,
    }


def vpg(backend: Backend, base: str, vpg: Vpg) -> dict[str, Any]:
    """VpgApi."""
    body = _common(backend, base, vpg)
    status = body["Status"]
    earliest = vpg.journal.earliest()
    history = 0 if earliest is None else int((backend.clock() - earliest.timestamp) // 60)
    test = None if vpg.test is None else {"Stage": "Testing"}
    body |= {
        "VpgIdentifier": vpg.identifier,
        "VpgName": vpg.name,
        "VpgDescription": None,
        "VpgType": "Regular",
        "VmsCount": len(vpg.vms),
        "StatusDescription": enums.describe(enums.status_name(status, backend.status_names)),
        "SubStatusDescription": enums.describe(enums.sub_status_name(vpg.sub_status)),
        "ConfiguredRpoSeconds": vpg.rpo_seconds,
        "HistoryStatusApi": {
            "ActualHistoryInMinutes": history,
            "ConfiguredHistoryInMinutes": vpg.history_minutes,
            "EarliestCheckpoint": checkpoint(earliest),
        },
        "FailSafeHistory": None,
        "ActiveProcessesApi": {"RunningFailOverTestApi": test},
        "Link": link(base, "VpgApi", f"/v1/vpgs/{vpg.identifier}", vpg.identifier),
        "ProgressPercentage": 100 if vpg.sub_status != enums.SUB_INITIAL_SYNC else 37,
        "AlertStatus": 0 if status == enums.MEETING_SLA else 1,
        "BackupEnabled": False,
        "IOPs": 12,
        "ThroughputInMB": 0.4,
        "ProvisionedStorageInMB": 40960 * len(vpg.vms),
        "UsedStorageInMB": 18000 * len(vpg.vms),
        "ServiceProfile": None,
        "Zorg": None,
    }
    return body


def vm(backend: Backend, base: str, vm: Vm, vpg: Vpg) -> dict[str, Any]:
    """VmApi, one row per (VM, VPG) pair."""
    body = _common(backend, base, vpg)
    moref = vm.identifier.rsplit(".", 1)[-1]
    row_id = f"{vm.identifier}?VpgIdentifier={vpg.identifier}"
    row_link = link(base, "VmApi", f"/v1/vms/{row_id}", row_id)
    row_link |= {"vpg_identifier": vpg.identifier, "instance_identifier": vm.instance_uuid}
    body |= {
        "VmIdentifier": vm.identifier,
        "VmName": vm.name,
        "VpgIdentifier": vpg.identifier,
        "VpgName": vpg.name,
        "Link": row_link,
        "CpuCoresNum": 2,
        "MemorySizeInMB": 4096,
        "ProvisionedStorageInMB": 40960,
        "UsedStorageInMB": 18000,
        "JournalUsedStorageMb": 2048,
        "JournalHardLimit": {"LimitType": 1, "LimitValue": 153600},
        "JournalWarningThreshold": {"LimitType": 1, "LimitValue": 115200},
        "IOPs": 12,
        "ThroughputInMB": 0.4,
        "OutgoingBandWidthInMbps": 1.2,
        "Volumes": [{"VmVolumeIdentifier": "scsi:0:0", "PublicCloudVolumeIdentifier": None}],
        "Nics": [{"NicIdentifier": "Network adapter 1"}],
        "EnabledActions": {"IsFlrEnabled": True},
        "IsVmExists": True,
        "HardwareVersion": "vmx-19",
        "GuestOs": "Other Linux (64-bit)",
        "IsAgentInstalled": False,
        "OwningHostIdentifier": f"{vm.site.identifier}.host-15",
        "OwningHostName": "esx01.local",
        "OwningDatastoreIdentifier": f"{vm.site.identifier}.datastore-3014",
        "OwningDatastoreName": "datastore1",
        "RecoveryHostIdentifier": f"{vpg.recovery.identifier}.host-21",
        "RecoveryHostName": "esx-dr01.local",
        "VmNetworkInformation": {
            "NetworkAdapters": [
                {
                    "DisplayName": "Network adapter 1",
                    "NetworkIdentifier": f"network-{moref}",
                    "IpAddresses": ["10.0.0.10"],
                },
            ]
        },
        "PlatformInformation": None,
    }
    return body


def task(backend: Backend, base: str, task: Task) -> dict[str, Any]:
    """TaskApi."""
    now = backend.clock()
    state, progress, completed = task.state_at(now)
    vpg_links = [link(base, "VpgApi", f"/v1/vpgs/{v}", v) for v in task.vpg_ids]
    return {
        "TaskIdentifier": task.identifier,
        "Type": task.type,
        "Status": {"State": state, "Progress": progress},
        "InitiatedBy": task.initiated_by,
        "Started": iso(task.started),
        "Completed": iso(completed),
        "CompleteReason": task.complete_reason(now),
        "IsCancellable": False,
        "Link": link(base, "TaskApi", f"/v1/tasks/{task.identifier}", task.identifier),
        "RelatedEntities": {
            "Vpgs": vpg_links,
            "Sites": [link(base, "LocalSiteApi", "/v1/localsite", task.site_id)],
            "Hosts": [],
            "FlrSessions": [],
        },
        "Generation": task.generation,
    }


def local_site(backend: Backend, base: str) -> dict[str, Any]:
    """LocalSiteApi."""
    site = backend.local
    return {
        "SiteIdentifier": site.identifier,
        "SiteName": site.name,
        "Location": "Simulated lab",
        "Version": VERSION,
        "DisplayVersion": "10.0 Update 6",
        "ZvmApiVersion": "1.0",
        "ContactEmail": "ops@example.invalid",
        "ContactName": "zerto-rewind simulator",
        "ContactPhone": "",
        "IsReplicationToSelfEnabled": True,
        "UtcOffsetInMinutes": 0,
        "SiteType": enums.SITE_TYPE_BY_KIND[site.kind],
        "SiteTypeVersion": "8.0",
        "IpAddress": "127.0.0.1",
        "BandwidthThrottlingInMBs": -1,
        "PlatformInformation": {"Azure": None, "VCenter": {"Ip": "127.0.0.1"}},
        "IsLoginBannerEnabled": False,
        "LoginBanner": None,
        "Link": site_link(base, site, site),
    }


def peer_site(backend: Backend, base: str, site: Site) -> dict[str, Any]:
    """PeerSiteApi."""
    return {
        "SiteIdentifier": site.identifier,
        "PeerSiteName": site.name,
        "PairingStatus": 0,
        "Location": site.name,
        "HostName": f"{site.name.lower()}.example.invalid",
        "Port": 9071,
        "ProvisionedStorage": 0,
        "UsedStorage": 0,
        "IncomingThroughputInMb": 0.0,
        "OutgoingBandWidth": 0.0,
        "Version": VERSION,
        "SiteType": enums.SITE_TYPE_BY_KIND[site.kind],
        "RegionName": {"aws": "us-east-2", "azure": "eastus"}.get(site.kind),
        "Link": site_link(base, site, backend.local),
    }
