"""The keys of pinned tools, upstream logs and the tag bound: parsed, or refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.errors import ConfigError

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
ENV = {"HOME": "/home/op", "ZS": "from-env"}
PIN = "sha256:" + "ab" * 32


def load(directory: Path, **raw: Any) -> Settings:
    return load_settings(ENV, path=str(write_config(directory, {"zvm": ZVM, **raw})))


def test_pins_logs_and_the_tag_bound_load(tmp_path: Path) -> None:
    """catalog.pins, upstreams.NAME.log (relative to the config) and the bound's default."""
    settings = load(
        tmp_path,
        catalog={"pins": {"mcp__vsphere__power_off": PIN}},
        upstreams={"vsphere": {"command": ["mcvsphere"], "log": "logs/vsphere.log"}},
    )
    assert settings.catalog.pins == {"mcp__vsphere__power_off": PIN}
    assert settings.upstreams["vsphere"].log_path == str(tmp_path / "logs" / "vsphere.log")
    assert settings.guard.max_tags_per_minute == 6
    assert load(tmp_path, guard={"max_tags_per_minute": None}).guard.max_tags_per_minute is None
    assert load(tmp_path, guard={"max_tags_per_minute": 20}).guard.max_tags_per_minute == 20


@pytest.mark.parametrize(
    ("raw", "key", "words"),
    [
        ({"catalog": {"pins": []}}, "catalog.pins", "JSON object of strings"),
        ({"catalog": {"pins": {"power_off": PIN}}}, "catalog.pins.power_off", "mcp__SERVER__TOOL"),
        ({"catalog": {"pins": {"mcp__v__*": PIN}}}, "catalog.pins.mcp__v__*", "no patterns"),
        ({"catalog": {"pins": {"mcp__v__t": "ab" * 32}}}, "catalog.pins.mcp__v__t", "sha256:"),
        ({"catalog": {"pins": {"mcp__v__t": "sha256:xyz"}}}, "catalog.pins.mcp__v__t", "64 hex"),
        ({"upstreams": {"v": {"url": "https://127.0.0.1:9/mcp", "log": "x"}}}, "upstreams.v.log",
         "stdio server"),
        ({"guard": {"max_tags_per_minute": 0}}, "guard.max_tags_per_minute", "null for no bound"),
    ],
)  # fmt: skip
def test_bad_values_name_the_key(tmp_path: Path, raw: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, **raw)
    assert info.value.key == key
    assert words in str(info.value)
