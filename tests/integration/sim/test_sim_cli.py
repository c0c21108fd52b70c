"""The simulator as a process: ready file, TLS, signals, estate files, scale."""

from __future__ import annotations

import json
import signal
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.sim import Launched, launch_sim
from zerto_rewind.sim import SimConfig, SimServer
from zerto_rewind.sim.app import main

TOKEN = "/auth/realms/zerto/protocol/openid-connect/token"


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Launched]]:
    """Start ``python -m zerto_rewind.sim --port 0 --ready-file F [args]``; kill at teardown."""
    with launch_sim(tmp_path) as start:
        yield start


def login(client: httpx.Client, fields: dict[str, Any]) -> None:
    """Get a password-grant token and put it on the client."""
    form = {"grant_type": "password", "client_id": "zerto-client"}
    form |= {"username": fields["username"], "password": fields["password"]}
    token = client.post(TOKEN, data=form).json()["access_token"]
    client.headers["Authorization"] = f"Bearer {token}"


@pytest.mark.timeout(40)
def test_cli_ready_file_tls_and_sigterm(launch: Callable[..., Launched]) -> None:
    """The ready file has url, CA and credentials; TLS verifies; SIGTERM exits 0 promptly."""
    proc, fields = launch()
    assert set(fields) == {"url", "ca_bundle", "client_id", "client_secret", "username", "password"}
    assert fields["url"].startswith("https://127.0.0.1:")
    ctx = ssl.create_default_context(cafile=fields["ca_bundle"])
    with httpx.Client(base_url=fields["url"], verify=ctx) as client:
        login(client, fields)
        assert client.get("/v1/localsite").status_code == 200
    with pytest.raises(httpx.ConnectError), httpx.Client(base_url=fields["url"]) as untrusting:
        untrusting.get("/v1/localsite")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    assert time.monotonic() - started < 3
    assert proc.stderr is not None
    assert f"serving {fields['url']}" in proc.stderr.read()


@pytest.mark.timeout(60)
def test_cli_ten_thousand_vms(launch: Callable[..., Launched]) -> None:
    """--vms 10000 starts quickly and a vmName lookup answers fast."""
    started = time.monotonic()
    proc, fields = launch("--vms", "10000", "--plain-http")
    assert time.monotonic() - started < 10
    assert fields["ca_bundle"] is None
    assert fields["url"].startswith("http://")
    with httpx.Client(base_url=fields["url"]) as client:
        login(client, fields)
        started = time.monotonic()
        rows = client.get("/v1/vms", params={"vmName": "vm-09999"}).json()
        assert time.monotonic() - started < 0.5
        assert [r["VpgName"] for r in rows] == ["vpg-09999"]
        assert client.get("/v1/vms", params={"vmName": "jp-ubuntu"}).json()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=5) == 0


def test_estate_file_loads(tmp_path: Path) -> None:
    """An estate file replaces the default estate."""
    estate = {
        "sites": [{"name": "aws-east", "kind": "aws"}],
        "vpgs": [{"name": "only", "site_kind": "aws", "vms": ["a", "b"], "cadence_s": 2}],
    }
    path = tmp_path / "estate.json"
    path.write_text(json.dumps(estate))
    with SimServer(SimConfig(estate_file=path, tls=False)) as sim:
        vpg = sim.state.vpg_named("only")
        assert [vm.name for vm in vpg.vms] == ["a", "b"]
        assert vpg.protected.name == "aws-east"
        assert vpg.journal.cadence == 2
        assert sorted(v.name for v in sim.state.vpgs.values()) == ["only"]


@pytest.mark.parametrize(
    ("estate", "message"),
    [
        ({"vpgs": [{"name": "x", "site_kind": "gcp", "vms": ["a"]}]}, "vpgs[0].site_kind"),
        ({"vpgs": [{"name": "x", "site_kind": "aws", "vms": []}]}, "vpgs[0].vms"),
        ({"vpgs": [{"site_kind": "aws", "vms": ["a"]}]}, "vpgs[0].name"),
        ({"vpgs": [{"name": "x", "site_kind": "aws", "vms": ["a"], "colour": 1}]}, "colour"),
        ({"vpgs": [{"name": "x", "site_kind": "aws", "vms": ["a"], "status": 12}]}, "status"),
        ({"sites": [{"name": "s"}]}, "sites[0].kind"),
        ({"vpgs": "nope"}, "vpgs: must be a list"),
    ],
)
def test_estate_file_validation_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], estate: Any, message: str
) -> None:
    """A bad estate file makes main() exit 2 with an error naming the key."""
    path = tmp_path / "estate.json"
    path.write_text(json.dumps(estate))
    assert main(["--estate", str(path), "--plain-http"]) == 2
    assert message in capsys.readouterr().err


def test_estate_file_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that is not JSON is reported as such."""
    path = tmp_path / "estate.json"
    path.write_text("{")
    assert main(["--estate", str(path)]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_bad_cadence_flag_is_a_usage_error() -> None:
    """--cadence needs KIND=SECONDS with a known kind."""
    with pytest.raises(SystemExit) as exited:
        main(["--cadence", "gcp=5"])
    assert exited.value.code == 2
