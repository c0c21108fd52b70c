"""A multi-site estate as a process: a ZVM per site over TLS, one journal, per-site faults.

Each test starts ``python -m zerto_rewind.sim --estate three-sites`` (hq, dr, azure,
aws; see docs/simulator.md) and talks to every site with httpx over TLS, trusting
only the simulator's CA.
"""

from __future__ import annotations

import signal
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.sim import Launched, launch_sim, site_fields

TOKEN = "/auth/realms/zerto/protocol/openid-connect/token"
SITES = ("hq", "dr", "azure", "aws")
FAST = ("--cadence", "vcenter=1", "--jitter", "0", "--tag-lag", "0.2", "--task-duration", "0.1")

pytestmark = pytest.mark.timeout(60)


class Estate:
    """The running simulator's ready file, and clients per site (closed at the end)."""

    def __init__(self, ready: dict[str, Any], stack: ExitStack) -> None:
        self.ready = ready
        self._stack = stack
        assert ready["ca_bundle"] is not None
        self.tls = ssl.create_default_context(cafile=ready["ca_bundle"])

    def anon(self, site: str, **options: Any) -> httpx.Client:
        """A client of one site's ZVM without a token (also its control plane)."""
        fields = site_fields(self.ready, site)
        options.setdefault("timeout", 5.0)
        client = httpx.Client(base_url=fields["url"], verify=self.tls, **options)
        return self._stack.enter_context(client)

    def api(self, site: str, **options: Any) -> httpx.Client:
        """A client of one site's ZVM with a token from that site's own client."""
        client = self.anon(site, **options)
        answer = client.post(TOKEN, data=client_form(site_fields(self.ready, site)))
        assert answer.status_code == 200, answer.text
        client.headers["Authorization"] = f"Bearer {answer.json()['access_token']}"
        return client


def client_form(fields: dict[str, Any]) -> dict[str, str]:
    """The client_credentials grant for a site's confidential client."""
    return {
        "grant_type": "client_credentials",
        "client_id": fields["client_id"],
        "client_secret": fields["client_secret"],
    }


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., tuple[Launched, Estate]]]:
    """``start(*args)``: the simulator with ``--estate three-sites`` and its clients."""
    with launch_sim(tmp_path) as launch, ExitStack() as stack:

        def run(*extra: str) -> tuple[Launched, Estate]:
            launched = launch("--estate", "three-sites", *extra)
            return launched, Estate(launched[1], stack)

        yield run


@pytest.fixture
def estate(start: Callable[..., tuple[Launched, Estate]]) -> Estate:
    """A running three-sites simulator with fast vCenter journals."""
    return start(*FAST)[1]


def test_ready_file_has_every_site_beside_the_first_sites_keys(
    start: Callable[..., tuple[Launched, Estate]],
) -> None:
    """``sites`` holds url, client, secret, CA per site; the top-level keys are hq's."""
    (proc, ready), _estate = start()
    assert set(ready) == {
        "url", "ca_bundle", "client_id", "client_secret", "username", "password", "sites",
    }  # fmt: skip
    sites = ready["sites"]
    assert list(sites) == list(SITES)
    for fields in sites.values():
        assert set(fields) == {
            "url", "client_id", "client_secret", "ca_bundle", "username", "password",
            "site_identifier", "kind",
        }  # fmt: skip
        assert fields["url"].startswith("https://127.0.0.1:")
        assert fields["ca_bundle"] == ready["ca_bundle"]
    assert {k: sites["hq"][k] for k in ("url", "client_id", "client_secret")} == {
        k: ready[k] for k in ("url", "client_id", "client_secret")
    }
    for key in ("url", "client_id", "client_secret", "password", "site_identifier"):
        assert len({fields[key] for fields in sites.values()}) == len(SITES), key
    assert [sites[s]["kind"] for s in SITES] == ["vcenter", "vcenter", "azure", "aws"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    assert proc.stderr is not None
    said = proc.stderr.read()
    for site in SITES:
        assert f"serving {sites[site]['url']} (ZVM of site {site})" in said


def test_each_site_has_its_own_token_endpoint_and_client(estate: Estate) -> None:
    """A site's client works at its own ZVM only; hq's secret is refused at dr."""
    for site in SITES:
        assert estate.api(site).get("/v1/localsite").json()["SiteName"] == site
    dr = estate.anon("dr")
    refused = dr.post(TOKEN, data=client_form(site_fields(estate.ready, "hq")))
    assert refused.status_code == 401
    assert refused.json()["error"] == "unauthorized_client"
    hq_token = estate.api("hq").headers["Authorization"]
    assert dr.get("/v1/vpgs", headers={"Authorization": hq_token}).status_code == 401


def test_a_paired_vpg_is_protected_at_one_zvm_and_recovering_at_the_other(
    estate: Estate,
) -> None:
    """Same VpgIdentifier on both; LocalSiteApi on the answering side; peers per ZVM."""
    rows = {
        site: estate.api(site).get("/v1/vpgs", params={"name": "hq-web-dr"}).json()
        for site in SITES
    }
    (hq,), (dr,) = rows["hq"], rows["dr"]
    assert rows["azure"] == rows["aws"] == []
    assert hq["VpgIdentifier"] == dr["VpgIdentifier"]
    assert (hq["ProtectedSite"]["type"], hq["RecoverySite"]["type"]) == (
        "LocalSiteApi",
        "PeerSiteApi",
    )
    assert (dr["ProtectedSite"]["type"], dr["RecoverySite"]["type"]) == (
        "PeerSiteApi",
        "LocalSiteApi",
    )
    sites = estate.ready["sites"]
    assert hq["ProtectedSite"]["identifier"] == sites["hq"]["site_identifier"]
    assert dr["RecoverySite"]["identifier"] == sites["dr"]["site_identifier"]
    peers = {
        site: sorted(p["PeerSiteName"] for p in estate.api(site).get("/v1/peersites").json())
        for site in SITES
    }
    assert peers == {"hq": ["azure", "dr"], "dr": ["aws", "hq"], "azure": ["hq"], "aws": ["dr"]}
    app = {
        site: sorted(r["VpgName"] for r in estate.api(site).get("/v1/vms?vmName=app-01").json())
        for site in ("hq", "dr", "azure")
    }
    assert app == {
        "hq": ["hq-app-azure", "hq-web-dr"],
        "dr": ["hq-web-dr"],
        "azure": ["hq-app-azure"],
    }


def test_a_tag_through_the_protected_site_is_in_the_journal_seen_from_both(
    estate: Estate,
) -> None:
    """hq tags hq-web-dr; dr lists the same checkpoint; dr itself may not tag (the default)."""
    hq, dr = estate.api("hq"), estate.api("dr")
    vpg_id = hq.get("/v1/vpgs", params={"name": "hq-web-dr"}).json()[0]["VpgIdentifier"]
    task_id = hq.post(f"/v1/vpgs/{vpg_id}/checkpoints", json={"checkpointName": "via-hq"}).json()
    assert task_id.endswith(f".{estate.ready['sites']['hq']['site_identifier']}")
    assert dr.get(f"/v1/tasks/{task_id}").status_code == 404  # the task is hq's
    seen: dict[str, list[dict[str, Any]]] = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(seen) < 2:
        for site, client in (("hq", hq), ("dr", dr)):
            tagged = [c for c in client.get(f"/v1/vpgs/{vpg_id}/checkpoints").json() if c["Tag"]]
            if tagged:
                seen[site] = tagged
        time.sleep(0.1)
    assert seen.get("hq") == seen.get("dr")
    assert [c["Tag"] for c in seen["dr"]] == ["via-hq"]
    refused = dr.post(f"/v1/vpgs/{vpg_id}/checkpoints", json={"checkpointName": "via-dr"})
    assert refused.status_code == 400
    assert "use the ZVM of its protected site 'hq'" in refused.json()["Message"]
    assert hq.get("/v1/tasks/" + task_id).json()["Status"]["State"] == 6


def test_route_faults_set_on_one_site_leave_the_others_alone(estate: Estate) -> None:
    """hang at dr, 401 at azure, slow at aws, each through its own control plane."""
    faults = {
        "dr": {"route": "*", "kind": "hang"},
        "azure": {"route": "*", "kind": "unauthorized"},
        "aws": {"route": "*", "kind": "delay", "delay_s": 0.6},
    }
    clients = {site: estate.api(site) for site in SITES}
    for site, fault in faults.items():
        assert estate.anon(site).post("/_sim/faults", json=fault).status_code == 200
    assert clients["hq"].get("/v1/vpgs").status_code == 200
    assert estate.anon("hq").get("/_sim/faults").json() == []
    with pytest.raises(httpx.ReadTimeout):
        clients["dr"].get("/v1/vpgs", timeout=0.5)
    unauthorized = clients["azure"].get("/v1/vpgs")
    assert (unauthorized.status_code, unauthorized.headers["WWW-Authenticate"]) == (401, "Bearer")
    token = estate.anon("azure").post(TOKEN, data=client_form(site_fields(estate.ready, "azure")))
    assert token.status_code == 401
    started = time.monotonic()
    assert clients["aws"].get("/v1/vpgs").status_code == 200
    assert time.monotonic() - started >= 0.6
    started = time.monotonic()
    assert clients["hq"].get("/v1/vpgs").status_code == 200
    assert time.monotonic() - started < 0.5
    assert estate.anon("hq").post("/_sim/reset").status_code == 200  # clears every site
    for site in SITES:
        assert estate.anon(site).get("/_sim/faults").json() == []
    assert clients["dr"].get("/v1/vpgs", timeout=2).status_code == 200


def test_a_site_down_refuses_connections_until_cleared_from_another_site(
    estate: Estate,
) -> None:
    """down at aws (set through hq's control plane): refused; cleared: same URL serves again."""
    hq_control, aws = estate.anon("hq"), estate.api("aws")
    assert aws.get("/v1/localsite").status_code == 200
    answer = hq_control.post("/_sim/faults?site=aws", json={"kind": "down"})
    assert answer.status_code == 200, answer.text
    with pytest.raises(httpx.ConnectError):
        estate.anon("aws", timeout=2).get("/v1/localsite")
    assert estate.api("hq").get("/v1/localsite").status_code == 200
    assert estate.api("dr").get("/v1/localsite").status_code == 200
    listed = hq_control.get("/_sim/faults?site=aws").json()
    assert [f["kind"] for f in listed] == ["down"]
    assert hq_control.delete("/_sim/faults?site=aws").status_code == 200
    assert estate.api("aws").get("/v1/localsite").json()["SiteName"] == "aws"


def test_a_wrong_certificate_on_one_site_fails_verification_there_only(estate: Estate) -> None:
    """wrong_cert at dr: its certificate is not from the ready file's CA; hq is unaffected."""
    dr_control = estate.anon("dr")
    assert dr_control.get("/_sim/faults").json() == []  # connected before the fault
    answer = estate.anon("hq").post("/_sim/faults?site=dr", json={"kind": "wrong_cert"})
    assert answer.status_code == 200, answer.text
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        estate.anon("dr").get("/v1/localsite")
    assert estate.api("hq").get("/v1/localsite").status_code == 200
    assert dr_control.get("/_sim/faults").json()[0]["kind"] == "wrong_cert"  # the open connection
    estate.anon("azure").delete("/_sim/faults?site=dr")
    assert estate.api("dr").get("/v1/localsite").status_code == 200


def test_connection_faults_need_another_sites_control_plane(estate: Estate) -> None:
    """A site may not take itself down (nothing could clear it); an unknown site is 404."""
    refused = estate.anon("hq").post("/_sim/faults", json={"kind": "down"})
    assert refused.status_code == 400
    assert "?site=hq" in refused.json()["Message"]
    unknown = estate.anon("hq").get("/_sim/faults?site=nowhere")
    assert unknown.status_code == 404
    assert "sites: aws, azure, dr, hq" in unknown.json()["Message"]
    bad = estate.anon("hq").post("/_sim/faults?site=dr", json={"kind": "down", "count": 1})
    assert bad.status_code == 400
