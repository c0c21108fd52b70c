"""The doctor's catalog checks (cli/doctor/catalog.py): one layer, settings built in memory."""

from __future__ import annotations

from typing import Any

import pytest

from zerto_rewind.cli.doctor.catalog import (
    identity_check,
    live_pattern_check,
    pattern_check,
    vm_arg_check,
)
from zerto_rewind.config.parser import Parser
from zerto_rewind.config.settings import Settings

ZVM = {"url": "https://zvm", "client_id": "c", "client_secret_env": "S"}
GET_VM_INFO = {
    "name": "get_vm_info",
    "description": "Get detailed information about a specific virtual machine",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                    "required": ["name"]},
    "annotations": {"readOnlyHint": True},
}  # fmt: skip
POWER_OFF = {
    "name": "power_off",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    "annotations": {"destructiveHint": True},
}
LIST_VMS = {"name": "list_vms", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}  # fmt: skip  # noqa: E501


def settings(**config: Any) -> Settings:
    return Parser("doctor.json", ".").settings({"zvm": ZVM, **config}, {}, loose_permissions=False)


def test_tools_naming_no_vm_pass_with_vpgs_or_decision() -> None:
    s = settings(
        tools={
            "mcp__v__power_off": {"vm_arg": "name"},
            "mcp__v__create_vm": {"decision": "allow"},
            "mcp__v__reboot_host": {"vpgs": ["prod"]},
        }
    )
    check = vm_arg_check(s)
    assert check.status == "pass"
    assert check.detail == (
        "1 of 3 tools name their VM argument; 2 name no VM and set vpgs or decision"
    )
    only_vms = settings(tools={"mcp__v__power_off": {"vm_arg": "name"}})
    assert vm_arg_check(only_vms).detail == "all 1 tools name their VM argument"


def test_advice_names_the_key_that_fits_each_kind_of_tool() -> None:
    """create_vm: decision; reboot_host / configure_ntp: vpgs or decision; reboot_vm: vm_arg."""
    s = settings(
        tools={
            "mcp__v__create_vm": {},
            "mcp__v__reboot_host": {},
            "mcp__v__configure_ntp": {},
            "mcp__v__reboot_vm": {},
        }
    )
    check = vm_arg_check(s)
    assert check.status == "fail"
    fix = check.fix
    assert (
        '"decision": "allow" (or "prompt") for those that make a new VM: mcp__v__create_vm' in fix
    )
    host = fix.split('"vpgs"', 1)[1]
    assert "mcp__v__reboot_host, mcp__v__configure_ntp" in host.split(";")[0]
    assert '"vm_arg": "<argument path>" when the tool changes a VM it names' in fix
    assert fix.rstrip().endswith("(docs/configuration.md)")
    assert "mcp__v__reboot_vm" in fix.split('"vm_arg"', 1)[1]


@pytest.mark.parametrize(
    "entry", ["mcp__vsphere__**list(", "[power", "mcp__v__power off", "mcp__v__{a,b}"]
)
def test_a_pattern_no_tool_name_can_match_fails(entry: str) -> None:
    check = pattern_check(settings(read_only_tools=[entry]).catalog)
    assert check.status == "fail"
    assert repr(entry) in check.detail
    assert "only * and ? are wildcards" in check.detail


def test_a_doubled_star_warns_and_clean_patterns_pass() -> None:
    assert pattern_check(settings(read_only_tools=["mcp__v__**list*"]).catalog).status == "warn"
    clean = settings(
        read_only_tools=["mcp__v__list_*", "mcp__v__get_vm?info"],
        tools={"mcp__v-x.y__*": {"vm_arg": "name"}},
    )
    assert pattern_check(clean.catalog).status == "pass"


def test_a_pattern_that_matches_no_live_tool_warns() -> None:
    s = settings(read_only_tools=["mcp__v__list_*", "mcp__v__lsit_*", "mcp__other__x*"])
    check = live_pattern_check(s.catalog, "v", [LIST_VMS, POWER_OFF])
    assert check.status == "warn"
    assert "mcp__v__lsit_*" in check.detail
    assert "mcp__v__list_*" not in check.detail
    assert "other" not in check.detail  # another server's patterns are not judged


def test_identity_check_fails_when_a_lookup_tool_exists_and_no_resolver() -> None:
    s = settings(read_only_tools=["mcp__v__get_vm_info"], tools={"mcp__v__power_off": {"vm_arg": "name"}})  # fmt: skip  # noqa: E501
    check = identity_check(s, "v", [GET_VM_INFO, POWER_OFF])
    assert check.status == "fail"
    assert '"resolvers": {"v": {"tool": "get_vm_info", "arg": "name"' in check.fix


def test_identity_check_warns_when_no_tool_can_confirm_a_vm() -> None:
    s = settings(read_only_tools=["mcp__v__list_vms"], tools={"mcp__v__power_off": {"vm_arg": "name"}})  # fmt: skip  # noqa: E501
    check = identity_check(s, "v", [LIST_VMS, POWER_OFF])
    assert check.status == "warn"
    assert "nothing can confirm it" in check.detail


def test_identity_check_passes_with_a_resolver_and_fails_when_its_tool_is_gone() -> None:
    resolvers = {"v": {"tool": "get_vm_info", "arg": "name", "id_path": "instance_uuid"}}
    s = settings(
        read_only_tools=["mcp__v__get_vm_info"],
        tools={"mcp__v__power_off": {"vm_arg": "name"}},
        catalog={"resolvers": resolvers},
    )
    assert identity_check(s, "v", [GET_VM_INFO, POWER_OFF]).status == "pass"
    gone = identity_check(s, "v", [POWER_OFF])
    assert gone.status == "fail"
    assert "'get_vm_info' is not a tool of v" in gone.detail


def test_identity_check_passes_a_server_whose_catalog_names_no_vm() -> None:
    s = settings(read_only_tools=["mcp__v__list_vms"], tools={"mcp__v__reboot_host": {"decision": "prompt"}})  # fmt: skip  # noqa: E501
    assert identity_check(s, "v", [LIST_VMS]).status == "pass"
