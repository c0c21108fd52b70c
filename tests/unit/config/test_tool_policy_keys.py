"""The per-tool keys ``vpgs`` / ``decision`` (issue 13 §2) and ``catalog.from_annotations``."""

from __future__ import annotations

from typing import Any

import pytest

from zerto_rewind.config.parser import Parser
from zerto_rewind.errors import ConfigError

ZVM = {"url": "https://zvm", "client_id": "c", "client_secret_env": "S"}


def parse(**top: Any) -> Any:
    return Parser("c.json", ".").settings({"zvm": ZVM, **top}, {}, loose_permissions=False)


def test_vpgs_and_decision_parse() -> None:
    settings = parse(
        tools={
            "mcp__v__reboot_host": {"vpgs": ["Prod", "Prod", "DB"]},
            "mcp__v__create_vm": {"decision": "allow"},
            "mcp__v__power_off": {"vm_arg": "name", "decision": "deny"},
        }
    )
    tools = settings.catalog.tools
    assert tools["mcp__v__reboot_host"].vpgs == ("Prod", "DB")
    assert tools["mcp__v__create_vm"].decision == "allow"
    assert tools["mcp__v__power_off"].decision == "deny"


@pytest.mark.parametrize(
    ("spec", "key", "words"),
    [
        ({"vpgs": []}, "vpgs", "non-empty list"),
        ({"vpgs": "Prod"}, "vpgs", "non-empty list"),
        ({"decision": "maybe"}, "decision", "one of prompt, deny, allow"),
        ({"vm_arg": "name", "decision": "allow"}, "decision", "never allowed without a checkpoint"),
        ({"vpgs": ["Prod"], "decision": "prompt"}, "decision", "remove one of the two"),
    ],
)
def test_bad_tool_policy_is_a_config_error(spec: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(tools={"mcp__v__t": spec})
    assert f"tools.mcp__v__t.{key}" in str(caught.value)
    assert words in str(caught.value)


def test_catalog_from_annotations() -> None:
    assert parse().catalog.from_annotations is False
    assert parse(catalog={"from_annotations": True}).catalog.from_annotations is True
    with pytest.raises(ConfigError, match=r"catalog\.from_annotations"):
        parse(catalog={"from_annotations": "yes"})
    with pytest.raises(ConfigError, match=r"catalog\.other"):
        parse(catalog={"other": 1})


def test_host_paths_parse() -> None:
    """tools.NAME.host_paths: argument paths, duplicates dropped; allow may go with it."""
    settings = parse(
        tools={
            "mcp__v__download": {"host_paths": ["save_to", "save_to"], "decision": "allow"},
            "mcp__v__upload": {"vm_arg": "name", "host_paths": ["opts.local_path"]},
        }
    )
    tools = settings.catalog.tools
    assert tools["mcp__v__download"].host_paths == ("save_to",)
    assert tools["mcp__v__upload"].host_paths == ("opts.local_path",)
    assert parse(tools={"mcp__v__t": {}}).catalog.tools["mcp__v__t"].host_paths == ()


@pytest.mark.parametrize(
    ("value", "words"),
    [([], "non-empty list"), ("save_to", "non-empty list"), (["a..b"], "not a dotted path")],
)
def test_bad_host_paths_are_a_config_error(value: Any, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(tools={"mcp__v__t": {"host_paths": value}})
    assert "tools.mcp__v__t.host_paths" in str(caught.value)
    assert words in str(caught.value)


def test_a_read_only_tool_with_host_paths_is_refused() -> None:
    """A tool that names a file on the VM server's host is never read-only."""
    with pytest.raises(ConfigError) as caught:
        parse(
            read_only_tools=["mcp__v__download"],
            tools={"mcp__v__download": {"host_paths": ["save_to"]}},
        )
    assert "read_only_tools" in str(caught.value)
    assert "host_paths" in str(caught.value)
    assert "never read-only" in str(caught.value)
