"""The managed install's files: Claude Code's policy file and a root-owned config.

``install claude-code --managed`` puts the hook where the agent's user cannot
change it: Claude Code's managed settings (``/etc/claude-code/managed-settings.json``
on Linux; users and projects cannot override it) and the guard's config under
``/etc/zerto-rewind/``, both owned by root. Everything here is done as root;
:func:`require_root` says why otherwise. ``root`` (``--root DIR``) is the
filesystem root the paths are taken under: ``/`` on a real machine, a
temporary directory in tests or when building an image.
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from typing import Any

from ...config.settings import Settings
from ...errors import ConfigError, StateError
from ...fsaccess import group_name_of, user_name_of
from ...fsutil import atomic_write_text, backup_name, read_if_present

__all__ = [
    "CONFIG_DIR",
    "PlacedConfig",
    "config_credentials",
    "managed_config_path",
    "place_config",
    "require_root",
    "secure_root_file",
    "service_owner",
    "with_policy",
]

CONFIG_DIR = "/etc/zerto-rewind"
CONFIG_NAME = "config.json"


def require_root() -> str | None:
    """Why the managed install cannot run (not root), or None."""
    if os.geteuid() == 0:
        return None
    return (
        "--managed must run as root: the managed settings and the guard's config must "
        "belong to root, so that the agents' users (who run Claude Code and its hooks) "
        "cannot change them. A file the agent's user can write, the agent can rewrite. "
        "Run it again with sudo."
    )


def managed_config_path(root: str = "/") -> str:
    """``/etc/zerto-rewind/config.json`` under ``root``."""
    return os.path.join(root, CONFIG_DIR.lstrip("/"), CONFIG_NAME)


def config_credentials(settings: Settings) -> list[str]:
    """What in the config itself is a credential (inline ZVM secret of any site, upstream env
    or headers)."""
    found = []
    inline = [s for s, z in settings.zvms.items() if z.secret_kind == "inline"]  # noqa: S105
    if inline and len(settings.zvms) == 1:
        found.append("an inline ZVM secret")
    elif inline:
        found.append(f"inline ZVM secrets of site {', '.join(inline)}")
    for name, upstream in settings.upstreams.items():
        if upstream.env or upstream.headers:
            found.append(f"upstream {name}'s env/headers")
    return found


@dataclass(frozen=True)
class PlacedConfig:
    """Where the config went, with which owner and mode, and the backup of what it replaced."""

    path: str
    owner: str
    mode: int
    backup: str | None
    changed: bool


def place_config(
    source: str,
    dest: str,
    *,
    uid: int = 0,
    gid: int = 0,
    mode: int = 0o600,
    dry_run: bool = False,
) -> PlacedConfig:
    """Copy ``source`` to ``dest`` (owner uid:gid, ``mode``); back up a different old ``dest``.

    The directory is made root's and 0755; the file is written atomically with its
    final mode, then given to its owner. The backup keeps the old file beside it, 0600 root.
    """
    try:
        with open(source, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        msg = f"cannot read it: {exc.strerror or exc}"
        raise ConfigError(msg, path=source) from None
    owner = f"{user_name_of(uid)}:{group_name_of(gid)}"
    old = _read_bytes(dest)
    changed = old != data or _owner_mode(dest) != (uid, gid, mode)
    if dry_run or not changed:
        return PlacedConfig(dest, owner, mode, None, changed)
    directory = os.path.dirname(dest)
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        secure_root_file(directory, 0o755)
        backup = None
        if old is not None and old != data:
            backup = backup_name(dest)
            with open(dest, "rb") as fh, open(_create(backup, 0o600), "wb") as out:
                shutil.copyfileobj(fh, out)
        atomic_write_text(dest, data.decode("utf-8"), mode=mode)
        os.chown(dest, uid, gid)
        os.chmod(dest, mode)
    except (OSError, StateError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        msg = f"cannot write it: {reason}"
        raise ConfigError(msg, path=dest) from None
    return PlacedConfig(dest, owner, mode, backup, True)


def secure_root_file(path: str, mode: int) -> None:
    """Make ``path`` root's with ``mode`` (the managed settings 0644, their directory 0755)."""
    os.chown(path, 0, 0)
    os.chmod(path, mode)


def service_owner(user: str, settings: Settings) -> tuple[int, int, int, str]:
    """(uid, gid, mode, why) for the service's config when the service runs as ``user``.

    Root owns it and the service's group may read it (0640), so the service cannot
    change its own policy either; a config holding credentials must be 0600 (the
    parser refuses a group-readable one), so the service's user owns it then.
    """
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        msg = f"--service-user {user}: no such user"
        raise ConfigError(msg) from None
    held = config_credentials(settings)
    if held:
        why = (
            f"owned by {user}, 0600: it holds {', '.join(held)}, and the parser refuses a "
            "group-readable config with credentials"
        )
        return entry.pw_uid, entry.pw_gid, 0o600, why
    why = f"root's, readable by group {group_name_of(entry.pw_gid)} (0640): the service reads it"
    return 0, entry.pw_gid, 0o640, why


def _create(path: str, mode: int) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    os.close(fd)
    return path


def _read_bytes(path: str) -> bytes | None:
    try:
        return read_if_present(path, fix="a managed install runs as root")
    except StateError as exc:
        raise ConfigError(str(exc)) from None


def _owner_mode(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_uid, st.st_gid, st.st_mode & 0o7777


def with_policy(settings: dict[str, Any], *, managed_hooks_only: bool) -> dict[str, Any]:
    """``settings`` with ``allowManagedHooksOnly: true`` when asked (managed settings only)."""
    if not managed_hooks_only:
        return settings
    return {**settings, "allowManagedHooksOnly": True}
