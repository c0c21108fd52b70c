"""What the config's unit tests share: a minimal ZVM section, an environment, and loading
a written config (or the ConfigError it raises) with that environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.errors import ConfigError

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
ENV = {"HOME": "/home/op", "ZS": "from-env"}


def load(directory: Path, raw: Any, env: dict[str, str] | None = None, **kw: Any) -> Settings:
    """Write a config and load it with an explicit environment."""
    return load_settings({**ENV, **(env or {})}, path=str(write_config(directory, raw, **kw)))


def config_error(directory: Path, raw: Any, env: dict[str, str] | None = None) -> ConfigError:
    """The ConfigError loading ``raw`` raises."""
    with pytest.raises(ConfigError) as info:
        load(directory, raw, env)
    return info.value


# ----------------------------------------------------------------- the file itself
