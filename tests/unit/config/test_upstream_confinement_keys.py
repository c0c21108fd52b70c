"""``upstreams.NAME.user`` / ``group`` / ``workdir``: a stdio server's identity and directory."""

from __future__ import annotations

from typing import Any

import pytest

from zerto_rewind.config.parser import Parser
from zerto_rewind.errors import ConfigError

ZVM = {"url": "https://zvm", "client_id": "c", "client_secret_env": "S"}


def parse(**upstream: Any) -> Any:
    raw = {"zvm": ZVM, "upstreams": {"vsphere": upstream}}
    return Parser("/etc/zr/c.json", "/etc/zr").settings(raw, {}, loose_permissions=False)


def test_user_group_and_workdir_parse() -> None:
    spec = parse(command=["srv"], user="zr-vsphere", group="998", workdir="vsphere-home")
    up = spec.upstreams["vsphere"]
    assert (up.user, up.group, up.workdir) == ("zr-vsphere", "998", "/etc/zr/vsphere-home")
    bare = parse(command=["srv"]).upstreams["vsphere"]
    assert (bare.user, bare.group, bare.workdir) == (None, None, None)


@pytest.mark.parametrize(
    ("spec", "key", "words"),
    [
        ({"command": ["srv"], "user": ""}, "user", "non-empty string"),
        ({"command": ["srv"], "user": 0}, "user", "non-empty string"),
        ({"command": ["srv"], "user": "a:b"}, "user", "a user name or a numeric id"),
        ({"command": ["srv"], "group": "g"}, "group", "give user as well"),
        ({"url": "https://vm-mcp", "user": "zr"}, "user", "stdio server (command) only"),
        ({"command": ["srv"], "workdir": 5}, "workdir", "non-empty string"),
    ],
)
def test_bad_values_name_the_key(spec: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(**spec)
    assert f"upstreams.vsphere.{key}" in str(caught.value)
    assert words in str(caught.value)
