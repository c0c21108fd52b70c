"""Look-alike VMs: the gateway acts only on the VM Zerto checkpointed, read back from vcsim.

mcvsphere (PyPI) takes the first VM whose name is *exactly* the argument. The guard used
to casefold and strip names, so a case twin or an NBSP twin of a protected VM was powered
off under a checkpoint of the other VM's VPG, with no human asked. Here, in govmomi's
vCenter simulator, through pyVmomi (``e2e.vm_twins``), before the gateway starts:

- a case twin and an NBSP twin of two protected VMs;
- a same-name VM in another folder: once with Zerto listing both (ambiguous), once with
  Zerto protecting only the one in the other folder (the server would pick the first);
- a protected VM renamed away after Zerto recorded it, and a twin renamed to its name.

The ZVM simulator's estate gives each protected VM vcsim's moref and instance UUID
(``{"name", "vcenter_id", "instance_uuid"}``), and the gateway's catalog has the identity
check: ``catalog.resolvers.vsphere`` = mcvsphere's read-only ``get_vm_info``, whose
``instance_uuid`` must equal Zerto's (mcvsphere returns no moref). No approver is
configured, so a call that prompts is refused.

The agent is the official MCP SDK client over streamable HTTP. Each test reads from vcsim,
by moref, which VMs changed power state: a look-alike never changes without a person; when
the identity check passes, exactly the VM whose moref Zerto recorded does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from e2e.gateway_e2e import PYTHON, SERVER, TOKEN, GatewayRig, tool
from e2e.vm_twins import VmRecord, inventory, make_twin, rename
from support.realvm import VCenter

NBSP = "\u00a0"
POWER_OFF = tool("power_off")
RESOLVERS = {
    "vsphere": {
        "tool": "get_vm_info",
        "arg": "name",
        "id_path": "instance_uuid",
        "zerto_field": "instance_identifier",
        "zerto_pattern": "^(?P<id>.+)$",
    }
}
# vcsim's six VMs, one role each; every one is protected by a VPG of its own.
EXACT = "DC0_H0_VM0"  # called by its exact name: the identity check passes
CASED = "DC0_H0_VM1"  # its case twin dc0_h0_vm1 is called
SPACED = "DC0_H1_VM0"  # its NBSP twin is called
FOLDERED = "DC0_H1_VM1"  # Zerto protects only the same-name copy in folder "other"
DOUBLED = "DC0_C0_RP0_VM0"  # Zerto lists it and its same-name copy in "other": ambiguous
RENAMED = "DC0_C0_RP0_VM1"  # renamed away after Zerto's record; a twin takes its name


@dataclass
class World:
    """What was made in vcsim before the gateway started: morefs by role."""

    original: dict[str, str] = field(default_factory=dict)  # name -> moref at start
    twins: dict[str, str] = field(default_factory=dict)  # role -> the look-alike's moref
    protected: dict[str, str] = field(default_factory=dict)  # name called -> Zerto's moref


def build(vcenter: VCenter, world: World) -> dict[str, Any]:
    """Make the look-alikes, then the ZVM estate that records the protected VMs' identities."""
    start = inventory(vcenter)
    world.original = {r.name: moref for moref, r in start.items()}
    o = world.original
    world.twins["case"] = make_twin(vcenter, o[CASED], CASED.lower())
    world.twins["nbsp"] = make_twin(vcenter, o[SPACED], SPACED + NBSP)
    world.twins["folder"] = make_twin(vcenter, o[FOLDERED], FOLDERED, "other")
    world.twins["doubled"] = make_twin(vcenter, o[DOUBLED], DOUBLED, "other")
    world.twins["rename"] = make_twin(vcenter, o[RENAMED], RENAMED + "-next")
    now = inventory(vcenter)
    world.protected = {
        EXACT: o[EXACT],
        CASED: o[CASED],
        SPACED: o[SPACED],
        FOLDERED: world.twins["folder"],  # the copy in "other", not the server's first match
        RENAMED: o[RENAMED],
    }

    def vm(name: str, moref: str) -> dict[str, Any]:
        return {"name": name, "vcenter_id": moref, "instance_uuid": now[moref].instance_uuid}

    vpgs = [
        {"name": f"vpg-{i}", "site_kind": "vcenter", "vms": [vm(name, moref)]}
        for i, (name, moref) in enumerate(world.protected.items())
    ]
    vpgs.append({"name": "vpg-doubled-a", "site_kind": "vcenter", "vms": [vm(DOUBLED, o[DOUBLED])]})
    twin = world.twins["doubled"]
    vpgs.append({"name": "vpg-doubled-b", "site_kind": "vcenter", "vms": [vm(DOUBLED, twin)]})
    return {"local_site": {"name": "zvm-local", "kind": "vcenter"}, "vpgs": vpgs}


@dataclass
class Rigged:
    rig: GatewayRig
    world: World

    def states(self) -> dict[str, VmRecord]:
        return inventory(self.rig.vcenter)

    def power_off(self, name: str) -> types.CallToolResult:
        assert self.rig.http_url is not None
        return anyio.run(_call, self.rig.http_url, "power_off", {"name": name})

    def power_off_unchecked(self, name: str) -> types.CallToolResult:
        """The same call through a stdio gateway whose config has no ``catalog.resolvers``:
        the control that shows the identity check is what stops a look-alike."""
        rig = self.rig
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
        argv = ["-m", "zerto_rewind", "gateway", "--stdio", "--upstream", SERVER]
        argv += rig.gateway_flags()  # the rig's mcvsphere runs as root unless it has a user
        params = StdioServerParameters(command=PYTHON, args=argv, env=env, cwd=str(rig.root))
        return anyio.run(_call_stdio, params, "power_off", {"name": name})

    def changed(self, before: dict[str, VmRecord]) -> set[str]:
        """Morefs whose power state differs from ``before``."""
        after = self.states()
        return {m for m, r in after.items() if m in before and before[m].power != r.power}

    def decision(self, name: str) -> dict[str, Any]:
        lines = [r for r in self.rig.log() if r.get("tool") == POWER_OFF and r["vms"] == [name]]
        assert lines, f"no decision logged for {name!r}"
        return lines[-1]


@pytest.fixture(scope="module")
def rigged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rigged]:
    world = World()
    root = tmp_path_factory.mktemp("vm-identity")
    with GatewayRig.running(
        root,
        http=True,
        estate=lambda vcenter: build(vcenter, world),
        catalog_options={"resolvers": RESOLVERS},
    ) as rig:
        yield Rigged(rig, world)


@contextlib.asynccontextmanager
async def _client(url: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0)) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


async def _call(url: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    async with _client(url) as client:
        return await client.call_tool(name, arguments, read_timeout_seconds=90)


async def _call_stdio(
    params: StdioServerParameters, name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    async with Client(params, cache=None) as client:
        return await client.call_tool(name, arguments, read_timeout_seconds=90)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def assert_refused_and_nothing_changed(
    rigged: Rigged, result: types.CallToolResult, before: dict[str, VmRecord]
) -> None:
    assert result.is_error, text_of(result)
    assert "was not run" in text_of(result)
    assert rigged.changed(before) == set(), "a VM changed power state without a person"


def test_the_exact_name_passes_the_identity_check_and_only_zertos_vm_changes(
    rigged: Rigged,
) -> None:
    before = rigged.states()
    result = rigged.power_off(EXACT)
    assert not result.is_error, text_of(result)
    assert rigged.changed(before) == {rigged.world.protected[EXACT]}
    assert rigged.decision(EXACT)["row"] == "confirmed"
    meta = result.meta or {}
    assert meta["zerto-rewind/checkpoints"][0]["vpg"] == "vpg-0"


def test_a_case_twin_of_a_protected_vm_is_unknown_and_not_powered_off(rigged: Rigged) -> None:
    twin = CASED.lower()
    before = rigged.states()
    assert before[rigged.world.twins["case"]].name == twin
    result = rigged.power_off(twin)
    assert_refused_and_nothing_changed(rigged, result, before)
    assert rigged.decision(twin)["row"] == "vm_unknown"
    assert rigged.rig.tag_requests("vpg-1") == 0  # CASED's VPG: no checkpoint stood in


def test_an_nbsp_twin_of_a_protected_vm_is_unknown_and_not_powered_off(rigged: Rigged) -> None:
    twin = SPACED + NBSP
    before = rigged.states()
    result = rigged.power_off(twin)
    assert_refused_and_nothing_changed(rigged, result, before)
    assert rigged.decision(twin)["row"] == "vm_unknown"
    assert rigged.rig.tag_requests("vpg-2") == 0


def test_two_vms_zerto_lists_under_one_name_are_ambiguous(rigged: Rigged) -> None:
    before = rigged.states()
    result = rigged.power_off(DOUBLED)
    assert_refused_and_nothing_changed(rigged, result, before)
    line = rigged.decision(DOUBLED)
    assert line["row"] == "vm_ambiguous"
    assert "several VMs" in line["reason"]
    assert rigged.rig.tag_requests("vpg-doubled-a") == 0
    assert rigged.rig.tag_requests("vpg-doubled-b") == 0


def test_a_same_name_vm_in_another_folder_changes_only_if_it_is_zertos(rigged: Rigged) -> None:
    """Zerto protects the copy in folder "other"; mcvsphere picks its first exact match."""
    before = rigged.states()
    zertos = rigged.world.protected[FOLDERED]
    assert before[zertos].folder == "other"
    result = rigged.power_off(FOLDERED)
    changed = rigged.changed(before)
    line = rigged.decision(FOLDERED)
    if result.is_error:  # the server means the other copy: the identity check caught it
        assert changed == set()
        assert line["row"] == "vm_identity"
        assert "different VMs" in line["reason"]
    else:  # the server's first match is Zerto's own VM
        assert changed == {zertos}
        assert line["row"] == "confirmed"


def test_a_twin_renamed_to_a_protected_vms_name_is_not_powered_off(rigged: Rigged) -> None:
    """After Zerto recorded RENAMED, it is renamed away and a twin takes its name: the
    guard still finds Zerto's VPG by the name, the server would act on the twin."""
    world, vcenter = rigged.world, rigged.rig.vcenter
    rename(vcenter, world.original[RENAMED], RENAMED + "-old")
    rename(vcenter, world.twins["rename"], RENAMED)
    before = rigged.states()
    assert before[world.twins["rename"]].name == RENAMED
    result = rigged.power_off(RENAMED)
    assert_refused_and_nothing_changed(rigged, result, before)
    line = rigged.decision(RENAMED)
    assert line["row"] == "vm_identity"
    assert "different VMs" in line["reason"]
    assert "cannot confirm" in text_of(result)
    # Control: without the identity check the same call changes the twin, not Zerto's VM.
    unchecked = rigged.power_off_unchecked(RENAMED)
    assert not unchecked.is_error, text_of(unchecked)
    assert rigged.changed(before) == {world.twins["rename"]}
