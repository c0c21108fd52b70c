"""Claude Code's MCP server configs: which servers a project or a user defines, and where.

Claude Code takes its MCP servers from several files; a tool of server ``S`` is named
``mcp__S__<tool>``, so the catalog (and the compiled matcher) only guard a server
whose *registered* name is the one the catalog uses. :func:`read_sources` reads
every file that may define servers for a project or a user:

* the project's ``.mcp.json`` (project scope);
* the user's ``~/.claude.json``: ``mcpServers`` (user scope) and
  ``projects["<dir>"].mcpServers`` (local scope);
* ``.claude/settings.json`` / ``settings.local.json`` of the project and the user
  (their ``mcpServers``, when any);
* plugins under ``~/.claude/plugins``: each plugin's ``.mcp.json`` (or the
  ``mcpServers`` of its ``plugin.json``), servers named ``plugin_<plugin>_<server>``;
* files named explicitly (``claude --mcp-config FILE``).

A file that exists but cannot be read is a :class:`McpSource` with ``state``
``unreadable``: nothing is concluded from it, never a pass. Used by ``install
claude-code`` (which refuses a matcher for servers nobody defines) and by the
doctor. Pure reading, no writing; messages name files and keys, never values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config.settings import home_dir
from ..errors import ConfigError
from .objectfile import read_object_file

__all__ = [
    "McpSource",
    "claude_config_dir",
    "claude_json_path",
    "defined_servers",
    "read_sources",
]

SourceState = Literal["read", "absent", "unreadable"]

_PLUGIN_WALK_DEPTH = 6
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})


@dataclass(frozen=True)
class McpSource:
    """One place Claude Code reads MCP servers from, and what was found there.

    ``servers`` maps the name the host gives each server (the ``S`` of
    ``mcp__S__tool``; ``plugin_<plugin>_<server>`` for plugins) to its entry.
    """

    path: str
    scope: str
    state: SourceState
    servers: dict[str, Any] = field(default_factory=dict)
    problem: str = ""

    @property
    def where(self) -> str:
        """The file and, for ``~/.claude.json``, the scope inside it."""
        return f"{self.path} ({self.scope})"


def claude_config_dir(env: Mapping[str, str]) -> str:
    """``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    return env.get("CLAUDE_CONFIG_DIR") or os.path.join(home_dir(env), ".claude")


def claude_json_path(env: Mapping[str, str]) -> str:
    """The user's ``.claude.json`` (in ``$CLAUDE_CONFIG_DIR`` when that is set)."""
    base = env.get("CLAUDE_CONFIG_DIR") or home_dir(env)
    return os.path.join(base, ".claude.json")


def _load(path: str) -> tuple[SourceState, Any, str]:
    try:
        read = read_object_file(path)
    except ConfigError as exc:
        return "unreadable", None, exc.detail
    return ("read", read.data, "") if read.exists else ("absent", None, "")


def _servers(node: Any) -> dict[str, Any]:
    servers = node.get("mcpServers") if isinstance(node, dict) else None
    return dict(servers) if isinstance(servers, dict) else {}


def _file_source(path: str, scope: str, *, flat_ok: bool = False) -> McpSource:
    state, data, problem = _load(path)
    if state != "read":
        return McpSource(path, scope, state, problem=problem)
    servers = _servers(data)
    if not servers and flat_ok:  # a plugin's .mcp.json may hold the servers at the top level
        servers = {
            k: v for k, v in data.items() if isinstance(v, dict) and ("command" in v or "url" in v)
        }
    return McpSource(path, scope, "read", servers)


def _same_dir(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b) or os.path.realpath(a) == os.path.realpath(b)


def read_sources(
    env: Mapping[str, str],
    *,
    projects: Sequence[str] = (),
    every_local_scope: bool = False,
    extra_files: Iterable[str] = (),
) -> list[McpSource]:
    """Every MCP config Claude Code would read for ``projects`` and this user.

    ``every_local_scope`` also reads each project ``~/.claude.json`` knows (its
    local scope and its ``.mcp.json``): what a ``--user`` install covers.
    """
    sources: list[McpSource] = []
    project_dirs = [os.path.abspath(os.path.expanduser(p)) for p in projects]
    claude_json = claude_json_path(env)
    state, data, problem = _load(claude_json)
    if state == "read":
        sources.append(McpSource(claude_json, "user", "read", _servers(data)))
        known = data.get("projects") if isinstance(data.get("projects"), dict) else {}
        if every_local_scope:
            project_dirs += [str(p) for p in known if str(p) not in project_dirs]
        for project in project_dirs:
            key = next((str(k) for k in known if _same_dir(str(k), project)), None)
            servers = _servers(known.get(key)) if key is not None else {}
            scope = f'local, projects["{key or project}"]'
            sources.append(McpSource(claude_json, scope, "read", servers))
    else:
        sources.append(McpSource(claude_json, "user and local", state, problem=problem))
    for project in project_dirs:
        sources.append(_file_source(os.path.join(project, ".mcp.json"), "project"))
        for name in ("settings.json", "settings.local.json"):
            path = os.path.join(project, ".claude", name)
            sources.append(_file_source(path, "project settings"))
    config_dir = claude_config_dir(env)
    for name in ("settings.json", "settings.local.json"):
        sources.append(_file_source(os.path.join(config_dir, name), "user settings"))
    sources += _plugin_sources(os.path.join(config_dir, "plugins"))
    for path in extra_files:
        sources.append(_file_source(os.path.abspath(path), "--mcp-config"))
    return sources


def _plugin_sources(root: str) -> list[McpSource]:
    """Each plugin's servers under ``root``, named as Claude Code names them."""
    found: list[McpSource] = []
    if not os.path.isdir(root):
        return found
    base_depth = root.rstrip(os.sep).count(os.sep)
    for directory, subdirs, files in os.walk(root):
        depth = directory.count(os.sep) - base_depth
        subdirs[:] = [d for d in sorted(subdirs) if d not in _SKIP_DIRS]
        if depth >= _PLUGIN_WALK_DEPTH:
            subdirs[:] = []
        manifest = os.path.join(directory, ".claude-plugin", "plugin.json")
        has_manifest = os.path.isfile(manifest)
        if ".mcp.json" not in files and not has_manifest:
            continue
        plugin = os.path.basename(directory)
        inline: dict[str, Any] = {}
        if has_manifest:
            state, data, _problem = _load(manifest)
            if state == "read" and isinstance(data.get("name"), str):
                plugin = data["name"]
            if state == "read" and isinstance(data.get("mcpServers"), dict):
                inline = dict(data["mcpServers"])
        scope = f"plugin {plugin}"
        sources = [McpSource(manifest, scope, "read", inline)] if inline else []
        if ".mcp.json" in files:
            sources.append(_file_source(os.path.join(directory, ".mcp.json"), scope, flat_ok=True))
        for source in sources:
            named = {f"plugin_{plugin}_{name}": e for name, e in source.servers.items()}
            found.append(McpSource(source.path, scope, source.state, named, source.problem))
    return found


def defined_servers(sources: Iterable[McpSource]) -> dict[str, list[str]]:
    """Server name → where it is defined, over the sources that were read."""
    defined: dict[str, list[str]] = {}
    for source in sources:
        for name in source.servers:
            defined.setdefault(name, []).append(source.where)
    return defined
