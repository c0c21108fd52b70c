"""The key tables of config/schema.py: documented, read into their settings, and the
only keys the parser accepts."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.config import schema
from zerto_rewind.config.catalog_settings import CatalogSettings, ResolverSpec
from zerto_rewind.config.parser import Parser
from zerto_rewind.config.schema import SECTIONS, Key, Section
from zerto_rewind.config.sections import (
    ApprovalsSettings,
    GatewaySettings,
    GuardSettings,
    LimitsSettings,
    LogAnchorSettings,
    StateRedisSettings,
    UpstreamSettings,
)
from zerto_rewind.config.settings import ZvmSettings
from zerto_rewind.errors import ConfigError

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
ZVM = {"url": "https://zvm.example.com", "client_id": "c", "client_secret_env": "S"}
BAD = "zz_no_such_key"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def doc_sections(text: str) -> dict[str, str]:
    """anchor -> the text under that heading, down to the next heading of its level or
    above, without fenced examples (a key must be documented, not only shown)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    heads = [
        (m.start(), len(m.group(1)), m.group(2)) for m in re.finditer(r"^(#+) (.*)$", text, re.M)
    ]
    found: dict[str, str] = {}
    for i, (start, level, title) in enumerate(heads):
        end = next((s for s, lv, _ in heads[i + 1 :] if lv <= level), len(text))
        found[github_anchor(title)] = text[start:end]
    return found


def documented_words(section_text: str) -> set[str]:
    """Each word (letters, digits, _) inside an inline code span of the text."""
    spans = re.findall(r"`([^`\n]+)`", section_text)
    return {word for span in spans for word in re.findall(r"\w+", span)}


ROWS = [pytest.param(s, k, id=f"{s.where}:{k.name}") for s in SECTIONS for k in s.keys]


@pytest.mark.parametrize(("section", "key"), ROWS)
def test_every_key_is_documented_under_its_heading(section: Section, key: Key) -> None:
    """docs/configuration.md names each key in code under the heading its table gives."""
    sections = doc_sections(DOC.read_text(encoding="utf-8"))
    assert section.doc in sections, f"{section.where}: no heading #{section.doc} in {DOC.name}"
    words = documented_words(sections[section.doc])
    assert key.name in words, (
        f"{section.where}.{key.name} is not documented under #{section.doc} of {DOC.name}"
    )


def test_the_docs_check_catches_a_missing_key() -> None:
    """A key absent from its heading's text fails the check (else the test proves nothing)."""
    sections = doc_sections("# Top\n\n## `guard`\n\n| `timeout_s` | 150 |\n\n## Other\n`x`\n")
    assert "timeout_s" in documented_words(sections["guard"])
    assert "x" not in documented_words(sections["guard"])
    assert "x" in documented_words(sections["top"])


def test_every_table_is_listed_in_sections() -> None:
    """Each Section of the module is in SECTIONS, so the docs check sees it."""
    tables = [v for v in vars(schema).values() if isinstance(v, Section)]
    assert {id(t) for t in tables} == {id(s) for s in SECTIONS}


# The settings each table's rules feed (a rule's key is a keyword of the constructor).
READ_INTO: dict[str, Any] = {
    "guard": GuardSettings,
    "gateway": GatewaySettings,
    "gateway.limits": LimitsSettings,
    "approvals": ApprovalsSettings,
    "log_anchor": LogAnchorSettings,
    "upstreams.NAME": UpstreamSettings,
    "catalog": CatalogSettings,
    "catalog.resolvers.SERVER": ResolverSpec,
    "zvm, zvms.SITE": ZvmSettings,
    "state": StateRedisSettings,
}
# Keys whose rule checks a value the section's own function then maps or drops.
MAPPED = {
    "zvm, zvms.SITE": {"allow_insecure_http"},
    "recovery": {"allow_live", "via"},
    "approvals.approvers": {"users", "groups"},
    "approvals.notify": {"secret_env", "secret_file", "timeout_s"},
    "state": {"url", "password_env", "password_file", "allow_unauthenticated_redis"},
}


@pytest.mark.parametrize("section", SECTIONS, ids=[s.where for s in SECTIONS])
def test_each_rule_reads_into_a_field_of_its_settings(section: Section) -> None:
    """A key read by its rule is passed as the keyword of the same name."""
    ruled = {k.name for k in section.keys if k.rule is not None} - MAPPED.get(section.where, set())
    if not ruled:
        return
    target = READ_INTO[section.where]
    fields = set(getattr(target, "__fields__", None) or inspect.signature(target).parameters)
    assert ruled <= fields, f"{section.where}: {sorted(ruled - fields)} are no fields"


def _placed(where: str, bad: dict[str, Any]) -> dict[str, Any]:
    """A valid config with ``bad`` merged into the object at ``where``."""
    tool: dict[str, Any] = {"vm_arg": "name"}
    resolver = {"tool": "get", "arg": "name", "id_path": "id"}
    base: dict[str, Any] = {"zvm": dict(ZVM)}
    nested: dict[str, Any] = {
        "(top level)": base,
        "zvm, zvms.SITE": base["zvm"],
        "catalog": base.setdefault("catalog", {}),
        "tools.NAME": base.setdefault("tools", {}).setdefault("mcp__v__x", tool),
        "vm_map, tools.NAME.vm_map": base.setdefault("vm_map", {}),
        "catalog.resolvers.SERVER": base["catalog"].setdefault("resolvers", {"v": resolver})["v"],
        "upstreams.NAME": base.setdefault("upstreams", {"v": {"url": "https://u"}})["v"],
        "state": base.setdefault("state", {}),
        "gateway": base.setdefault("gateway", {}),
        "approvals": base.setdefault("approvals", {}),
    }
    base["gateway"]["limits"] = {}
    base["approvals"]["approvers"] = {}
    base["approvals"]["notify"] = {"url": "https://n", "secret_env": "N"}
    nested["gateway.limits"] = base["gateway"]["limits"]
    nested["approvals.approvers"] = base["approvals"]["approvers"]
    nested["approvals.notify"] = base["approvals"]["notify"]
    for name in ("guard", "recovery", "log_anchor"):
        nested[name] = base.setdefault(name, {})
    if where == "tools.NAME.vm_arg":
        tool["vm_arg"] = {"path": "name", **bad}
    else:
        nested[where].update(bad)
    return base


@pytest.mark.parametrize("section", SECTIONS, ids=[s.where for s in SECTIONS])
def test_the_parser_knows_exactly_the_tables_keys(section: Section, tmp_path: Path) -> None:
    """An unknown key in each section is refused, listing exactly that table's keys."""
    raw = _placed(section.where, {BAD: 1})
    parser = Parser(str(tmp_path / "config.json"), str(tmp_path))
    with pytest.raises(ConfigError) as info:
        parser.settings(raw, {"S": "x", "N": "y"}, loose_permissions=False)
    assert info.value.key is not None
    assert info.value.key.endswith(BAD)
    assert info.value.detail == f"unknown key (known keys: {', '.join(section.names)})"


@pytest.mark.parametrize(
    ("where", "bad", "key", "problem"),
    [
        ("gateway", {"max_connections": 1.5}, "gateway.max_connections", "whole number, not 1.5"),
        ("gateway", {"max_connections": 0}, "gateway.max_connections", "at least 1"),
        ("gateway", {"max_body_bytes": 1000}, "gateway.max_body_bytes", "at least 1024"),
        ("gateway", {"clients": {"a": "xyz"}}, "gateway.clients.a", "SHA-256 hex digest"),
        ("gateway.limits", {"idle_s": 90000}, "gateway.limits.idle_s", "86400 seconds (a day)"),
        ("log_anchor", {"every_lines": 0}, "log_anchor.every_lines", "from 1 to 1000000, not 0"),
        ("guard", {"max_tags_per_minute": 0}, "guard.max_tags_per_minute", "or null for no"),
        ("recovery", {"via": "dr"}, "recovery.via", "one of recovery, protected, not 'dr'"),
    ],
)
def test_a_rule_names_the_key_and_what_is_wrong(
    where: str, bad: dict[str, Any], key: str, problem: str, tmp_path: Path
) -> None:
    """A value its rule refuses fails closed: the dotted key and the problem, in words."""
    parser = Parser(str(tmp_path / "config.json"), str(tmp_path))
    with pytest.raises(ConfigError) as info:
        parser.settings(_placed(where, bad), {"S": "x", "N": "y"}, loose_permissions=False)
    assert info.value.key == key
    assert problem in info.value.detail


def test_a_whole_count_given_as_a_float_is_read_as_an_int(tmp_path: Path) -> None:
    """``5.0`` is five connections, held as the int 5."""
    parser = Parser(str(tmp_path / "config.json"), str(tmp_path))
    raw = _placed("gateway", {"max_connections": 5.0, "max_body_bytes": 1024})
    gateway = parser.settings(raw, {"S": "x", "N": "y"}, loose_permissions=False).gateway
    assert (gateway.max_connections, gateway.max_body_bytes) == (5, 1024)
    assert isinstance(gateway.max_connections, int)


def test_a_hooks_config_does_not_import_the_gateways_parser(tmp_path: Path) -> None:
    """A config without upstreams, gateway, state or approvals never loads parse_gateway
    (the hook parses its config on every call); one with a gateway section does."""
    import json
    import subprocess
    import sys

    hook = tmp_path / "hook.json"
    hook.write_text(json.dumps({"zvm": ZVM, "guard": {"timeout_s": 20}}))
    gateway = tmp_path / "gateway.json"
    gateway.write_text(json.dumps({"zvm": ZVM, "gateway": {"max_connections": 9}}))
    code = (
        "import sys; from zerto_rewind.config.loader import load_settings; "
        "s = load_settings({'S': 'x'}, path=sys.argv[1]); "
        "print(s.gateway.max_connections, 'zerto_rewind.config.parse_gateway' in sys.modules)"
    )
    for path, expected in ((hook, "4096 False"), (gateway, "9 True")):
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected
