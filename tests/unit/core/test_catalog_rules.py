"""Catalog rules pinned against brute force and exact messages (core/catalog.py):
globs_intersect, specificity, pattern_ties, and the vm_arg pattern's errors and origins."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.config import CatalogSettings, load_settings
from zerto_rewind.core.catalog import (
    EXACT,
    classify,
    glob_match,
    globs_intersect,
    pattern_ties,
    specificity,
)
from zerto_rewind.errors import ConfigError

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}


def catalog(tmp_path: Path, **sections: Any) -> CatalogSettings:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"zvm": ZVM, **sections}))
    path.chmod(0o600)
    return load_settings({"HOME": str(tmp_path)}, path=str(path)).catalog


def brute_intersect(a: str, b: str, alphabet: str = "abx", longest: int = 5) -> bool:
    """Some name over ``alphabet`` of at most ``longest`` characters matches both."""
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            name = "".join(chars)
            if glob_match(a, name) and glob_match(b, name):
                return True
    return False


PAIRS = [
    ("*a*", "*b*"),
    ("a*", "*b"),
    ("a*b", "b*a"),
    ("*", ""),
    ("", "*"),
    ("?", ""),
    ("", "?"),
    ("a?", "?b"),
    ("a?", "?"),
    ("**a", "b**"),
    ("*a*a", "a*b*"),
    ("a*", "b*"),
    ("ab", "a?"),
    ("ab", "a"),
    ("a", "ab"),
    ("?*", "*?"),
    ("x*a*b", "x*b*a"),
    ("a*?", "*b"),
    ("*?a", "b*"),
    ("a*a", "*aa*"),
]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_globs_intersect_agrees_with_brute_force(a: str, b: str) -> None:
    expected = brute_intersect(a, b)
    assert globs_intersect(a, b) is expected
    assert globs_intersect(b, a) is expected


def test_globs_intersect_with_many_stars_is_fast() -> None:
    """The search remembers the states it has seen: many stars stay linear-ish, not 2^n."""
    a = "*a" * 18 + "*b"
    b = "*a" * 18 + "*c"
    started = time.perf_counter()
    assert globs_intersect(a, b) is False
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    ("entry", "score"),
    [("mcp__v__list_vms", EXACT), ("a?b*", 2), ("a??", 1), ("*", 0), ("??*x", 1), ("ab*", 2)],
)
def test_specificity_counts_literal_characters(entry: str, score: int) -> None:
    assert specificity(entry) == score


def test_pattern_ties_only_equal_specificity_globs_that_overlap(tmp_path: Path) -> None:
    """An exact read-only name is skipped (not the end of the scan); a tools pattern of another
    specificity is no tie, nor is a disjoint one, nor an exact tools name."""
    cat = catalog(
        tmp_path,
        read_only_tools=["mcp__v__exact", "mcp__v__get_*", "mcp__v__list_*"],
        tools={
            "mcp__v__*get_*": {},  # same literal count as get_*, overlaps: a tie
            "mcp__v__*": {},  # overlaps both, less specific: no tie
            "mcp__w__get_*": {},  # same literal count as get_*, but disjoint
            "mcp__v__get_vm": {},  # exact: never a tie
        },
    )
    assert specificity("mcp__v__*get_*") == specificity("mcp__v__get_*")
    assert pattern_ties(cat) == [("mcp__v__get_*", "mcp__v__*get_*")]


def test_pattern_ties_need_an_overlap(tmp_path: Path) -> None:
    cat = catalog(tmp_path, read_only_tools=["mcp__a__get_*"], tools={"mcp__b__get_*": {}})
    assert specificity("mcp__a__get_*") == specificity("mcp__b__get_*")
    assert pattern_ties(cat) == []


# ---------------------------------------------------------------- vm_arg patterns


def test_a_pattern_origin_quotes_the_whole_match(tmp_path: Path) -> None:
    cat = catalog(
        tmp_path, tools={"t": {"vm_arg": {"path": "command", "pattern": r"ssh (?P<vm>\S+)"}}}
    )
    verdict = classify("t", {"command": "sudo ssh web01 uptime"}, cat)
    assert verdict.vms == ("web01",)
    assert verdict.origins["web01"] == (
        "pattern 'ssh (?P<vm>\\\\S+)' on argument command, group vm of the match 'ssh web01'"
    )


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (r"ssh (\S+", "not a valid regular expression: missing ), unterminated subpattern"),
        (r"ssh (\S+)", "the pattern needs a named group (?P<vm>...) that captures the VM name"),
    ],
)
def test_a_bad_pattern_is_a_config_error_on_its_key(
    tmp_path: Path, pattern: str, message: str
) -> None:
    cat = catalog(tmp_path, tools={"t": {"vm_arg": {"path": "c", "pattern": pattern}}})
    with pytest.raises(ConfigError) as info:
        classify("t", {"c": "ssh web01"}, cat)
    assert info.value.key == "tools.t.vm_arg.pattern"
    assert str(info.value).startswith(f"environment: tools.t.vm_arg.pattern: {message}")


# ---------------------------------------------------------------- the verdict's fields

CATALOG: dict[str, Any] = {
    "read_only_tools": ["mcp__v__list_vms", "mcp__v__get_*", "mcp__v__ge?_*"],
    "tools": {
        "mcp__v__power_off": {"vm_arg": "name"},
        "mcp__v__host_*": {"vpgs": ["jp-local"]},
        "mcp__v__bulk_*": {},
        "mcp__v__a*": {"vm_arg": "first"},
        "mcp__v__*b": {"vm_arg": "second"},
    },
}


@pytest.mark.parametrize(
    ("tool", "tool_input", "kind", "entry", "vms", "score"),
    [
        (
            "mcp__v__power_off",
            {"name": "web01"},
            "mutating",
            "mcp__v__power_off",
            ("web01",),
            EXACT,
        ),
        ("mcp__v__power_off", {}, "mutating", "mcp__v__power_off", (), EXACT),
        ("mcp__v__list_vms", {}, "read_only", "mcp__v__list_vms", (), EXACT),
        ("mcp__v__get_vm", {}, "read_only", "mcp__v__get_*", (), 12),  # first of two equal
        ("mcp__v__host_reboot", {}, "mutating", "mcp__v__host_*", (), 13),
        ("mcp__v__bulk_off", {}, "mutating", "mcp__v__bulk_*", (), 13),
        ("mcp__v__ab", {"first": "vm-1", "second": "vm-2"}, "mutating", "mcp__v__a*", ("vm-1",), 9),
        ("mcp__w__x", {}, "unlisted", None, (), 0),
    ],
)
def test_every_verdict_names_its_tool_entry_spec_and_specificity(
    tmp_path: Path,
    tool: str,
    tool_input: Any,
    kind: str,
    entry: str | None,
    vms: tuple[str, ...],
    score: int,
) -> None:
    cat = catalog(tmp_path, **CATALOG)
    verdict = classify(tool, tool_input, cat)
    assert (verdict.kind, verdict.tool_name, verdict.entry, verdict.vms) == (kind, tool, entry, vms)
    assert verdict.specificity == score
    assert verdict.tie is None
    if kind == "mutating":
        assert verdict.spec is cat.tools[entry or ""]
    else:
        assert verdict.spec is None


def test_the_problems_of_a_mutating_call_without_a_vm(tmp_path: Path) -> None:
    cat = catalog(tmp_path, **CATALOG)
    assert classify("mcp__v__bulk_off", {}, cat).problem == (
        "the catalog entry 'mcp__v__bulk_*' names no VM argument for this tool (it may change "
        "several VMs or none)"
    )
    assert classify("mcp__v__host_x", {}, cat).problem is None  # its VPGs are named
    assert classify("mcp__v__power_off", {}, cat).problem == (
        "no VM name found in the arguments at name"
    )


def test_a_catch_all_pattern_matches(tmp_path: Path) -> None:
    """ "*" has no literal characters (specificity 0) and still matches every name."""
    assert classify("anything", {}, catalog(tmp_path, tools={"*": {}})).entry == "*"
    assert classify("anything", {}, catalog(tmp_path, read_only_tools=["*"])).kind == "read_only"


def test_a_glob_that_does_not_match_is_not_used(tmp_path: Path) -> None:
    cat = catalog(tmp_path, tools={"mcp__a__*": {}}, read_only_tools=["mcp__a__get_*"])
    assert classify("mcp__b__x", {}, cat).kind == "unlisted"


def test_values_that_are_not_names_are_skipped_not_the_end_of_the_list(tmp_path: Path) -> None:
    cat = catalog(tmp_path, tools={"t": {"vm_arg": "names[]"}})
    verdict = classify("t", {"names": [True, {"x": 1}, "web01", 7]}, cat)
    assert verdict.vms == ("web01", "7")


def test_equal_read_only_patterns_first_listed_wins_and_globs_use_the_global_vm_map(
    tmp_path: Path,
) -> None:
    cat = catalog(
        tmp_path,
        read_only_tools=["mcp__r__a*", "mcp__r__*b"],
        tools={"mcp__t__*": {"vm_arg": "name"}},
        vm_map={"aliases": {"WEB": "web01"}},
    )
    assert classify("mcp__r__ab", {}, cat).entry == "mcp__r__a*"
    assert classify("mcp__t__off", {"name": "WEB"}, cat).vms == ("web01",)
