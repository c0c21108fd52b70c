"""Which files the guard trusts and which hold credentials: the input of ``doctor --as-user``.

:func:`access_report` gathers them from what the doctor already read (the config,
the host settings files holding a hook, each hook's command) and hands them to
:func:`.access.access_checks`, judged for the user who runs the agent:

* guard files: the config, each settings file holding the hook (project, user,
  managed), the state directory, the decision log, the venv each hook command
  runs (its interpreter's prefix, and the ``zerto_rewind`` package in it), and the
  directory of a thin hook's service socket (whoever may replace the socket can
  answer in the service's place; connecting to it is what the socket is for);
* credentials: the ZVM secret file, the config itself when it holds an inline
  secret or an upstream's env/headers, the token cache (``state_dir/tokens``),
  and vCenter/ESXi/Proxmox credentials in MCP host configs the user can read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

from ...config.settings import Settings
from ...errors import ConfigError
from ...hostconfig.entries import is_gateway_entry, looks_like_vm_server
from ...hostconfig.files import read_host_config
from ...hostconfig.install.managed import config_credentials
from ...hostconfig.install.settings_file import handler_command, is_thin_hook
from ...hostconfig.specs import known_files
from .access import User, access_checks, access_of
from .check import Check
from .config import zvm_secret_files
from .hook import SettingsFile

__all__ = ["access_report", "user_env"]

_PROBE = "import sys, zerto_rewind; print(sys.prefix); print(zerto_rewind.__path__[0])"


def user_env(env: Mapping[str, str], user_home: str, name: str) -> dict[str, str]:
    """``env`` as the agent's user would have it for finding its own files (HOME, USER)."""
    return {**env, "HOME": user_home, "USER": name, "LOGNAME": name}


def access_report(
    user: User,
    *,
    settings: Settings | None,
    hosts: Sequence[SettingsFile],
    env: Mapping[str, str],
    project_dirs: Sequence[str] = (),
) -> list[Check]:
    """One check per guard file the user could change and per credential it could read."""
    guard: dict[str, str] = {}
    credentials: dict[str, str] = {}
    if settings is not None:
        guard["config"] = settings.path
        guard["state dir"] = settings.state_dir
        guard["decision log"] = settings.log_path
        credentials.update(zvm_secret_files(settings))
        held = config_credentials(settings)
        if held:
            credentials[f"config ({', '.join(held)})"] = settings.path
        credentials["token cache"] = os.path.join(settings.state_dir, "tokens")
    for host in hosts:
        if not host.hooks:
            continue
        guard[f"hook settings {host.path}"] = host.path
        for _entry, handler in host.hooks:
            try:
                command = handler_command(handler)
            except ValueError:
                continue
            if os.path.isabs(command.program):
                guard.update(_venv_files(command.program, user))
            if is_thin_hook(handler):
                service = command.service or ""
                if service.startswith("unix:"):
                    directory = os.path.dirname(service[5:])
                    guard[f"service socket directory ({service})"] = directory
    return access_checks(
        user,
        guard_files=guard,
        credentials=credentials,
        mcp_credentials=_mcp_credentials(env, project_dirs),
    )


def _venv_files(python: str, user: User) -> dict[str, str]:
    """The interpreter's prefix and the ``zerto_rewind`` package (its first writable file)."""
    try:
        done = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}  # the hook command check says why it cannot start
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        return {}
    prefix, package = lines
    return {f"venv {prefix}": prefix, "zerto_rewind package": _first_writable(package, user)}


def _first_writable(package: str, user: User) -> str:
    """The first file or directory under ``package`` the user may change, else ``package``."""
    for directory, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            st_write = access_of(path, user).write if not name.endswith(".pyc") else False
            if st_write:
                return path
    return package


def _mcp_credentials(
    env: Mapping[str, str], project_dirs: Sequence[str]
) -> list[tuple[str, str, list[str]]]:
    """(file, server, reasons) for each VM-server entry with credentials in a host config."""
    found = []
    for file in known_files(env, project_dirs):
        if not os.path.isfile(file.path):
            continue
        try:
            config = read_host_config(file)
        except ConfigError:
            continue  # unreadable here: the mcp servers check reports it
        for name, entry in config.servers.items():
            if is_gateway_entry(entry, name):
                continue
            reasons = looks_like_vm_server(entry, name)
            held = isinstance(entry, dict) and bool(entry.get("env") or entry.get("headers"))
            if reasons and held:
                found.append((file.path, name, reasons))
    return found
