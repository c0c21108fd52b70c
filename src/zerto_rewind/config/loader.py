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

__all__ = ["ConfigChanged", "file_sha256", "load_config", "load_settings", "sha256_hex"]


class ConfigChanged(ConfigError):
    """The config's bytes no longer match the SHA-256 pinned at install (or cannot be read).

    A ConfigError, so every caller that denies on a broken config denies on this too;
    the hook tells it apart to say what happened to the human who approves.
    """


def load_settings(
    env: Mapping[str, str] | None = None, *, path: str | None = None, pin: str | None = None
) -> Settings:
    """Read, validate and return the settings; ConfigError names file, key and problem.

    ``pin`` is the SHA-256 (hex) the config had when the hook was installed: the very
    bytes parsed here are compared with it first, and ConfigChanged is raised when they
    differ or the file cannot be read, before anything in the file is trusted.
    """
    env = os.environ if env is None else env
    path = path or config_path(env)
    if pin is not None:
        try:
            with open(path, "rb") as fh:
                data, mode = fh.read(), os.fstat(fh.fileno()).st_mode
        except OSError as exc:
            msg = f"the pinned config cannot be read ({exc.strerror or exc})"
            raise ConfigChanged(msg, path=path) from None
        if sha256_hex(data) != pin.lower():
            msg = "its SHA-256 no longer matches the one pinned in the hook command at install"
            raise ConfigChanged(msg, path=path)
        raw = _parse_config(path, data)
    else:
        raw, mode = _read_config_file(path, env)
    parser = Parser(path, os.path.dirname(path))
    return parser.settings(raw, env, loose_permissions=bool(mode & 0o077))


def load_config(env: Mapping[str, str]) -> Settings:
    """Load and fully validate the config the hook will use; ConfigError if it is broken."""
    settings = load_settings(env)
    validate_patterns(settings)
    return settings


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` as hex, through the small built-in module (``hashlib`` costs more
    to import, and the hook checks the pin on every call)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
    except ImportError:  # pragma: no cover - other interpreters
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # 3.12+
        except ImportError:
            from hashlib import sha256
    digest: str = sha256(data).hexdigest()
    return digest


def file_sha256(path: str) -> str:
    """SHA-256 (hex) of the file at ``path``; OSError if it cannot be read."""
    with open(path, "rb") as fh:
        return sha256_hex(fh.read())


def _read_config_file(path: str, env: Mapping[str, str]) -> tuple[Any, int]:
    data, mode = _read_config_bytes(path, env)
    return _parse_config(path, data), mode


def _read_config_bytes(path: str, env: Mapping[str, str]) -> tuple[bytes, int]:
    hint = "" if env.get("ZERTO_REWIND_CONFIG") else " (ZERTO_REWIND_CONFIG is not set)"
    try:
        with open(path, "rb") as fh:
            data = fh.read()
            mode = os.fstat(fh.fileno()).st_mode
    except FileNotFoundError:
        msg = (
            f"config file not found{hint}; an operator can create it, or name it with "
            "ZERTO_REWIND_CONFIG"
        )
        raise ConfigError(msg, path=path) from None
    except OSError as exc:
        msg = f"cannot read the config file: {exc.strerror}"
        raise ConfigError(msg, path=path) from None
    return data, mode


def _parse_config(path: str, data: bytes) -> Any:
    try:
        return _fastjson.loads(data)
    except ValueError as exc:
        msg = f"not valid JSON: {exc}"
        raise ConfigError(msg, path=path) from None
