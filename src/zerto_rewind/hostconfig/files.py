"""Reading and writing host config files and the gateway config (atomic, with backups).

:func:`read_host_config` reads one host file (JSON, JSONC or TOML);
:func:`render_host_config` gives the text to write back, and
:func:`write_host_config` / :func:`write_gateway_config` replace a file
atomically after backing it up. Messages name files and keys, never a value.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, StateError, UsageError
from ..fsutil import atomic_write_text, backup_name, ensure_private_dir
from .formats import edit_json_servers, parse_jsonc, render_toml
from .objectfile import read_object_file
from .specs import HostFile

__all__ = [
    "GatewayFile",
    "HostConfig",
    "locate_server",
    "read_gateway_config",
    "read_host_config",
    "render_host_config",
    "render_host_text",
    "replace_with_backup",
    "servers_of",
    "write_gateway_config",
    "write_host_config",
    "writing",
]


@dataclass(frozen=True)
class HostConfig:
    """A host config file's parsed data, with the text it was read from (None: no file)."""

    file: HostFile
    data: dict[str, Any]
    text: str | None
    had_comments: bool = False

    @property
    def servers(self) -> dict[str, Any]:
        """The servers object in scope (``{}`` when there is none)."""
        return servers_of(self.data, self.file)


def servers_of(data: Mapping[str, Any], file: HostFile) -> dict[str, Any]:
    node: Any = data
    for key in (*file.scope, file.host.servers_key):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def read_host_config(file: HostFile) -> HostConfig:
    """Read ``file``; ``{}`` when absent. ConfigError (naming the file, never its content).

    JSON files may hold comments and trailing commas (VS Code's ``mcp.json`` is
    JSONC, Gemini's ``settings.json`` may be); they are read, and ``had_comments``
    says so (a rewrite keeps them when it can edit in place).
    """
    read = read_object_file(file.path, "toml" if file.host.toml else "jsonc")
    return HostConfig(file, read.data, read.text, read.had_comments)


def render_host_config(config: HostConfig) -> str:
    """The text to write for ``config`` (see :func:`render_host_text`)."""
    return render_host_text(config)[0]


def render_host_text(config: HostConfig) -> tuple[str, bool]:
    """The text to write for ``config``, and whether every byte but the changed servers is kept.

    Both formats edit the original text: only the server entries that changed
    are rewritten, every other line (comments, other keys) is kept, and the
    result is parsed back and must equal ``data``. A JSON file the in-place
    editor cannot handle is written whole (indent 2, final newline), and the
    second value is False then: its comments, if any, are gone.
    """
    if not config.file.host.toml:
        if config.text is not None and config.text.strip():
            host = config.file.host
            edited = edit_json_servers(
                config.text, config.file.scope, host.servers_key, config.servers
            )
            if edited is not None and _parse_json(edited) == config.data:
                return edited, True
        return json.dumps(config.data, indent=2, ensure_ascii=False) + "\n", config.text is None
    text = render_toml(config.text or "", config.data, config.file.path)
    try:
        check = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"rewriting it would give invalid TOML ({exc}); nothing was written"
        raise ConfigError(msg, path=config.file.path) from None
    if check != config.data:
        msg = "could not rewrite it without changing other settings; nothing was written"
        raise ConfigError(msg, path=config.file.path)
    return text, True


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        try:
            return parse_jsonc(text)
        except ValueError:
            return None


@dataclass(frozen=True)
class GatewayFile:
    """The gateway config: its path, parsed JSON and original text."""

    path: str
    data: dict[str, Any]
    text: str


def read_gateway_config(path: str) -> GatewayFile:
    """Read the gateway config; ConfigError when missing, not JSON, or open to others.

    It is about to hold VM credentials, so a file (or a directory) that others
    may read or write is refused, not fixed behind the operator's back.
    """
    path = os.path.abspath(os.path.expanduser(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        msg = (
            "not found: create the gateway's config (with its zvm section) first, "
            "then move servers into it; see docs/gateway.md"
        )
        raise ConfigError(msg, path=path) from None
    except OSError as exc:
        msg = f"cannot read it ({exc.strerror})"
        raise ConfigError(msg, path=path) from None
    if st.st_mode & 0o077:
        msg = (
            f"is readable or writable by others (mode {stat.S_IMODE(st.st_mode):04o}) and would "
            "hold the VM server's credentials: chmod 600 it, then run this again"
        )
        raise ConfigError(msg, path=path)
    parent = os.stat(os.path.dirname(path))
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        msg = (
            f"its directory is writable by others (mode {stat.S_IMODE(parent.st_mode):04o}), "
            "who could replace it: chmod go-w the directory, then run this again"
        )
        raise ConfigError(msg, path=path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        msg = f"cannot read it ({reason})"
        raise ConfigError(msg, path=path) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        msg = f"not valid JSON ({exc.args[0] if exc.args else 'parse error'})"
        raise ConfigError(msg, path=path) from None
    if not isinstance(data, dict):
        msg = "must hold a JSON object"
        raise ConfigError(msg, path=path)
    return GatewayFile(path, data, text)


def write_gateway_config(gateway: GatewayFile, data: Mapping[str, Any]) -> str:
    """Back up the gateway config (0600, beside it) and replace it atomically (0600)."""
    backup = backup_name(gateway.path)
    try:
        atomic_write_text(backup, gateway.text, mode=0o600)
        atomic_write_text(gateway.path, json.dumps(data, indent=2) + "\n", mode=0o600)
    except StateError as exc:
        raise ConfigError(str(exc)) from None
    return backup


def write_host_config(
    config: HostConfig, text: str, *, backup_dir: str, private: bool = False
) -> str | None:
    """Replace the host file atomically, keeping its mode and owner; returns the backup's path.

    ``private`` (the file now holds a bearer token) takes group and others'
    access away. Run by root on an agent user's file, the new file stays that
    user's: the host runs as them and must still read it.

    The old file held the credentials that just moved, so its backup goes to
    ``backup_dir`` (made 0700, the backup 0600), beside the gateway config,
    not beside the host file where the agent (or a ``git add``) would find it.
    """
    path = config.file.path
    backup = None
    owner = None
    with writing(path):
        mode = 0o600
        if config.text is not None:
            info = os.stat(path)
            mode = stat.S_IMODE(info.st_mode)
            if os.geteuid() == 0:
                owner = (info.st_uid, info.st_gid)
            ensure_private_dir(backup_dir)
            name = f"{config.file.host.name}-{os.path.basename(path).lstrip('.')}"
            backup = backup_name(os.path.join(backup_dir, name))
            atomic_write_text(backup, config.text, mode=0o600)
        if private:
            mode &= 0o700
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(path, text, mode=mode, owner=owner)
    return backup


def replace_with_backup(path: str, text: str, *, original: str | None) -> str | None:
    """Back ``original`` (the file as it was; None: there was none) up beside ``path``, then
    replace ``path`` atomically, keeping its mode (0644 when new); returns the backup's path."""
    backup = None
    with writing(path):
        mode = 0o644
        if original is not None:
            mode = stat.S_IMODE(os.stat(path).st_mode)
            backup = backup_name(path)
            atomic_write_text(backup, original, mode=mode)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(path, text, mode=mode)
    return backup


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """A failed write of the host file ``path`` as the one ConfigError every install shows."""
    try:
        yield
    except OSError as exc:
        msg = f"cannot write it: {exc.strerror or exc}"
        raise ConfigError(msg, path=path) from None
    except StateError as exc:
        raise ConfigError(str(exc)) from None


def locate_server(candidates: Sequence[HostFile], server: str) -> HostConfig:
    """The first candidate file that holds ``server``; UsageError lists what each holds."""
    seen: list[str] = []
    for file in candidates:
        config = read_host_config(file)
        if server in config.servers:
            return config
        names = ", ".join(sorted(config.servers)) or "none"
        state = "absent" if config.text is None else f"servers: {names}"
        seen.append(f"{file.where} ({state})")
    msg = f"no MCP server named {server!r} in " + "; ".join(seen)
    raise UsageError(msg)
