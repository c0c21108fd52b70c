"""catalog.resolvers: the gateway's identity check, validated key by key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unit.config.config_helpers import ZVM, config_error, load
from zerto_rewind.config.settings import DEFAULT_ZERTO_ID_PATTERN

RESOLVER = {"tool": "get_vm_info", "arg": "name", "id_path": "moid"}


def with_resolver(spec: Any, **top: Any) -> dict[str, Any]:
    return {
        "zvm": ZVM,
        "read_only_tools": ["mcp__vsphere__get_*"],
        "tools": {"mcp__vsphere__power_off": {"vm_arg": "name"}},
        "catalog": {"resolvers": {"vsphere": spec}},
        **top,
    }


def test_a_resolver_with_its_defaults(tmp_path: Path) -> None:
    resolver = load(tmp_path, with_resolver(RESOLVER)).catalog.resolvers["vsphere"]
    assert (resolver.server, resolver.tool, resolver.arg, resolver.id_path) == (
        "vsphere",
        "get_vm_info",
        "name",
        "moid",
    )
    assert resolver.zerto_field == "vm_identifier"
    assert resolver.zerto_pattern == DEFAULT_ZERTO_ID_PATTERN
    assert resolver.timeout_s == 10.0


def test_every_resolver_key(tmp_path: Path) -> None:
    spec = {
        **RESOLVER,
        "id_path": "config.instance_uuid",
        "zerto_field": "instance_identifier",
        "zerto_pattern": "^(?P<id>[0-9a-f-]+)$",
        "timeout_s": 2.5,
    }
    resolver = load(tmp_path, with_resolver(spec)).catalog.resolvers["vsphere"]
    assert resolver.id_path == "config.instance_uuid"
    assert resolver.zerto_field == "instance_identifier"
    assert resolver.zerto_pattern == "^(?P<id>[0-9a-f-]+)$"
    assert resolver.timeout_s == 2.5


def test_no_resolvers_by_default(tmp_path: Path) -> None:
    assert load(tmp_path, {"zvm": ZVM}).catalog.resolvers == {}


@pytest.mark.parametrize(
    ("spec", "key", "problem"),
    [
        ("get_vm_info", "catalog.resolvers.vsphere", "JSON object"),
        ({"arg": "name", "id_path": "moid"}, "catalog.resolvers.vsphere.tool", "required"),
        ({"tool": "get_vm_info", "id_path": "moid"}, "catalog.resolvers.vsphere.arg", "required"),
        ({"tool": "get_vm_info", "arg": "name"}, "catalog.resolvers.vsphere.id_path", "required"),
        ({**RESOLVER, "tool": ""}, "catalog.resolvers.vsphere.tool", "non-empty"),
        ({**RESOLVER, "tool": "power_off"}, "catalog.resolvers.vsphere.tool", "read-only"),
        ({**RESOLVER, "id_path": "a..b"}, "catalog.resolvers.vsphere.id_path", "dotted path"),
        ({**RESOLVER, "id_path": "vms[]"}, "catalog.resolvers.vsphere.id_path", "fan-out"),
        ({**RESOLVER, "zerto_field": "VmName"}, "catalog.resolvers.vsphere.zerto_field", "one of"),
        ({**RESOLVER, "zerto_pattern": "("}, "catalog.resolvers.vsphere.zerto_pattern", "regular"),
        (
            {**RESOLVER, "zerto_pattern": r"vm-\d+"},
            "catalog.resolvers.vsphere.zerto_pattern",
            "(?P<id>",
        ),
        ({**RESOLVER, "timeout_s": 0}, "catalog.resolvers.vsphere.timeout_s", ""),
        ({**RESOLVER, "moref": "x"}, "catalog.resolvers.vsphere.moref", "unknown"),
    ],
)
def test_a_bad_resolver_names_its_key(tmp_path: Path, spec: Any, key: str, problem: str) -> None:
    error = config_error(tmp_path, with_resolver(spec))
    assert error.key == key
    assert problem in str(error)


def test_resolvers_must_be_an_object(tmp_path: Path) -> None:
    raw = {"zvm": ZVM, "catalog": {"resolvers": ["vsphere"]}}
    assert config_error(tmp_path, raw).key == "catalog.resolvers"


def test_the_vcenter_to_compare_is_fixed_or_read_from_the_answer(tmp_path: Path) -> None:
    fixed = load(tmp_path, with_resolver({**RESOLVER, "vcenter": "d4a6a1d5"}))
    assert fixed.catalog.resolvers["vsphere"].vcenter == "d4a6a1d5"
    assert fixed.catalog.resolvers["vsphere"].vcenter_path is None
    read = load(tmp_path, with_resolver({**RESOLVER, "vcenter_path": "vm.vcenter"}))
    assert read.catalog.resolvers["vsphere"].vcenter_path == "vm.vcenter"
    assert "(?P<vcenter>" in DEFAULT_ZERTO_ID_PATTERN


@pytest.mark.parametrize(
    ("extra", "key"),
    [({"vcenter": ""}, "vcenter"), ({"vcenter_path": "vms[].vc"}, "vcenter_path")],
)
def test_a_bad_vcenter_key_is_named(tmp_path: Path, extra: dict[str, Any], key: str) -> None:
    error = config_error(tmp_path, with_resolver({**RESOLVER, **extra}))
    assert f"catalog.resolvers.vsphere.{key}" in str(error)
