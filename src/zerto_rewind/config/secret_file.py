"""Reading a secret from a file the config names: refused if others can read it."""

from __future__ import annotations

import os
import stat

from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["read_secret_file", "read_secret_source"]


def read_secret_file(path: str) -> str:
    """The stripped contents of ``path``; ConfigError if unreadable, empty, or readable
    by group or others."""
    try:
        with open(path, encoding="utf-8") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            value = fh.read().strip()
    except OSError as exc:
        msg = f"cannot read secret file {path}: {exc.strerror}"
        raise ConfigError(msg) from None
    if mode & 0o077:
        octal = f"{stat.S_IMODE(mode):04o}"
        msg = f"secret file {path} is readable by others (mode {octal}); run chmod 600 {path}"
        raise ConfigError(msg)
    if not value:
        msg = f"secret file {path} is empty"
        raise ConfigError(msg)
    return value


def read_secret_source(source: tuple[str, str], key: str, env: Mapping[str, str] | None) -> str:
    """The secret ``source`` names: ``("env", NAME)`` reads variable NAME of ``env`` (default
    the process's), ``("file", PATH)`` the file; ConfigError, naming config ``key``, if unset."""
    kind, value = source
    if kind != "env":
        return read_secret_file(value)
    found = (os.environ if env is None else env).get(value, "")
    if not found:
        msg = f"{key} names {value}, which is empty or unset"
        raise ConfigError(msg)
    return found
