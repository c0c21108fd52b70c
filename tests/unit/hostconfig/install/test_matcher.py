"""The compiled Claude Code matcher agrees with the catalog's classification."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerto_rewind.config import CatalogSettings, ToolSpec
from zerto_rewind.core.catalog import READ_ONLY, classify, glob_match
from zerto_rewind.errors import ConfigError
from zerto_rewind.hostconfig.install.matcher import (
    compile_matcher,
    covered_servers,
    glob_to_regex,
    js_escape,
)


def catalog(read_only: list[str], tools: list[str]) -> CatalogSettings:
    """A catalog with these read-only entries and tools (no vm_arg: unused here)."""
    specs = {name: ToolSpec(name, (), None) for name in tools}
    return CatalogSettings(tuple(read_only), specs, None, "prompt", "default")


def named_servers(cat: CatalogSettings) -> set[str]:
    """Oracle: servers spelt out literally as ``mcp__<server>__`` in some entry."""
    found = set()
    for entry in (*cat.read_only, *cat.tools):
        m = re.match(r"mcp__(.*?)__", entry)
        if m and m.group(1) and not set(m.group(1)) & set("*?"):
            found.add(m.group(1))
    return found


def covered(cat: CatalogSettings, name: str) -> bool:
    """Oracle: the name is under a named server, or a tools entry takes it."""
    if any(name.startswith(f"mcp__{s}__") for s in named_servers(cat)):
        return True
    return name in cat.tools or any(glob_match(key, name) for key in cat.tools)


def should_match(cat: CatalogSettings, name: str, *, all_tools: bool = False) -> bool:
    """Oracle: the hook must start for this name."""
    read_only = classify(name, {}, cat).kind == READ_ONLY
    return not read_only and (all_tools or covered(cat, name))


VSPHERE = catalog(["mcp__vsphere__list_vms", "mcp__vsphere__get_*"], ["mcp__vsphere__power_off_vm"])


# ------------------------------------------------------------------ examples


def test_vsphere_example_compiles_to_readable_lookahead() -> None:
    """The design's vSphere catalog gives one server prefix with a read-only exclusion."""
    assert compile_matcher(VSPHERE) == r"^mcp__vsphere__(?!(?:list_vms|get_.*)$)"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mcp__vsphere__power_off_vm", True),
        ("mcp__vsphere__delete_vm", True),  # unlisted tool of a covered server
        ("mcp__vsphere__list_vms", False),
        ("mcp__vsphere__get_vm", False),
        ("mcp__vsphere__list_vms_and_wipe", True),  # read-only names are whole names
        ("mcp__vsphere__xget_vm", True),
        ("mcp__proxmox__stop_vm", False),  # unknown server: not covered
        ("Bash", False),
        ("xmcp__vsphere__power_off_vm", False),
    ],
)
def test_vsphere_example_decides_each_name(name: str, expected: bool) -> None:
    """Read-only names are skipped; mutating and unlisted vSphere names start the hook."""
    assert bool(re.search(compile_matcher(VSPHERE), name)) is expected


def test_exact_tool_beats_read_only_glob() -> None:
    """An exact ``tools`` name inside a read-only glob still starts the hook."""
    cat = catalog(["mcp__vsphere__get_*"], ["mcp__vsphere__get_and_reset"])
    matcher = compile_matcher(cat)
    assert re.search(matcher, "mcp__vsphere__get_and_reset")
    assert not re.search(matcher, "mcp__vsphere__get_vm")


def test_specific_glob_wins_and_exact_read_only_beats_every_glob() -> None:
    """The more specific glob wins; an exact read-only name wins over any tools glob."""
    cat = catalog(["mcp__vc__get_*", "mcp__vc__set_safe"], ["mcp__vc__*et_*"])
    matcher = compile_matcher(cat)
    assert not re.search(matcher, "mcp__vc__get_vm")  # get_* is more specific than *et_*
    assert not re.search(matcher, "mcp__vc__set_safe")  # exact read-only wins
    assert re.search(matcher, "mcp__vc__set_other")


def test_issue_12_short_config_lists_without_hook() -> None:
    """The issue's short config: list_*/get_* stay read-only under a mutating mcp__vsphere__*."""
    cat = catalog(["mcp__vsphere__list_*", "mcp__vsphere__get_*"], ["mcp__vsphere__*"])
    matcher = compile_matcher(cat)
    assert not re.search(matcher, "mcp__vsphere__list_vms")
    assert not re.search(matcher, "mcp__vsphere__get_vm_info")
    assert re.search(matcher, "mcp__vsphere__power_off")


def test_tie_between_read_only_and_tools_glob_starts_the_hook() -> None:
    """Equal specificity: the call is mutating, so the hook starts."""
    cat = catalog(["mcp__vc__get_*"], ["mcp__vc__*t_vm"])  # 13 literal characters each
    assert re.search(compile_matcher(cat), "mcp__vc__get_vm")
    assert not re.search(compile_matcher(cat), "mcp__vc__get_host")


def test_non_mcp_tools_are_covered_by_exact_name() -> None:
    """A non-MCP tool in ``tools`` is matched by its whole name only."""
    cat = catalog(["mcp__vsphere__list_vms"], ["Bash"])
    matcher = compile_matcher(cat)
    assert re.search(matcher, "Bash")
    assert not re.search(matcher, "BashOutput")
    assert not re.search(matcher, "Read")


def test_cross_server_tools_glob_is_covered() -> None:
    """A tools glob spanning servers starts the hook for every server it names."""
    cat = catalog(["mcp__vsphere__list_vms"], ["mcp__*__delete_vm"])
    matcher = compile_matcher(cat)
    assert re.search(matcher, "mcp__anything__delete_vm")
    assert not re.search(matcher, "mcp__anything__list_vms")


def test_all_tools_matches_everything_but_read_only() -> None:
    """With all_tools, unknown servers and built-ins are guarded too."""
    matcher = compile_matcher(VSPHERE, all_tools=True)
    assert matcher == r"^(?!(?:mcp__vsphere__list_vms|mcp__vsphere__get_.*)$).*"
    assert re.search(matcher, "mcp__proxmox__stop_vm")
    assert re.search(matcher, "Bash")
    assert not re.search(matcher, "mcp__vsphere__get_vm")


def test_all_tools_without_read_only_matches_everything() -> None:
    """An empty read-only list with all_tools gives a match-all regex."""
    assert compile_matcher(catalog([], ["Bash"]), all_tools=True) == ".*"


def test_empty_catalog_is_refused() -> None:
    """A catalog naming nothing would never start the hook: ConfigError."""
    with pytest.raises(ConfigError, match="names no MCP server"):
        compile_matcher(catalog([], []))


def test_regex_metacharacters_are_escaped() -> None:
    """Dots, plus signs and brackets in names are literal."""
    cat = catalog(["mcp__a.b__x+y"], ["mcp__a.b__del(1)"])
    matcher = compile_matcher(cat)
    assert re.search(matcher, "mcp__a.b__del(1)")
    assert not re.search(matcher, "mcp__a.b__x+y")
    assert not re.search(matcher, "mcp__aXb__del(1)")


def test_matcher_is_never_an_exact_name_list() -> None:
    """Claude Code reads plain-word matchers as exact names; ours always has regex syntax."""
    matcher = compile_matcher(catalog([], ["Bash"]))
    assert matcher == "^Bash$"
    assert re.search(r"[^A-Za-z0-9_\- ,|]", matcher)


def test_covered_servers_in_catalog_order() -> None:
    """Servers come from read-only entries and tools, literal server parts only."""
    cat = catalog(["mcp__b__x", "mcp__*__y", "mcp__a?__z"], ["mcp__a__w", "Bash"])
    assert covered_servers(cat) == ["b", "a"]


def test_escape_and_glob_translation() -> None:
    """Only syntax characters are escaped; globs become ``.*`` and ``.``."""
    assert js_escape("a-b_c.d") == r"a-b_c\.d"
    assert glob_to_regex("get_?x*") == "get_.x.*"


# ------------------------------------------------------------------ properties

# A tiny alphabet makes collisions between names, prefixes and globs likely.
_PIECES = ["mcp__", "__", "_", "a", "b", "ab", ".", "*", "?", "x"]
_SERVERS = ["a", "b", "ab", "a.b"]
_SUFFIXES = ["get_*", "get_x", "list", "x", "*", "?et_x", "a*b", "get_and_reset", ""]


@st.composite
def entries(draw: st.DrawFn) -> str:
    """One catalog entry: mostly ``mcp__server__suffix``, sometimes free-form."""
    if draw(st.booleans()):
        server = draw(st.sampled_from([*_SERVERS, "*", "a*", "?", "a?"]))
        return f"mcp__{server}__{draw(st.sampled_from(_SUFFIXES))}"
    text = "".join(draw(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5)))
    return text or "Bash"


@st.composite
def catalogs(draw: st.DrawFn) -> CatalogSettings:
    """Catalogs with overlapping read-only and mutating entries (precedence matters)."""
    read_only = draw(st.lists(entries(), max_size=5, unique=True))
    tools = draw(st.lists(entries(), max_size=4, unique=True))
    if draw(st.booleans()):
        tools = [t for t in tools if t not in read_only]  # what config.py allows
    return catalog(read_only, tools)


def names_for(cat: CatalogSettings) -> st.SearchStrategy[str]:
    """Names likely to hit the catalog: entries with wildcards filled, plus noise."""
    filled = []
    for entry in (*cat.read_only, *cat.tools):
        filled += [entry, entry.replace("*", "").replace("?", "x")]
        filled += [entry.replace("*", "_zz").replace("?", "_"), entry + "x", entry[:-1]]
    noise = st.text(alphabet="mcp_abx.*?", max_size=16)
    server_names = st.builds(
        lambda s, t: f"mcp__{s}__{t}", st.sampled_from(_SERVERS), st.sampled_from(_SUFFIXES)
    )
    return st.one_of(st.sampled_from(filled or ["Bash"]), server_names, noise)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cat=catalogs())
def test_matcher_agrees_with_classify(data: st.DataObject, cat: CatalogSettings) -> None:
    """re.search(matcher, name) holds exactly when the name is covered and not read-only."""
    try:
        matcher = compile_matcher(cat)
    except ConfigError:
        assert not named_servers(cat)
        assert not cat.tools
        return
    for name in data.draw(st.lists(names_for(cat), min_size=1, max_size=20)):
        assert bool(re.search(matcher, name)) == should_match(cat, name), (matcher, name)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cat=catalogs())
def test_all_tools_matcher_agrees_with_classify(data: st.DataObject, cat: CatalogSettings) -> None:
    """With all_tools, the matcher holds exactly for names that are not read-only."""
    matcher = compile_matcher(cat, all_tools=True)
    for name in data.draw(st.lists(names_for(cat), min_size=1, max_size=20)):
        expected = should_match(cat, name, all_tools=True)
        assert bool(re.search(matcher, name)) == expected, (matcher, name)


# ------------------------------------------------------------------ JavaScript


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_regexp_test_agrees_with_python() -> None:
    """Node's RegExp.test gives the same answers as Python's re.search for our matchers."""
    cases = [
        (VSPHERE, False),
        (VSPHERE, True),
        (catalog(["mcp__vc__get_*", "mcp__vc__set_safe"], ["mcp__vc__*et_*", "Bash"]), False),
        (catalog(["mcp__*__list_*"], ["mcp__vsphere__get_and_reset", "mcp__*__del"]), False),
        (catalog(["mcp__a.b__x+y", "mcp__s__g?t"], ["mcp__a.b__del(1)"]), True),
    ]
    names = [
        "mcp__vsphere__get_vm", "mcp__vsphere__power_off_vm", "mcp__vsphere__list_vms",
        "mcp__vc__get_vm", "mcp__vc__set_safe", "mcp__vc__set_x", "Bash", "Bash2",
        "mcp__x__list_a", "mcp__x__del", "mcp__vsphere__get_and_reset", "mcp__a.b__x+y",
        "mcp__a.b__del(1)", "mcp__s__get", "mcp__s__gat", "mcp__s__gt", "Read",
    ]  # fmt: skip
    matchers = [compile_matcher(cat, all_tools=all_tools) for cat, all_tools in cases]
    script = (
        "const [ms, ns] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(ms.map(m => ns.map(n => new RegExp(m).test(n)))));"
    )
    out = subprocess.run(
        ["node", "-e", script],
        input=json.dumps([matchers, names]),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    js = json.loads(out.stdout)
    py = [[bool(re.search(m, n)) for n in names] for m in matchers]
    assert js == py


def test_a_host_paths_glob_starts_the_hook_for_read_only_names_it_matches() -> None:
    """A read-only name (exact, or a more specific glob) may still name a host path."""
    spec = ToolSpec("mcp__vc__*load*", (), None, decision="allow", host_paths=("save_to",))
    cat = CatalogSettings(
        ("mcp__vc__download", "mcp__vc__upload_*", "mcp__vc__list_*"),
        {spec.name: spec},
        None,
        "prompt",
        "default",
    )
    matcher = compile_matcher(cat)
    for name in ("mcp__vc__download", "mcp__vc__upload_iso", "mcp__vc__reload"):
        assert re.search(matcher, name), name
        assert classify(name, {"save_to": "/x"}, cat).host_paths == {"save_to": "/x"}
    assert not re.search(matcher, "mcp__vc__list_vms")
