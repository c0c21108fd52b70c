"""The scan's rules, on hand-made tool lists (scan/heuristics.py)."""

from __future__ import annotations

from typing import Any

from zerto_rewind.config import CatalogSettings
from zerto_rewind.core.catalog import MUTATING, READ_ONLY, UNLISTED, classify
from zerto_rewind.scan.heuristics import (
    catalog_from_tools,
    classify_tool,
    extend_catalog,
    merge_into_config,
)


def tool(name: str, props: dict[str, Any] | None = None, **annotations: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "inputSchema": {"type": "object", "properties": props or {}},
    }
    if annotations:
        spec["annotations"] = annotations
    return spec


S = {"type": "string"}


def test_read_only_hint_makes_read_only() -> None:
    row = classify_tool("v", tool("vm_screenshot", {"name": S}, readOnlyHint=True))
    assert (row.kind, row.guessed, row.confidence) == (READ_ONLY, False, "high")
    assert row.tool == "mcp__v__vm_screenshot"


def test_destructive_hint_is_never_read_only_whatever_the_name_or_read_only_hint() -> None:
    for hints in ({"destructiveHint": True}, {"destructiveHint": True, "readOnlyHint": True}):
        row = classify_tool("v", tool("get_and_wipe_vm", {"name": S}, **hints))
        assert row.kind == MUTATING
        assert "destructiveHint" in row.evidence
        assert row.vm_arg == ["name"]


def test_name_verb_is_a_guess_when_there_are_no_annotations() -> None:
    listing = classify_tool("v", tool("list_vms"))
    assert (listing.kind, listing.guessed) == (READ_ONLY, True)
    describe = classify_tool("v", tool("describeInstance", {"vmName": S}))
    assert (describe.kind, describe.guessed) == (READ_ONLY, True)
    power = classify_tool("v", tool("power_off_vm", {"vm_id": S}))
    assert (power.kind, power.guessed, power.vm_arg) == (MUTATING, True, ["vm_id"])
    odd = classify_tool("v", tool("frobnicate"))
    assert (odd.kind, odd.confidence) == (MUTATING, "low")


def test_server_that_marks_read_only_tools_makes_the_unmarked_ones_mutating() -> None:
    tools = [tool("get_vm", {"name": S}, readOnlyHint=True), tool("get_and_reset", {"name": S})]
    result = catalog_from_tools("v", tools)
    assert result.catalog["read_only_tools"] == ["mcp__v__get_vm"]
    assert result.catalog["tools"] == {"mcp__v__get_and_reset": {"vm_arg": "name"}}


def test_vm_arg_shapes_from_the_schema() -> None:
    camel = classify_tool("v", tool("set_cpu", {"vmName": S, "cpus": {"type": "integer"}}))
    assert camel.vm_arg == ["vmName"]
    listed = classify_tool("v", tool("snapshot_vms", {"vms": {"type": "array", "items": S}}))
    assert listed.vm_arg == ["vms[]"]
    objects = {"type": "array", "items": {"type": "object", "properties": {"name": S}}}
    fanned = classify_tool("v", tool("stop_all", {"vms": objects}))
    assert fanned.vm_arg == ["vms[].name"]
    nested = {"type": "object", "properties": {"name": S, "cpus": {"type": "integer"}}}
    deep = classify_tool("v", tool("reconfigure_vm", {"vm": nested}))
    assert deep.vm_arg == ["vm.name"]


def test_new_vm_names_are_not_the_vm_changed() -> None:
    rename = classify_tool("v", tool("rename_vm", {"name": S, "new_name": S}))
    assert rename.vm_arg == ["name"]
    assert any("new_name" in note for note in rename.notes)
    clone = classify_tool("v", tool("clone_vm", {"template_name": S, "new_name": S}))
    assert clone.vm_arg == []
    assert any("new VM" in note for note in clone.notes)
    create = classify_tool("v", tool("create_vm", {"name": S}))
    assert create.vm_arg == []
    deploy = classify_tool("v", tool("deploy_ovf", {"vm_name": S, "ovf_path": S}))
    assert deploy.vm_arg == []


def test_create_of_something_inside_a_vm_names_the_existing_vm() -> None:
    snap = classify_tool("v", tool("create_snapshot", {"name": S, "snapshot_name": S}))
    assert snap.vm_arg == ["name"]


def test_host_level_tool_has_no_vm_arg_and_says_why() -> None:
    row = classify_tool("v", tool("reboot_host", {"force": {"type": "boolean"}}))
    assert (row.kind, row.vm_arg) == (MUTATING, [])
    assert any("no VM argument" in note for note in row.notes)
    result = catalog_from_tools("v", [tool("reboot_host")])
    # explicit: a person decides each call (the scan cannot know the host's VPGs)
    assert result.catalog["tools"] == {"mcp__v__reboot_host": {"decision": "prompt"}}


def test_generic_name_outside_a_vm_tool_is_not_a_vm() -> None:
    row = classify_tool("v", tool("create_firewall_alias", {"name": S, "cidr": S}))
    assert row.vm_arg == []


def test_merge_adds_only_unclassified_tools_and_keeps_hand_written_entries() -> None:
    config = {
        "zvm": {"url": "https://z"},
        "read_only_tools": ["mcp__v__get_*"],
        "tools": {"mcp__v__power_off": {"vm_arg": ["name", "vm"]}},
    }
    proposal = {
        "read_only_tools": ["mcp__v__get_vm", "mcp__v__list_vms"],
        "tools": {"mcp__v__power_off": {"vm_arg": "name"}, "mcp__v__reset": {"vm_arg": "name"}},
    }
    merged, added, hardened = merge_into_config(config, proposal)
    assert added == ["mcp__v__list_vms", "mcp__v__reset"]
    assert hardened == []
    assert merged["tools"]["mcp__v__power_off"] == {"vm_arg": ["name", "vm"]}
    assert merged["read_only_tools"] == ["mcp__v__get_*", "mcp__v__list_vms"]
    assert merged["zvm"] == config["zvm"]


def test_extend_catalog_adds_scanned_tools_but_explicit_entries_win() -> None:
    catalog = CatalogSettings(("mcp__v__reset",), {}, None, "prompt", "default")
    proposal = {
        "read_only_tools": ["mcp__v__list_vms"],
        "tools": {"mcp__v__reset": {"vm_arg": "name"}, "mcp__v__power_off": {"vm_arg": "name"}},
    }
    extended = extend_catalog(catalog, proposal)
    assert classify("mcp__v__reset", {"name": "a"}, extended).kind == READ_ONLY  # explicit wins
    assert classify("mcp__v__list_vms", {}, extended).kind == READ_ONLY
    off = classify("mcp__v__power_off", {"name": "a"}, extended)
    assert (off.kind, off.vms) == (MUTATING, ("a",))
    assert classify("mcp__v__other", {}, extended).kind == UNLISTED
