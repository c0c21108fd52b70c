"""Exact VM names and VM identities, over TLS to a simulator whose estate gives them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.sim import sim_config, sim_settings
from zerto_rewind.sim import SimServer
from zerto_rewind.zvm import TokenCache, ZvmClient

ESTATE = {
    "vpgs": [
        {
            "name": "web-vpg",
            "site_kind": "vcenter",
            "vms": [{"name": "web-01", "vcenter_id": "vm-42", "instance_uuid": "5012-ab"}],
        },
        {
            "name": "twin-vpg",
            "site_kind": "vcenter",
            "vms": [{"name": "Web-01", "vcenter_id": "vm-43"}],
        },
        {"name": "dup-a", "site_kind": "vcenter", "vms": [{"name": "db", "vcenter_id": "vm-50"}]},
        {"name": "dup-b", "site_kind": "vcenter", "vms": [{"name": "db", "vcenter_id": "vm-51"}]},
        {"name": "plain", "site_kind": "vcenter", "vms": ["app"]},
    ]
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ZvmClient]:
    estate = tmp_path / "estate.json"
    estate.write_text(json.dumps(ESTATE), encoding="utf-8")
    with SimServer(sim_config(estate_file=estate)) as sim:
        settings = sim_settings(sim)
        with ZvmClient(settings, token_cache=TokenCache(str(tmp_path / "state"))) as zvm:
            yield zvm


def test_the_estate_gives_the_vms_their_vcenter_identity(client: ZvmClient) -> None:
    (web,) = client.find_vms("web-01")
    assert web.vm_id.endswith(".vm-42")
    assert web.instance_id == "5012-ab"
    (app,) = client.find_vms("app")
    assert app.vm_id.rsplit(".", 1)[1].startswith("vm-")  # generated, as before
    assert app.instance_id is None


def test_the_client_keeps_only_the_exact_name_though_the_zvm_ignores_case(
    client: ZvmClient,
) -> None:
    """The simulated ZVM's vmName filter ignores case (a real one may: UNCONFIRMED)."""
    assert [r.vpg_name for r in client.find_vms("web-01")] == ["web-vpg"]
    assert [r.vpg_name for r in client.find_vms("Web-01")] == ["twin-vpg"]
    assert client.find_vms("WEB-01") == []
    assert client.find_vms("web-01\u00a0") == []


def test_one_name_two_vms_lists_both_identifiers(client: ZvmClient) -> None:
    refs = client.find_vms("db")
    assert sorted(r.vm_id.rsplit(".", 1)[1] for r in refs) == ["vm-50", "vm-51"]
