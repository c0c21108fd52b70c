"""Read the config file and turn it into :class:`~.settings.Settings`.

Import-light like the rest of ``config``: the hook loads it on every call.
"""

from __future__ import annotations

import os

from .. import _fastjson
from ..errors import ConfigError
from .parser import Parser
from .settings import Settings, config_path, validate_patterns

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["load_config", "load_settings"]


def load_settings(env: Mapping[str, str] | None = None, *, path: str | None = None) -> Settings:
    """Read, validate and return the settings; ConfigError names file, key and problem."""
    env = os.environ if env is None else env
    path = path or config_path(env)
    raw, mode = _read_config_file(path, env)
    parser = Parser(path, os.path.dirname(path))
    return parser.settings(raw, env, loose_permissions=bool(mode & 0o077))


def load_config(env: Mapping[str, str]) -> Settings:
    """Load and fully validate the config the hook will use; ConfigError if it is broken."""
    settings = load_settings(env)
    validate_patterns(settings)
    return settings


def _read_config_file(path: str, env: Mapping[str, str]) -> tuple[Any, int]:
    hint = "" if env.get("ZERTO_REWIND_CONFIG") else " (ZERTO_REWIND_CONFIG is not set)"
    try:
        with open(path, "rb") as fh:
            data = fh.read()
            mode = os.fstat(fh.fileno()).st_mode
    except FileNotFoundError:
        msg = f"config file not found{hint}; create it or point ZERTO_REWIND_CONFIG at it"
        raise ConfigError(msg, path=path) from None
    except OSError as exc:
        msg = f"cannot read the config file: {exc.strerror}"
        raise ConfigError(msg, path=path) from None
    try:
        return _fastjson.loads(data), mode
    except ValueError as exc:
        msg = f"not valid JSON: {exc}"
        raise ConfigError(msg, path=path) from None
