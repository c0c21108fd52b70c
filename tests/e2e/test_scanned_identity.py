"""Issue 26 §6's proof: with the catalog as ``catalog scan`` writes it, a same-name VM in
another folder is not changed under another VM's checkpoint.

The catalog is the kept mcvsphere scan (tests/data/catalogs/mcvsphere.catalog.json, which
tests/unit/scan/test_real_server_dumps.py holds equal to the scan of mcvsphere's kept tool
list, and tests/realvm/test_realvm_scan.py to the live scan), renamed to server ``vsphere``:
its ``read_only_tools``, ``tools`` and the identity check the scan proposed
(``catalog.resolvers``), nothing written by hand.

In govmomi's vCenter simulator, before the gateway starts, ``DC0_H1_VM1`` gets a clone of the
same name in folder ``other``. mcvsphere acts on the first VM of that name in vCenter's own
order; Zerto's estate protects the *other* one (by its moref and instance UUID). The agent
(the official MCP SDK client over streamable HTTP) powers ``DC0_H1_VM1`` off:

- through the gateway with the scanned catalog: a checkpoint is made for Zerto's VM, the
  identity check finds that the server means another VM, and the call prompts; with no
  approver it is refused, and vcsim shows no VM changed power state;
- control: the same call through a gateway whose config drops only ``catalog.resolvers``
  powers off the server's first match, the VM no checkpoint covers, and the note it returns
  says the VM's identity was not verified.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from e2e.gateway_e2e import _CATALOG_FILE, PYTHON, SERVER, TOKEN, GatewayRig, tool
from e2e.vm_twins import VmRecord, inventory, make_twin
from support.realvm import VCenter

NAME = "DC0_H1_VM1"
VPG = "vpg-twin"


@dataclass
class Twins:
    """The two VMs named NAME: the one mcvsphere picks, and the one Zerto protects."""

    server_picks: str = ""
    zertos: str = ""
    uuids: dict[str, str | None] = field(default_factory=dict)


def scanned_resolvers() -> dict[str, Any]:
    """The kept scan's ``catalog.resolvers``, for server ``vsphere`` instead of ``mcvsphere``."""
    kept = json.loads(_CATALOG_FILE.read_text(encoding="utf-8"))
    return {SERVER: kept["catalog"]["resolvers"]["mcvsphere"]}


def build(vcenter: VCenter, twins: Twins) -> dict[str, Any]:
    """Clone NAME into folder "other"; Zerto protects whichever copy mcvsphere does not pick."""
    original = next(m for m, r in inventory(vcenter).items() if r.name == NAME)
    clone = make_twin(vcenter, original, NAME, "other")
    now = inventory(vcenter)
    # mcvsphere's find_vm: the first VM with the exact name in a container view of every VM,
    # the order inventory() reads too.
    same = [m for m, r in now.items() if r.name == NAME]
    assert sorted(same) == sorted([original, clone])
    twins.server_picks, twins.zertos = same[0], same[1]
    twins.uuids = {m: now[m].instance_uuid for m in same}
    assert twins.uuids[original] != twins.uuids[clone]
    vm = {"name": NAME, "vcenter_id": twins.zertos, "instance_uuid": twins.uuids[twins.zertos]}
    vpgs = [{"name": VPG, "site_kind": "vcenter", "vms": [vm]}]
    return {"local_site": {"name": "zvm-local", "kind": "vcenter"}, "vpgs": vpgs}


@pytest.fixture(scope="module")
def rigged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayRig, Twins]]:
    twins = Twins()
    root = tmp_path_factory.mktemp("scanned-identity")
    with GatewayRig.running(
        root,
        http=True,
        estate=lambda vcenter: build(vcenter, twins),
        catalog_options={"resolvers": scanned_resolvers()},
    ) as rig:
        yield rig, twins


async def _call_http(url: str) -> types.CallToolResult:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        return await client.call_tool("power_off", {"name": NAME}, read_timeout_seconds=90)


async def _call_stdio(params: StdioServerParameters) -> types.CallToolResult:
    async with Client(params, cache=None) as client:
        return await client.call_tool("power_off", {"name": NAME}, read_timeout_seconds=90)


def unchecked_call(rig: GatewayRig) -> types.CallToolResult:
    """The same call through a stdio gateway whose config has no ``catalog.resolvers``."""
    control = rig.root / "control-config.json"
    kept = rig.box.catalog
    rig.box.catalog = {k: v for k, v in kept.items() if k != "catalog"}
    try:
        rig.write_config()
        shutil.copy(rig.box.config_path, control)  # 0600, as the original
    finally:
        rig.box.catalog = kept
        rig.write_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
    env["ZERTO_REWIND_CONFIG"] = str(control)
    argv = ["-m", "zerto_rewind", "gateway", "--stdio", "--upstream", SERVER, *rig.gateway_flags()]
    params = StdioServerParameters(command=PYTHON, args=argv, env=env, cwd=str(rig.root))
    return anyio.run(_call_stdio, params)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def changed(before: dict[str, VmRecord], after: dict[str, VmRecord]) -> set[str]:
    return {m for m, r in after.items() if m in before and before[m].power != r.power}


def test_a_same_name_vm_in_another_folder_is_not_changed_under_zertos_checkpoint(
    rigged: tuple[GatewayRig, Twins],
) -> None:
    rig, twins = rigged
    # The gateway's catalog is the scan's: the identity check was proposed, not hand-written.
    assert rig.box.catalog["catalog"]["resolvers"] == scanned_resolvers()
    assert scanned_resolvers()[SERVER]["tool"] == "get_vm_info"
    assert rig.box.catalog["read_only_tools"].count(tool("get_vm_info")) == 1
    before = inventory(rig.vcenter)
    assert before[twins.zertos].power == before[twins.server_picks].power == "poweredOn"
    assert {before[twins.zertos].folder, before[twins.server_picks].folder} >= {"other"}

    assert rig.http_url is not None
    result = anyio.run(_call_http, rig.http_url)

    assert result.is_error, text_of(result)
    assert "was not run" in text_of(result)
    assert "cannot confirm" in text_of(result)
    assert changed(before, inventory(rig.vcenter)) == set(), "a VM changed without a person"
    [line] = [r for r in rig.log() if r.get("tool") == tool("power_off")]
    assert (line["row"], line["decision"]) == ("vm_identity", "prompt")
    assert "different VMs" in line["reason"]
    assert line["vpgs"] == [VPG]  # the checkpoint was Zerto's VM's, and nothing ran under it
    assert rig.tag_requests(VPG) == 1

    # Control: the same catalog without the scan's identity check changes the server's first
    # match, which no checkpoint covers, and says the VM's identity was not verified.
    unchecked = unchecked_call(rig)
    assert not unchecked.is_error, text_of(unchecked)
    assert changed(before, inventory(rig.vcenter)) == {twins.server_picks}
    assert "The VM's identity was not verified" in text_of(unchecked)
