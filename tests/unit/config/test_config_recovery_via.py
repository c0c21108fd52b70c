"""``recovery.via``: which site's ZVM runs a recovery operation (several ZVMs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.errors import ConfigError

ZVMS = {
    "hq": {"url": "https://127.0.0.1:9", "username": "u", "password_env": "ZPW"},
    "dr": {"url": "https://127.0.0.2:9", "username": "u", "password_env": "ZPW"},
}


def load(tmp_path: Path, recovery: dict[str, object]) -> Settings:
    path = write_config(tmp_path, {"zvms": ZVMS, "recovery": recovery})
    return load_settings({"HOME": str(tmp_path), "ZPW": "x"}, path=str(path))


def test_the_recovery_site_is_the_default(tmp_path: Path) -> None:
    assert load(tmp_path, {}).recovery_via == "recovery"


def test_protected_is_accepted(tmp_path: Path) -> None:
    assert load(tmp_path, {"via": "protected"}).recovery_via == "protected"


def test_anything_else_is_a_config_error_naming_the_key_and_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, {"via": "any"})
    assert "recovery.via" in str(caught.value)
    assert "recovery, protected" in str(caught.value)
