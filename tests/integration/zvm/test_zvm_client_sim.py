"""The ZVM client against the simulator over real TLS sockets."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from support.sim import sim_settings
from zerto_rewind.errors import (
    ApiError,
    AuthError,
    ZertoRewindError,
    ZvmConnectionError,
    ZvmTimeout,
    ZvmTlsError,
)
from zerto_rewind.sim import SimServer
from zerto_rewind.zvm import TokenCache, ZvmClient, site_kind, tag_refusal


def token_requests(control: httpx.Client) -> int:
    """Token requests the simulator has answered."""
    return int(control.get("/_sim/stats").json()["token_requests"]["total"])


def add_fault(control: httpx.Client, **fault: object) -> None:
    """Inject a fault through the control plane."""
    response = control.post("/_sim/faults", json=fault)
    assert response.status_code < 300, response.text


def test_status_of_jp_ubuntu(client: ZvmClient) -> None:
    """jp-ubuntu is in jp-local, a healthy vCenter-protected VPG with recent checkpoints."""
    (ref,) = client.find_vms("jp-ubuntu")
    vpg = client.get_vpg(ref.vpg_id)
    assert (vpg.name, vpg.status_text) == ("jp-local", "MeetingSLA")
    assert site_kind(vpg.protected_entity, client.entity_types()) == "vcenter"
    assert tag_refusal(vpg) is None
    assert client.find_vpg("jp-local").vpg_id == ref.vpg_id
    _, latest = client.checkpoint_stats(ref.vpg_id)
    assert latest is not None
    assert datetime.now(UTC) - latest.timestamp < timedelta(seconds=10)


@pytest.mark.parametrize(("vm", "kind"), [("win2019-1", "aws"), ("web-az-1", "azure")])
def test_cloud_site_kinds(client: ZvmClient, vm: str, kind: str) -> None:
    """Cloud-protected VPGs are recognised from the ZVM's entity types."""
    (ref,) = client.find_vms(vm)
    vpg = client.get_vpg(ref.vpg_id)
    assert site_kind(vpg.protected_entity, client.entity_types()) == kind


def test_tag_lands_on_jp_ubuntu(client: ZvmClient) -> None:
    """A tag request completes as a task and the tag appears in the checkpoint list."""
    deadline = time.monotonic() + 20
    (ref,) = client.find_vms("jp-ubuntu")
    requested = datetime.now(UTC)
    task_id = client.tag_checkpoint(ref.vpg_id, "it-tag-1", deadline=deadline)
    assert client.wait_for_task(task_id, deadline=deadline, poll_s=0.1).succeeded
    while time.monotonic() < deadline:
        cps = client.list_checkpoints(ref.vpg_id, since=requested - timedelta(seconds=5))
        tagged = [cp for cp in cps if cp.tag == "it-tag-1"]
        if tagged:
            break
        time.sleep(0.2)
    assert tagged, "the tag never landed"
    assert tagged[0].timestamp >= requested - timedelta(seconds=1)


def test_paused_vpg_refused_fast(client: ZvmClient) -> None:
    """sql-paused-1's VPG is refused from its status within seconds, without tagging."""
    start = time.monotonic()
    (ref,) = client.find_vms("sql-paused-1")
    reason = tag_refusal(client.get_vpg(ref.vpg_id))
    assert reason is not None
    assert "paused-vpg" in reason
    assert "ReplicationPausedUserInitiated" in reason
    assert time.monotonic() - start < 3


def test_multi_vm_has_two_vpgs(client: ZvmClient) -> None:
    """multi-1 is protected by two VPGs and find_vms returns both."""
    refs = client.find_vms("multi-1")
    assert sorted(r.vpg_name for r in refs) == ["multi-a", "multi-b"]


def test_unknown_vm(client: ZvmClient) -> None:
    """An unknown VM name gives an empty list."""
    assert client.find_vms("no-such-vm") == []


def test_expired_tokens_reauthenticate_once(client: ZvmClient, control: httpx.Client) -> None:
    """After the ZVM drops every token, the next call re-authenticates exactly once."""
    client.local_site()
    before = token_requests(control)
    assert control.post("/_sim/tokens/expire").status_code < 300
    assert client.local_site()["SiteName"]
    assert token_requests(control) == before + 1


def test_token_shared_by_many_processes(
    sim: SimServer, control: httpx.Client, tmp_path: Path
) -> None:
    """Many separate processes started together fetch one token between them."""
    creds = sim.credentials
    child = (
        "import sys, time\n"
        "from zerto_rewind.config import ZvmSettings\n"
        "from zerto_rewind.zvm import TokenCache, ZvmClient\n"
        "url, ca, user, pw, state, go = sys.argv[1:7]\n"
        "while time.time() < float(go): time.sleep(0.001)\n"
        "s = ZvmSettings(url=url, grant='password', client_id='zerto-client', username=user,\n"
        "                secret_source=('inline', pw), ca_bundle=ca)\n"
        "with ZvmClient(s, token_cache=TokenCache(state)) as c:\n"
        "    print(c.local_site()['SiteName'])\n"
    )
    go = str(time.time() + 2.0)
    args = [sim.url, sim.ca_bundle, creds["username"], creds["password"], str(tmp_path), go]
    before = token_requests(control)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", child, *map(str, args)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(12)
    ]
    for proc in procs:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    assert token_requests(control) == before + 1


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"route": "localsite", "kind": "status", "status": 500}, ApiError),
        ({"route": "localsite", "kind": "status", "status": 404}, ApiError),
        ({"route": "localsite", "kind": "malformed"}, ApiError),
        ({"route": "localsite", "kind": "drop"}, ZvmConnectionError),
        ({"route": "tokens", "kind": "status", "status": 401}, AuthError),
        ({"route": "tokens", "kind": "drop"}, ZvmConnectionError),
    ],
)
def test_injected_faults_map_to_errors(
    sim: SimServer,
    control: httpx.Client,
    state_dir: str,
    fault: dict[str, object],
    expected: type[Exception],
) -> None:
    """Each injected fault surfaces as the matching error from the tree, never an httpx error."""
    add_fault(control, **fault)
    settings = sim_settings(sim)
    c = ZvmClient(settings, token_cache=TokenCache(state_dir), backoff_s=0.01)
    with c, pytest.raises(ZertoRewindError) as info:
        c.local_site(deadline=time.monotonic() + 10)
    assert isinstance(info.value, expected), repr(info.value)


def test_transient_500_is_retried(client: ZvmClient, control: httpx.Client) -> None:
    """A single 5xx on a GET is retried transparently."""
    client.local_site()
    add_fault(control, route="localsite", kind="status", status=503, count=1)
    assert client.local_site()["SiteName"]


def test_hang_returns_by_deadline(client: ZvmClient, control: httpx.Client) -> None:
    """When the ZVM hangs, a call gives up with ZvmTimeout by its deadline."""
    client.local_site()
    add_fault(control, route="localsite", kind="hang")
    start = time.monotonic()
    try:
        with pytest.raises(ZvmTimeout):
            client.local_site(deadline=start + 1.5)
        assert time.monotonic() - start < 2.5
    finally:
        control.delete("/_sim/faults")


def test_tls_without_ca_bundle(sim: SimServer) -> None:
    """Without the simulator's CA its certificate fails as a ZvmTlsError naming zvm.ca_bundle."""
    settings = sim_settings(sim, ca_bundle=None)
    with ZvmClient(settings) as c, pytest.raises(ZvmTlsError, match=r"zvm\.ca_bundle"):
        c.local_site(deadline=time.monotonic() + 10)


def test_verify_off_connects(sim: SimServer, caplog: pytest.LogCaptureFixture) -> None:
    """verify_tls=false connects without the CA and warns that verification is off."""
    settings = sim_settings(sim, ca_bundle=None, verify_tls=False)
    with ZvmClient(settings) as c:
        assert c.local_site()["SiteName"]
    assert "TLS verification" in caplog.text


def test_client_credentials_grant(sim: SimServer) -> None:
    """The client_credentials grant works against the simulator's Keycloak."""
    with ZvmClient(sim_settings(sim, grant="client_credentials")) as c:
        assert c.entity_types()[0] == "VCVpg"
