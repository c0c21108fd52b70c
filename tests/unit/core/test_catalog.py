"""Classifying a tool call: read-only, mutating on which VMs, or unlisted (catalog.py)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerto_rewind.config import CatalogSettings, VmMap, load_settings
from zerto_rewind.core.catalog import (
    EXACT,
    MUTATING,
    READ_ONLY,
    UNLISTED,
    classify,
    glob_match,
    globs_intersect,
    map_vm_name,
    pattern_ties,
)

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}


@pytest.fixture
def catalog_of(tmp_path: Path) -> Any:
    """Build a CatalogSettings through the real config loader from the catalog keys."""

    def build(**sections: Any) -> CatalogSettings:
        path = tmp_path / "config.json"
        path.write_text(json.dumps({"zvm": ZVM, **sections}))
        path.chmod(0o600)
        return load_settings({"HOME": str(tmp_path)}, path=str(path)).catalog

    return build


# ------------------------------------------------------------------ read-only / mutating


def test_unlisted_tool(catalog_of: Any) -> None:
    """A tool in neither list is unlisted."""
    c = classify("mcp__x__y", {}, catalog_of(read_only_tools=["a"], tools={"b": {}}))
    assert (c.kind, c.entry, c.vms) == (UNLISTED, None, ())


def test_exact_read_only(catalog_of: Any) -> None:
    """An exact read-only name is read-only, with that name as the entry."""
    c = classify("mcp__v__list_vms", {}, catalog_of(read_only_tools=["mcp__v__list_vms"]))
    assert (c.kind, c.entry) == (READ_ONLY, "mcp__v__list_vms")


def test_read_only_glob(catalog_of: Any) -> None:
    """A read-only glob pattern matches whole names only."""
    catalog = catalog_of(read_only_tools=["mcp__v__get_*", "mcp__v__list_v?"])
    assert classify("mcp__v__get_vm", {}, catalog).entry == "mcp__v__get_*"
    assert classify("mcp__v__list_vm", {}, catalog).kind == READ_ONLY
    assert classify("mcp__v__list_vms", {}, catalog).kind == UNLISTED
    assert classify("xmcp__v__get_vm", {}, catalog).kind == UNLISTED


def test_exact_read_only_beats_mutating_pattern(catalog_of: Any) -> None:
    """An exact read-only name wins over a mutating pattern that also matches it."""
    catalog = catalog_of(read_only_tools=["mcp__v__list_vms"], tools={"mcp__v__*": {}})
    assert classify("mcp__v__list_vms", {}, catalog).kind == READ_ONLY
    assert classify("mcp__v__delete_vm", {}, catalog).kind == MUTATING


def test_exact_mutating_beats_read_only_pattern(catalog_of: Any) -> None:
    """An exact mutating name wins over a read-only pattern that also matches it."""
    catalog = catalog_of(
        read_only_tools=["mcp__v__*"], tools={"mcp__v__power_off": {"vm_arg": "name"}}
    )
    c = classify("mcp__v__power_off", {"name": "web01"}, catalog)
    assert (c.kind, c.entry, c.vms) == (MUTATING, "mcp__v__power_off", ("web01",))
    assert classify("mcp__v__list_vms", {}, catalog).kind == READ_ONLY


def test_mutating_pattern_beats_less_specific_read_only_pattern(catalog_of: Any) -> None:
    """A more specific mutating pattern wins over a general read-only one."""
    catalog = catalog_of(read_only_tools=["mcp__v__*"], tools={"mcp__v__set_*": {"vm_arg": "name"}})
    c = classify("mcp__v__set_cpu", {"name": "db1"}, catalog)
    assert (c.kind, c.entry, c.vms) == (MUTATING, "mcp__v__set_*", ("db1",))
    assert c.specificity == len("mcp__v__set_")


def test_specific_read_only_pattern_beats_general_mutating_pattern(catalog_of: Any) -> None:
    """Issue 12: the short config makes list_vms read-only, not a prompt on every listing."""
    catalog = catalog_of(
        read_only_tools=["mcp__vsphere__list_*", "mcp__vsphere__get_*"],
        tools={"mcp__vsphere__*": {"vm_arg": ["name", "vm_name"]}},
    )
    listing = classify("mcp__vsphere__list_vms", {}, catalog)
    assert (listing.kind, listing.entry) == (READ_ONLY, "mcp__vsphere__list_*")
    assert listing.specificity == len("mcp__vsphere__list_")
    off = classify("mcp__vsphere__power_off", {"name": "web01"}, catalog)
    assert (off.kind, off.entry, off.vms) == (MUTATING, "mcp__vsphere__*", ("web01",))


def test_tie_between_read_only_and_mutating_pattern_is_mutating(catalog_of: Any) -> None:
    """Equal literal parts: the restrictive reading wins, and the tie is recorded."""
    catalog = catalog_of(read_only_tools=["mcp__v__get_*"], tools={"mcp__v__*t_vm": {}})
    c = classify("mcp__v__get_vm", {}, catalog)
    assert (c.kind, c.tie) == (MUTATING, "mcp__v__get_*")
    assert pattern_ties(catalog) == [("mcp__v__get_*", "mcp__v__*t_vm")]


def test_most_specific_tools_pattern_gives_the_spec(catalog_of: Any) -> None:
    """Two tools patterns: the longer literal part's vm_arg applies, whatever the order."""
    catalog = catalog_of(
        tools={"mcp__v__*": {"vm_arg": "name"}, "mcp__v__disk_*": {"vm_arg": "vm_name"}}
    )
    c = classify("mcp__v__disk_add", {"name": "x", "vm_name": "db1"}, catalog)
    assert (c.entry, c.vms) == ("mcp__v__disk_*", ("db1",))


def test_exact_name_beats_more_specific_looking_pattern(catalog_of: Any) -> None:
    """An exact name always wins, even over a long pattern."""
    catalog = catalog_of(
        read_only_tools=["mcp__vsphere__power_off_vm_dry_run*"],
        tools={"mcp__vsphere__power_off_vm_dry_run": {"vm_arg": "name"}},
    )
    c = classify("mcp__vsphere__power_off_vm_dry_run", {"name": "a"}, catalog)
    assert (c.kind, c.specificity) == (MUTATING, EXACT)


@pytest.mark.parametrize(
    ("a", "b", "meet"),
    [
        ("mcp__v__get_*", "mcp__v__*_vm", True),
        ("mcp__v__get_*", "mcp__v__list_*", False),
        ("a*b", "*c", False),
        ("a?c", "*b*", True),
        ("*", "", True),
        ("x", "x?", False),
    ],
)
def test_globs_intersect(a: str, b: str, meet: bool) -> None:
    """Two globs intersect when some name matches both."""
    assert globs_intersect(a, b) is meet
    assert globs_intersect(b, a) is meet


def test_mutating_without_vm_arg_reports_problem(catalog_of: Any) -> None:
    """A mutating entry with no vm_arg is mutating with no VMs and says why."""
    c = classify("Bash", {"command": "ls"}, catalog_of(tools={"Bash": {}}))
    assert (c.kind, c.vms) == (MUTATING, ())
    assert c.problem is not None
    assert "names no VM argument" in c.problem


def test_tool_names_are_case_sensitive(catalog_of: Any) -> None:
    """Names and patterns match case-sensitively, like the host's tool names."""
    catalog = catalog_of(read_only_tools=["mcp__v__list_*"])
    assert classify("mcp__V__list_vms", {}, catalog).kind == UNLISTED


# ------------------------------------------------------------------------- vm_arg


@pytest.mark.parametrize(
    ("vm_arg", "tool_input", "vms"),
    [
        ("name", {"name": "web01"}, ("web01",)),
        ("name", {"name": "  web01 "}, ("  web01 ",)),  # never stripped: the server won't
        ("name", {"name": "web01\u00a0"}, ("web01\u00a0",)),
        ("vm.name", {"vm": {"name": "web01"}}, ("web01",)),
        ("a.b.c", {"a": {"b": {"c": "deep"}}}, ("deep",)),
        ("vm_id", {"vm_id": 42}, ("42",)),
        ("vms[]", {"vms": ["a", "b", "a", "c"]}, ("a", "b", "c")),
        ("vms[].name", {"vms": [{"name": "a"}, {"id": 1}, {"name": "b"}]}, ("a", "b")),
        ("groups[].vms[]", {"groups": [{"vms": ["a", "b"]}, {"vms": ["b", "c"]}]}, ("a", "b", "c")),
        ("vms[]", {"vms": ["a", "", 3, True, None, {"x": 1}, "  "]}, ("a", "3", "  ")),
    ],
)
def test_vm_arg_dotted_paths(
    catalog_of: Any, vm_arg: str, tool_input: dict[str, Any], vms: tuple[str, ...]
) -> None:
    """Dotted paths and `[]` fan-out find every VM, deduplicated in order, skipping non-names."""
    c = classify("t", tool_input, catalog_of(tools={"t": {"vm_arg": vm_arg}}))
    assert (c.kind, c.vms, c.problem) == (MUTATING, vms, None)


@pytest.mark.parametrize(
    ("vm_arg", "tool_input"),
    [
        ("name", {}),
        ("name", {"name": ""}),
        ("name", {"name": None}),
        ("name", {"name": False}),
        ("name", {"name": ["web01"]}),
        ("vm.name", {"vm": "web01"}),
        ("vm.name", {"vm": [{"name": "web01"}]}),
        ("vms[]", {"vms": "web01"}),
        ("vms[]", {"vms": []}),
    ],
)
def test_vm_arg_absent_is_a_problem(
    catalog_of: Any, vm_arg: str, tool_input: dict[str, Any]
) -> None:
    """When the path finds no name the call is mutating with no VM and names the path tried."""
    c = classify("t", tool_input, catalog_of(tools={"t": {"vm_arg": vm_arg}}))
    assert (c.kind, c.vms) == (MUTATING, ())
    assert c.problem == f"no VM name found in the arguments at {vm_arg}"


def test_vm_arg_candidates_first_present_wins(catalog_of: Any) -> None:
    """With a list of paths, the first one that yields a VM is used, the rest ignored."""
    catalog = catalog_of(tools={"t": {"vm_arg": ["vm.name", "name", "vms[]"]}})
    assert classify("t", {"name": "b", "vms": ["c"]}, catalog).vms == ("b",)
    assert classify("t", {"vm": {"name": "a"}, "name": "b"}, catalog).vms == ("a",)
    assert classify("t", {"name": "", "vms": ["c", "d"]}, catalog).vms == ("c", "d")
    missing = classify("t", {"other": 1}, catalog)
    assert missing.problem == "no VM name found in the arguments at vm.name, name, vms[]"


def test_vm_arg_pattern_pulls_vm_from_string(catalog_of: Any) -> None:
    """A {path, pattern} vm_arg takes the named group `vm` of every match in the string."""
    spec = {"vm_arg": {"path": "command", "pattern": r"ssh\s+(?:\S+@)?(?P<vm>[\w.-]+)"}}
    catalog = catalog_of(tools={"mcp__ssh__exec": spec})
    c = classify("mcp__ssh__exec", {"command": "ssh root@web01 'systemctl stop x'"}, catalog)
    assert c.vms == ("web01",)
    both = "ssh db1 uptime && ssh admin@db2 reboot; ssh db1 true"
    assert classify("mcp__ssh__exec", {"command": both}, catalog).vms == ("db1", "db2")
    none = classify("mcp__ssh__exec", {"command": "ls -l"}, catalog)
    assert none.vms == ()
    assert none.problem == "no VM name found in the arguments at command (pattern)"


def test_vm_arg_pattern_empty_group_ignored(catalog_of: Any) -> None:
    """A match whose vm group is empty or unmatched contributes nothing."""
    spec = {"vm_arg": {"path": "cmd", "pattern": r"host=(?P<vm>\w*)"}}
    c = classify("t", {"cmd": "host= host=a"}, catalog_of(tools={"t": spec}))
    assert c.vms == ("a",)


def test_vm_arg_pattern_over_list(catalog_of: Any) -> None:
    """A pattern applies to each string a `[]` path yields."""
    spec = {"vm_arg": {"path": "cmds[]", "pattern": r"@(?P<vm>\w+)"}}
    c = classify("t", {"cmds": ["x @a @b", "y @c", 5]}, catalog_of(tools={"t": spec}))
    assert c.vms == ("a", "b", "c")


def test_pattern_spec_as_candidate_then_fallback(catalog_of: Any) -> None:
    """A pattern candidate that finds nothing falls through to the next candidate."""
    spec = {"vm_arg": [{"path": "cmd", "pattern": r"ssh (?P<vm>\S+)"}, "target"]}
    catalog = catalog_of(tools={"t": spec})
    assert classify("t", {"cmd": "ssh vm7 ls", "target": "x"}, catalog).vms == ("vm7",)
    assert classify("t", {"cmd": "ls", "target": "x"}, catalog).vms == ("x",)


def test_non_dict_tool_input_has_no_vm(catalog_of: Any) -> None:
    """A tool_input that is not an object yields no VM rather than an exception."""
    catalog = catalog_of(tools={"t": {"vm_arg": "name"}})
    for tool_input in (None, "web01", ["web01"], 3):
        assert classify("t", tool_input, catalog).vms == ()


# ------------------------------------------------------------------------- vm_map


def test_global_vm_map_aliases_and_strip_domain(catalog_of: Any) -> None:
    """The global vm_map applies aliases (exactly as written) and strips DNS domains."""
    catalog = catalog_of(
        tools={"t": {"vm_arg": "vms[]"}},
        vm_map={"aliases": {"Web": "web01-prod", "db": "db-main"}, "strip_domain": True},
    )
    vms = ["Web", "WEB", "app3.corp.example", "db.corp.example", "plain"]
    c = classify("t", {"vms": vms}, catalog)
    assert c.vms == ("web01-prod", "WEB", "app3", "db-main", "plain")
    assert c.args["web01-prod"] == "Web"  # what the server gets, for the identity check
    assert c.args["app3"] == "app3.corp.example"


def test_strip_domain_list_only_strips_listed_domains(catalog_of: Any) -> None:
    """strip_domain as a list strips only those domains, exactly as written."""
    catalog = catalog_of(
        tools={"t": {"vm_arg": "vms[]"}},
        vm_map={"strip_domain": ["corp.example", ".LAB.local"]},
    )
    vms = [
        "App3.corp.example",
        "App4.Corp.Example",
        "db.LAB.local",
        "db2.lab.local",
        "x.other.org",
        "corp.example",
        "ycorp.example",
    ]
    c = classify("t", {"vms": vms}, catalog)
    assert c.vms == (
        "App3",
        "App4.Corp.Example",
        "db",
        "db2.lab.local",
        "x.other.org",
        "corp.example",
        "ycorp.example",
    )


def test_per_tool_vm_map_replaces_global(catalog_of: Any) -> None:
    """A tool's own vm_map is used instead of the global one."""
    catalog = catalog_of(
        tools={
            "own": {"vm_arg": "name", "vm_map": {"aliases": {"w": "web-own"}}},
            "shared": {"vm_arg": "name"},
        },
        vm_map={"aliases": {"w": "web-global"}, "strip_domain": True},
    )
    assert classify("own", {"name": "w"}, catalog).vms == ("web-own",)
    assert classify("own", {"name": "a.b"}, catalog).vms == ("a.b",)
    assert classify("shared", {"name": "w"}, catalog).vms == ("web-global",)
    assert classify("shared", {"name": "a.b"}, catalog).vms == ("a",)


def test_mapping_deduplicates_after_mapping(catalog_of: Any) -> None:
    """Names that map to the same VM are returned once, first occurrence first."""
    catalog = catalog_of(
        tools={"t": {"vm_arg": "vms[]"}},
        vm_map={"aliases": {"www": "web01"}, "strip_domain": True},
    )
    c = classify("t", {"vms": ["db", "web01.corp", "www", "web01", "db.x"]}, catalog)
    assert c.vms == ("db", "web01")


@pytest.mark.parametrize(
    ("name", "aliases", "strip", "expected"),
    [
        ("web01", {}, False, "web01"),
        (" web01 ", {}, False, " web01 "),
        ("web01\u00a0", {"web01": "x"}, False, "web01\u00a0"),
        ("WEB01", {"web01": "x"}, False, "WEB01"),
        ("web01.corp.example", {}, True, "web01"),
        ("web01.corp.example", {}, False, "web01.corp.example"),
        ("Web01.Corp.Example", {}, ("corp.example",), "Web01.Corp.Example"),
        ("Web01.corp.example", {}, ("corp.example",), "Web01"),
        ("web01.corp.example", {"web01.corp.example": "exact"}, True, "exact"),
        ("web01.corp.example", {"web01": "after-strip"}, True, "after-strip"),
        ("WEB01.corp.example", {"web01": "after-strip"}, True, "WEB01"),
        ("web01.other", {"web01": "x"}, ("corp.example",), "web01.other"),
    ],
)
def test_map_vm_name(
    name: str, aliases: dict[str, str], strip: bool | tuple[str, ...], expected: str
) -> None:
    """Aliases are looked up before and after stripping the domain."""
    assert map_vm_name(name, VmMap(aliases, strip)) == expected


def test_map_vm_name_without_map_keeps_the_name_exactly() -> None:
    """With no vm_map a name is kept as given: spaces and NBSP are part of a vCenter name."""
    assert map_vm_name("  a.b  ", None) == "  a.b  "
    assert map_vm_name("a.b\u00a0", None) == "a.b\u00a0"


# ------------------------------------------------------------------------ glob_match


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("*", "", True),
        ("*", "anything", True),
        ("", "", True),
        ("", "a", False),
        ("?", "", False),
        ("?", "a", True),
        ("mcp__v__*", "mcp__v__", True),
        ("mcp__v__*", "mcp__v_", False),
        ("*__list_*", "mcp__v__list_vms", True),
        ("a*b*c", "abbbc", True),
        ("a*b*c", "abcb", False),
        ("a*?", "a", False),
        ("a*?", "ab", True),
        ("**a", "a", True),
        ("a.b", "aXb", False),
        ("a[b]", "a[b]", True),
    ],
)
def test_glob_match_examples(pattern: str, name: str, matches: bool) -> None:
    """`*` matches any run, `?` one character, everything else literally, whole name only."""
    assert glob_match(pattern, name) is matches


_glob_alphabet = "ab_.-"


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.text(alphabet=_glob_alphabet + "*?", max_size=10),
    st.text(alphabet=_glob_alphabet, max_size=12),
)
def test_glob_match_agrees_with_fnmatchcase(pattern: str, name: str) -> None:
    """On safe characters plus * and ?, glob_match equals fnmatch.fnmatchcase."""
    assert glob_match(pattern, name) == fnmatch.fnmatchcase(name, pattern)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(alphabet=_glob_alphabet + "*?", max_size=8), st.data())
def test_glob_match_accepts_names_built_from_pattern(pattern: str, data: st.DataObject) -> None:
    """A name made by filling each * and ? of a pattern always matches it."""
    name = ""
    for ch in pattern:
        if ch == "*":
            name += data.draw(st.text(alphabet=_glob_alphabet + "*?", max_size=4))
        elif ch == "?":
            name += data.draw(st.sampled_from(_glob_alphabet + "*?"))
        else:
            name += ch
    assert glob_match(pattern, name)
