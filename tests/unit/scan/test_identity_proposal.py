"""The scan's identity check proposal (scan/identity.py): which tool, which answer field."""

from __future__ import annotations

from typing import Any

import pytest

from zerto_rewind.config.parser import Parser
from zerto_rewind.scan.heuristics import catalog_from_tools, extend_catalog, merge_into_config
from zerto_rewind.scan.identity import merge_resolvers, propose_resolver

S = {"type": "string"}


def lookup(
    name: str = "get_vm_info",
    required: tuple[str, ...] = ("name",),
    description: str = "Get detailed information about a specific virtual machine",
    **extra: Any,
) -> dict[str, Any]:
    props = {arg: S for arg in required} | {"verbose": {"type": "boolean"}}
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props, "required": list(required)},
        "annotations": {"readOnlyHint": True},
        **extra,
    }


def proposed(*tools: dict[str, Any]) -> dict[str, Any] | None:
    found = propose_resolver(tools, {str(t["name"]) for t in tools})
    return found.as_config() if found else None


def test_an_output_schema_moref_is_compared_with_zertos_vm_identifier() -> None:
    out = {"type": "object", "properties": {"moref": S, "name": S}}
    assert proposed(lookup("describe_vm", ("vm_name",), outputSchema=out)) == {
        "tool": "describe_vm",
        "arg": "vm_name",
        "id_path": "moref",  # zerto_field and zerto_pattern: the defaults (VmIdentifier)
    }


def test_an_instance_uuid_in_a_wrapped_output_schema_is_found() -> None:
    out = {"type": "object", "properties": {"result": {"type": "object",
           "properties": {"instanceUuid": S}}}}  # fmt: skip
    found = propose_resolver([lookup(outputSchema=out)], {"get_vm_info"})
    assert found is not None
    assert not found.guessed
    assert (found.id_path, found.zerto_field) == ("result.instanceUuid", "instance_identifier")


def test_the_description_can_name_the_field() -> None:
    tool = lookup(description="Look a VM up; returns its moref and power state")
    assert proposed(tool)["id_path"] == "moref"  # type: ignore[index]


def test_without_schema_or_words_instance_uuid_is_guessed_and_said() -> None:
    found = propose_resolver([lookup()], {"get_vm_info"})
    assert found is not None
    assert found.guessed
    assert found.as_config()["zerto_pattern"] == "^(?P<id>.+)$"
    assert any("guessed" in e for e in found.evidence)


def test_a_schema_backed_lookup_wins_over_a_guessed_one() -> None:
    out = {"type": "object", "properties": {"moid": S}}
    tools = [lookup(), lookup("show_vm", outputSchema=out)]
    assert proposed(*tools)["tool"] == "show_vm"  # type: ignore[index]


@pytest.mark.parametrize(
    "tool",
    [
        lookup("get_vm_stats"),  # not a lookup of the VM itself
        lookup("get_vm_screenshot"),
        lookup("get_host_info", description="Get information about an ESXi host"),
        lookup(required=("hostname", "vm_id")),  # two arguments: the resolver passes one
        lookup(required=()),
        lookup(required=("path",)),  # not a VM name
        lookup("list_vms", description="List all virtual machines"),
        lookup(description="Get details of every virtual machine"),
    ],
)
def test_tools_that_do_not_look_one_vm_up_by_name_are_not_proposed(tool: dict[str, Any]) -> None:
    assert proposed(tool) is None


def test_a_mutating_tool_is_never_the_resolver() -> None:
    assert propose_resolver([lookup()], set()) is None
    destructive = {**lookup(), "annotations": {"destructiveHint": True}}
    assert catalog_from_tools("v", [destructive]).resolver is None


def test_merge_adds_the_identity_check_and_keeps_one_a_person_wrote() -> None:
    proposal = catalog_from_tools("v", [lookup()]).catalog
    merged, _added, _hardened = merge_into_config({"catalog": {"pins": {}}}, proposal)
    assert merged["catalog"]["resolvers"]["v"]["tool"] == "get_vm_info"
    assert merged["catalog"]["pins"] == {}
    mine = {"resolvers": {"v": {"tool": "find_vm", "arg": "vm", "id_path": "id"}}}
    assert merge_resolvers(mine, proposal) is None
    again, _a, _h = merge_into_config({"catalog": mine}, proposal)
    assert again["catalog"] == mine


def test_from_annotations_keeps_the_configured_identity_check() -> None:
    """extend_catalog used to build the catalog anew without catalog.resolvers: a gateway
    with from_annotations lost its identity check once it read the live tool list. The
    proposal itself is not added at run time: the check in force is the one reviewed."""
    base = Parser("g.json", ".").settings(
        {
            "zvm": {"url": "https://zvm", "client_id": "c", "client_secret_env": "S"},
            "catalog": {
                "from_annotations": True,
                "resolvers": {"w": {"tool": "find_vm", "arg": "vm", "id_path": "id"}},
            },
        },
        {},
        loose_permissions=False,
    )
    proposal = catalog_from_tools("v", [lookup()]).catalog
    extended = extend_catalog(base.catalog, proposal)
    assert extended.resolvers == base.catalog.resolvers
    assert set(extended.resolvers) == {"w"}
    assert "mcp__v__get_vm_info" in extended.read_only
