"""The scan against real servers' tools/list dumps (tests/data/servers, scripts/dump-server-tools).

* mcvsphere: a reviewed expected classification of all 94 tools
  (tests/data/catalogs/mcvsphere.expected.json); the scan agrees on read-only vs
  mutating for every tool, on vm_arg for every tool that changes an existing VM, and
  on host_paths (arguments naming a file on the server's host) for every tool.
* every dumped server: the catalog kept in tests/data/catalogs is what the scan
  gives today, and it loads through the config parser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.config.parser import Parser
from zerto_rewind.scan.heuristics import catalog_from_tools
from zerto_rewind.scan.pins import pins_for

DATA = Path(__file__).resolve().parents[2] / "data"
SERVERS = ("mcvsphere", "vsphere-mcp-server", "esxi-mcp-server", "proxmox-mcp-server")


def dump(package: str) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(
        (DATA / "servers" / f"{package}.tools.json").read_text()
    )["tools"]
    return tools


def test_mcvsphere_matches_the_reviewed_classification() -> None:
    expected = json.loads((DATA / "catalogs" / "mcvsphere.expected.json").read_text())["tools"]
    tools = dump("mcvsphere")
    assert len(tools) == 94
    assert sorted(t["name"] for t in tools) == sorted(expected)
    result = catalog_from_tools("vsphere", tools)
    rows = {row.tool.removeprefix("mcp__vsphere__"): row for row in result.rows}
    wrong_class = {n: rows[n].kind for n, e in expected.items() if rows[n].kind != e["class"]}
    assert wrong_class == {}
    changes_vm = {n: e["vm_arg"] for n, e in expected.items() if e["vm_arg"]}
    assert len(changes_vm) >= 40
    wrong_vm = {n: rows[n].vm_arg for n, v in changes_vm.items() if rows[n].vm_arg[:1] != [v]}
    assert wrong_vm == {}
    wrong_host = {
        n: rows[n].host_paths for n, e in expected.items() if rows[n].host_paths != e["host_paths"]
    }
    assert wrong_host == {}
    assert sum(1 for e in expected.values() if e["class"] == "read_only") == 35


def test_mcvsphere_tools_that_touch_the_servers_host_need_a_person() -> None:
    """download_from_datastore(save_to) writes, upload_to_datastore(local_path) reads, the host."""
    kept = json.loads((DATA / "catalogs" / "mcvsphere.catalog.json").read_text())
    prefix = "mcp__mcvsphere__"
    assert f"{prefix}download_from_datastore" not in kept["read_only_tools"]
    assert kept["tools"][f"{prefix}download_from_datastore"] == {
        "host_paths": ["save_to"],
        "decision": "allow",
    }
    assert kept["tools"][f"{prefix}upload_to_datastore"] == {
        "host_paths": ["local_path"],
        "decision": "prompt",
    }
    with_host = {n for n, spec in kept["tools"].items() if "host_paths" in spec}
    assert with_host == {f"{prefix}download_from_datastore", f"{prefix}upload_to_datastore"}


@pytest.mark.parametrize("package", ["vsphere-mcp-server", "esxi-mcp-server", "proxmox-mcp-server"])
def test_other_servers_name_no_host_path(package: str) -> None:
    """Their path arguments are the VM side's (Proxmox node, guest, storage), not the server's."""
    kept = json.loads((DATA / "catalogs" / f"{package}.catalog.json").read_text())
    assert [n for n, spec in kept["tools"].items() if "host_paths" in spec] == []


@pytest.mark.parametrize("name", ["reboot_host", "enter_maintenance_mode", "shutdown_host"])
def test_mcvsphere_host_level_tools_are_mutating_without_vm(name: str) -> None:
    result = catalog_from_tools("vsphere", dump("mcvsphere"))
    rows = {r.tool: r for r in result.rows}
    row = rows[f"mcp__vsphere__{name}"]
    assert (row.kind, row.vm_arg) == ("mutating", [])
    # explicit: a person decides each call until someone names the host's VPGs
    assert result.catalog["tools"][f"mcp__vsphere__{name}"] == {"decision": "prompt"}


def test_mcvsphere_tools_that_name_no_vm_say_what_to_do() -> None:
    """Every mutating tool with no VM argument carries decision: a new VM is allowed (it
    changes no existing VM), unless the server marks it destructive; the rest prompt."""
    tools = catalog_from_tools("vsphere", dump("mcvsphere")).catalog["tools"]
    no_vm = {n.removeprefix("mcp__vsphere__"): s for n, s in tools.items() if "vm_arg" not in s}
    assert len(no_vm) == 19
    assert all(spec.get("decision") in ("allow", "prompt") for spec in no_vm.values())
    allowed = {name for name, spec in no_vm.items() if spec["decision"] == "allow"}
    # create_vm and clone_vm make a VM; download_from_datastore reads but for its host path
    assert allowed == {"create_vm", "clone_vm", "download_from_datastore"}
    for name in ("deploy_ovf", "deploy_from_template", "delete_datastore_file", "configure_ntp"):
        assert no_vm[name]["decision"] == "prompt", name


def test_mcvsphere_scan_proposes_the_identity_check() -> None:
    """get_vm_info(name) -> instance_uuid, compared with Zerto's instance identifier."""
    result = catalog_from_tools("vsphere", dump("mcvsphere"))
    assert result.catalog["catalog"]["resolvers"] == {
        "vsphere": {
            "tool": "get_vm_info",
            "arg": "name",
            "id_path": "instance_uuid",
            "zerto_field": "instance_identifier",
            "zerto_pattern": "^(?P<id>.+)$",
        }
    }
    assert "mcp__vsphere__get_vm_info" in result.catalog["read_only_tools"]
    kept = json.loads((DATA / "catalogs" / "mcvsphere.catalog.json").read_text())
    assert kept["catalog"]["resolvers"]["mcvsphere"]["tool"] == "get_vm_info"


@pytest.mark.parametrize("package", ["vsphere-mcp-server", "esxi-mcp-server", "proxmox-mcp-server"])
def test_servers_with_no_one_vm_lookup_get_no_identity_check(package: str) -> None:
    """vsphere-mcp-server's get_vm_details needs a host and the moref itself: no lookup by name."""
    assert catalog_from_tools(package, dump(package)).resolver is None


@pytest.mark.parametrize("package", SERVERS)
def test_kept_catalog_is_what_the_scan_gives_and_loads(package: str) -> None:
    kept = json.loads((DATA / "catalogs" / f"{package}.catalog.json").read_text())
    # The scan's catalog, plus the pins that `catalog scan` writes beside it.
    scanned = {**catalog_from_tools(package, dump(package)).catalog}
    options = scanned.get("catalog", {})
    scanned["catalog"] = {**options, "pins": pins_for(package, dump(package))}
    assert scanned == kept, (
        f"regenerate: zerto-rewind catalog scan --server {package} "
        f"--tools-json tests/data/servers/{package}.tools.json "
        f"--out tests/data/catalogs/{package}.catalog.json"
    )
    config = {"zvm": {"url": "https://zvm", "client_id": "c", "client_secret_env": "S"}, **kept}
    settings = Parser("scan.json", ".").settings(config, {}, loose_permissions=False)
    assert len(settings.catalog.read_only) + len(settings.catalog.tools) == len(dump(package))


def test_unannotated_servers_are_guessed_from_names() -> None:
    for package in ("vsphere-mcp-server", "esxi-mcp-server"):
        rows = {r.tool.split("__")[-1]: r for r in catalog_from_tools(package, dump(package)).rows}
        assert rows["list_vms"].kind == "read_only"
        assert rows["list_vms"].guessed
        power_off = rows["power_off_vm"]
        assert power_off.kind == "mutating"
        assert power_off.vm_arg in (["vm_id"], ["name"])
