"""Agent hosts and where each keeps its MCP servers: the specs and their default paths.

Every MCP host keeps its servers in its own file and format (:data:`HOSTS`).
A :class:`HostSpec` says where and how; :func:`user_files`,
:func:`candidate_files` and :func:`known_files` say which files to read.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..config.settings import home_dir
from ..errors import UsageError

__all__ = [
    "BASES",
    "HOSTS",
    "HostFile",
    "HostSpec",
    "HttpStyle",
    "candidate_files",
    "default_paths",
    "known_files",
    "user_files",
]

HttpStyle = Literal["typed", "plain", "codex", "gemini"]


@dataclass(frozen=True)
class HostSpec:
    """One MCP host: where its server config lives and how an entry is written.

    ``stdio_type`` is the ``type`` a stdio entry carries (``"stdio"``; Copilot
    says ``"local"``), or None when stdio entries have no type. ``http`` is how
    an HTTP entry looks: ``typed`` (``type: http``, ``url``, ``headers``),
    ``plain`` (``url``, ``headers``), ``codex`` (``url``, ``http_headers``),
    ``gemini`` (``httpUrl``, ``headers``: Gemini's ``url`` is SSE), or None when
    the file holds stdio servers only. ``entry_defaults`` are keys a gateway
    entry gets when the old entry had none (Copilot's ``tools: ["*"]``);
    ``entry_forced`` are keys it always gets (Codex's ``required = true``).
    ``user_paths`` are the user-level files, each ``BASE/relative/path`` with
    BASE one of :data:`BASES`; the first that applies to the platform is where
    ``--user`` writes. Adding a host is adding one entry to :data:`HOSTS`.
    """

    name: str
    label: str
    servers_key: str
    project_file: str | None
    toml: bool = False
    stdio_type: str | None = None
    http: HttpStyle | None = None
    notes: str = ""
    user_paths: tuple[str, ...] = ()
    entry_defaults: tuple[tuple[str, Any], ...] = ()
    entry_forced: tuple[tuple[str, Any], ...] = ()

    @property
    def url_key(self) -> str:
        """The key of an HTTP entry's URL (``httpUrl`` for Gemini, else ``url``)."""
        return "httpUrl" if self.http == "gemini" else "url"

    @property
    def headers_key(self) -> str:
        """The key of an HTTP entry's headers (``http_headers`` for Codex, else ``headers``)."""
        return "http_headers" if self.toml else "headers"


# Where user-level files live; macOS-only bases come first on macOS.
BASES = ("home", "xdg", "mac", "claude", "codex")
_MAC_ONLY = frozenset({"mac"})

HOSTS: dict[str, HostSpec] = {
    "claude-code": HostSpec(
        "claude-code",
        "Claude Code",
        "mcpServers",
        ".mcp.json",
        stdio_type="stdio",
        http="typed",
        user_paths=("claude/.claude.json",),
    ),
    "claude-desktop": HostSpec(
        "claude-desktop",
        "Claude Desktop",
        "mcpServers",
        None,
        notes="its config file holds stdio servers only; remote servers are added in the app",
        user_paths=(
            "xdg/Claude/claude_desktop_config.json",
            "mac/Claude/claude_desktop_config.json",
        ),
    ),
    "cursor": HostSpec(
        "cursor",
        "Cursor",
        "mcpServers",
        ".cursor/mcp.json",
        http="plain",
        user_paths=("home/.cursor/mcp.json",),
    ),
    "vscode": HostSpec(
        "vscode",
        "VS Code",
        "servers",
        ".vscode/mcp.json",
        stdio_type="stdio",
        http="typed",
        user_paths=("xdg/Code/User/mcp.json", "mac/Code/User/mcp.json"),
    ),
    "codex": HostSpec(
        "codex",
        "Codex",
        "mcp_servers",
        ".codex/config.toml",
        toml=True,
        http="codex",
        user_paths=("codex/config.toml",),
        # Codex starts its first model request without a server still starting
        # unless it is required: fail closed, no session without its VM tools.
        entry_forced=(("required", True),),
    ),
    "gemini": HostSpec(
        "gemini",
        "Gemini CLI",
        "mcpServers",
        ".gemini/settings.json",
        http="gemini",
        user_paths=("home/.gemini/settings.json",),
    ),
    "copilot": HostSpec(
        "copilot",
        "GitHub Copilot CLI",
        "mcpServers",
        None,
        stdio_type="local",
        http="typed",
        notes="its MCP config is per user",
        user_paths=("home/.copilot/mcp-config.json",),
        # Copilot offers a server's tools only when the entry lists them.
        entry_defaults=(("tools", ("*",)),),
    ),
}


@dataclass(frozen=True)
class HostFile:
    """A host config file, and the keys (``scope``) leading to the object holding the servers.

    ``scope`` is ``()`` for most files; Claude Code's ``~/.claude.json`` also
    keeps servers per project under ``("projects", "<dir>")``.
    """

    host: HostSpec
    path: str
    scope: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """The file, and the scope inside it when there is one."""
        inner = "".join(f"[{json.dumps(k)}]" for k in self.scope)
        return f"{self.path}{inner}" if inner else self.path


def _xdg_config(env: Mapping[str, str]) -> str:
    return env.get("XDG_CONFIG_HOME") or os.path.join(home_dir(env), ".config")


def _mac_support(env: Mapping[str, str]) -> str:
    return os.path.join(home_dir(env), "Library", "Application Support")


def _claude_json(env: Mapping[str, str]) -> str:
    base = env.get("CLAUDE_CONFIG_DIR") or home_dir(env)
    return os.path.join(base, ".claude.json")


def _codex_home(env: Mapping[str, str]) -> str:
    return env.get("CODEX_HOME") or os.path.join(home_dir(env), ".codex")


def user_files(host: HostSpec, env: Mapping[str, str], *, platform: str = "") -> list[str]:
    """The host's user-level config files; the first is where ``--user`` writes.

    ``platform`` (default ``sys.platform``) picks the macOS or Linux path first;
    the doctor reads both.
    """
    mac = (platform or sys.platform) == "darwin"
    bases = {
        "home": home_dir(env),
        "xdg": _xdg_config(env),
        "mac": _mac_support(env),
        "claude": env.get("CLAUDE_CONFIG_DIR") or home_dir(env),
        "codex": _codex_home(env),
    }
    split = [p.split("/", 1) for p in host.user_paths]
    # a stable sort: on macOS the macOS-only paths move first, elsewhere last
    split.sort(key=lambda parts: (parts[0] in _MAC_ONLY) != mac)
    return [os.path.join(bases[base], *rest.split("/")) for base, rest in split]


def default_paths(host: HostSpec, env: Mapping[str, str]) -> list[str]:
    """Where the host keeps its servers by default, for ``--help``: user files, then project."""
    paths = user_files(host, env)
    if host.project_file:
        paths.append(os.path.join("DIR", host.project_file))
    return paths


def candidate_files(
    host: HostSpec,
    env: Mapping[str, str],
    *,
    project: str | None = None,
    user: bool = False,
    path: str | None = None,
) -> list[HostFile]:
    """Where ``install mcp-host`` looks for the server, in order.

    ``path`` overrides everything (for a host whose file lives elsewhere). A
    Claude Code project is its ``.mcp.json``, then its local scope in
    ``~/.claude.json``.
    """
    if path:
        return [HostFile(host, os.path.abspath(os.path.expanduser(path)))]
    if project is not None:
        if host.project_file is None:
            msg = f"{host.label} has no project config; use --user (or --file PATH)"
            raise UsageError(msg)
        base = os.path.abspath(os.path.expanduser(project))
        found = [HostFile(host, os.path.join(base, host.project_file))]
        if host.name == "claude-code":
            found.append(HostFile(host, _claude_json(env), ("projects", base)))
        return found
    if user or host.project_file is None:
        return [HostFile(host, user_files(host, env)[0])]
    msg = f"say where {host.label}'s config is: --project DIR or --user (or --file PATH)"
    raise UsageError(msg)


def known_files(env: Mapping[str, str], project_dirs: Iterable[str] = ()) -> list[HostFile]:
    """Every host config file the doctor reads: each host's user files, and each project's."""
    files: list[HostFile] = []
    for host in HOSTS.values():
        files += [HostFile(host, p) for p in user_files(host, env)]
        for project in project_dirs:
            if host.project_file:
                base = os.path.abspath(os.path.expanduser(project))
                files.append(HostFile(host, os.path.join(base, host.project_file)))
    seen: set[tuple[str, str]] = set()
    unique = []
    for f in files:
        if (f.host.name, f.path) not in seen:
            seen.add((f.host.name, f.path))
            unique.append(f)
    return unique
