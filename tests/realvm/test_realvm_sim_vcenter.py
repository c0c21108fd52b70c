"""The ZVM simulator linked to vcsim: VM identities from vCenter, VM states put back.

The simulator runs as its own process (``python -m zerto_rewind.sim --vcenter ...``, the
login in its environment), over TLS; the test speaks its REST API with httpx, changes VMs
directly in vcsim, and reads every result back from vcsim with a pyVmomi session of its own.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.realvm import VCenter, change_vm, mcvsphere_session, vm_states
from support.sim import launch_sim, sim_settings
from zerto_rewind.config.settings import ResolverSpec
from zerto_rewind.core.decision import VmIdentity
from zerto_rewind.gateway.identity import resolver_identity, zerto_identity
from zerto_rewind.zvm import TokenCache, ZvmClient

pytestmark = pytest.mark.anyio

WEB, APP = "DC0_H0_VM0", "DC0_H0_VM1"
TASK_COMPLETED, TASK_FAILED = 6, 4
ESTATE = {
    "vpgs": [
        {"name": "web-vpg", "site_kind": "vcenter", "vms": [WEB, APP]},
        {"name": "ghost-vpg", "site_kind": "vcenter", "vms": ["not-in-vcenter"]},
    ]
}


class _Ready:
    """What ``sim_settings`` reads of a simulator: its ready-file fields."""

    def __init__(self, credentials: dict[str, Any]) -> None:
        self.credentials = credentials


class Zvm:
    """The simulator's REST API over TLS, as a ZVM client speaks it."""

    def __init__(self, ready: dict[str, Any]) -> None:
        self.ready = ready
        tls = ssl.create_default_context(cafile=ready["ca_bundle"])
        self.http = httpx.Client(base_url=ready["url"], verify=tls, timeout=30)
        token = self.http.post(
            "/auth/realms/zerto/protocol/openid-connect/token",
            data={"grant_type": "password", "client_id": "zerto-client",
                  "username": ready["username"], "password": ready["password"]},
        )  # fmt: skip
        token.raise_for_status()
        self.http.headers["Authorization"] = f"Bearer {token.json()['access_token']}"

    def get(self, path: str, **params: str) -> Any:
        answer = self.http.get(path, params=params)
        answer.raise_for_status()
        return answer.json()

    def post(self, path: str, body: Any) -> Any:
        answer = self.http.post(path, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def wait_task(self, task_id: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            task: dict[str, Any] = self.get(f"/v1/tasks/{task_id}")
            if task["Status"]["State"] in (TASK_COMPLETED, TASK_FAILED):
                return task
            time.sleep(0.1)
        raise AssertionError(f"task {task_id} still running after {timeout} s")

    def tag(self, vpg_id: str, name: str) -> dict[str, Any]:
        """Tag and wait until the tagged checkpoint lands."""
        self.wait_task(self.post(f"/v1/vpgs/{vpg_id}/checkpoints", {"checkpointName": name}))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tagged = [c for c in self.get(f"/v1/vpgs/{vpg_id}/checkpoints") if c["Tag"] == name]
            if tagged:
                return tagged[0]
            time.sleep(0.1)
        raise AssertionError(f"tag {name!r} never landed")


@pytest.fixture
def linked(vcenter: VCenter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    estate = tmp_path / "estate.json"
    estate.write_text(json.dumps(ESTATE))
    monkeypatch.setenv("ZERTO_SIM_VCENTER_USER", vcenter.user)
    monkeypatch.setenv("ZERTO_SIM_VCENTER_PASSWORD", vcenter.password)
    with launch_sim(tmp_path) as start:
        proc, ready = start(
            "--estate", str(estate), "--cadence", "vcenter=1", "--jitter", "0",
            "--tag-lag", "0.2", "--task-duration", "0.2",
            "--vcenter", f"https://{vcenter.host}/sdk", "--vcenter-insecure",
        )  # fmt: skip
        zvm = Zvm(ready)
        try:
            yield proc, zvm
        finally:
            zvm.http.close()


def _rows(zvm: Zvm) -> dict[str, dict[str, Any]]:
    return {row["VmName"]: row for row in zvm.get("/v1/vms")}


async def test_identities_come_from_the_vcenter(
    vcenter: VCenter, linked: Any, tmp_path: Path
) -> None:
    _proc, zvm = linked
    seen = vm_states(vcenter)
    rows = _rows(zvm)
    for name in (WEB, APP):
        vm = seen["vms"][name]
        assert rows[name]["VmIdentifier"] == f"{seen['server_id']}.{vm['moref']}"
        assert rows[name]["Link"]["instance_identifier"] == vm["instance_uuid"]
    # The gateway's identity check, on what the guard's ZVM client reads from the simulator
    # and what mcvsphere's resolver answers: the instance UUIDs are one.
    settings = sim_settings(_Ready(zvm.ready))
    with ZvmClient(settings, token_cache=TokenCache(str(tmp_path / "state"))) as client:
        (ref,) = client.find_vms(WEB)
    by_uuid = ResolverSpec(
        server="vsphere", tool="get_vm_info", arg="name", id_path="instance_uuid",
        zerto_field="instance_identifier", zerto_pattern="^(?P<id>.+)$",
    )  # fmt: skip
    expected = zerto_identity(VmIdentity(ref.vm_id, ref.instance_id), by_uuid)
    async with mcvsphere_session(vcenter, tmp_path / "mcvsphere") as server:
        answer = await server.call_tool("get_vm_info", {"name": WEB})
    assert expected == (resolver_identity(answer, "instance_uuid"), None)
    # The moref form: Zerto's whole VmIdentifier is this vCenter's and this VM's.
    by_moref = ResolverSpec(server="vsphere", tool="find_vm", arg="name", id_path="moref")
    whole = zerto_identity(VmIdentity(ref.vm_id, ref.instance_id), by_moref)
    assert whole == (seen["vms"][WEB]["moref"], seen["server_id"])
    # A VM the vCenter does not show keeps a generated identity, under its site's GUID.
    ghost = rows["not-in-vcenter"]
    assert not ghost["VmIdentifier"].startswith(seen["server_id"])
    assert ghost["Link"]["instance_identifier"] is None
    kept = zvm.get("/_sim/vcenter")
    assert {v["name"] for v in kept["vms"].values()} == {WEB, APP}


def test_a_journal_restore_puts_the_vcenter_vm_back(vcenter: VCenter, linked: Any) -> None:
    proc, zvm = linked
    change_vm(vcenter, WEB, {"num_cpu": 2, "annotation": "web tier"})
    rows = _rows(zvm)
    vpg_id = rows[WEB]["VpgIdentifier"]
    before = vm_states(vcenter)["vms"]
    assert (before[WEB]["power_state"], before[WEB]["num_cpu"]) == ("poweredOn", 2)
    checkpoint = zvm.tag(vpg_id, "before-agent-change")

    change_vm(vcenter, WEB, {"power": "off", "num_cpu": 4, "annotation": "changed by agent"})
    change_vm(vcenter, APP, {"power": "off", "remove_disk": True, "remove_nic": True})
    after = vm_states(vcenter)["vms"]
    assert (after[WEB]["power_state"], after[WEB]["num_cpu"]) == ("poweredOff", 4)
    assert after[APP]["disks"] == after[APP]["nics"] == []

    # A failover test leaves production alone.
    at = {"checkpointIdentifier": checkpoint["CheckpointIdentifier"]}
    test = zvm.post(f"/v1/vpgs/{vpg_id}/FailoverTest", at)
    assert zvm.wait_task(test)["Status"]["State"] == TASK_COMPLETED
    zvm.wait_task(zvm.post(f"/v1/vpgs/{vpg_id}/FailoverTestStop", {"failoverTestSuccess": True}))
    assert vm_states(vcenter)["vms"][WEB]["num_cpu"] == 4

    for name in (WEB, APP):
        vm_id = rows[name]["VmIdentifier"]
        body = {"vpgIdentifier": vpg_id, **at}
        started = zvm.wait_task(zvm.post(f"/v1/vms/{vm_id}/Restore", body))
        assert started["Status"]["State"] == TASK_COMPLETED
        done = zvm.wait_task(zvm.post(f"/v1/vms/{vm_id}/RestoreCommit", vpg_id))
        assert done["Status"]["State"] == TASK_COMPLETED, done["CompleteReason"]

    back = vm_states(vcenter)["vms"]
    assert back[WEB] == before[WEB]
    assert back[APP] == before[APP]
    assert back[WEB]["annotation"] == "web tier"
    assert back[APP]["disks"] == before[APP]["disks"] != []
    assert back[APP]["nics"] == before[APP]["nics"] != []
    proc.terminate()
    _, errors = proc.communicate(timeout=10)
    assert vcenter.password not in errors
    assert "linked to vCenter" in errors


def test_a_link_that_cannot_log_in_stops_the_start_without_showing_the_password(
    tmp_path: Path,
) -> None:
    # vcsim takes any login, so this vCenter is a loopback port where nothing listens.
    url = "https://user:wrong-secret@127.0.0.1:9/sdk"
    done = subprocess.run(
        [sys.executable, "-m", "zerto_rewind.sim", "--port", "0", "--vcenter", url,
         "--vcenter-insecure", "--cert-dir", str(tmp_path / "certs")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot log in to https://127.0.0.1:9/sdk" in done.stderr
    assert "wrong-secret" not in done.stderr + done.stdout


def test_without_verification_asked_off_vcsims_certificate_is_refused(
    vcenter: VCenter, tmp_path: Path
) -> None:
    url = f"https://{vcenter.user}:{vcenter.password}@{vcenter.host}/sdk"
    done = subprocess.run(
        [sys.executable, "-m", "zerto_rewind.sim", "--port", "0", "--vcenter", url,
         "--cert-dir", str(tmp_path / "certs")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "SSLCertVerificationError" in done.stderr
