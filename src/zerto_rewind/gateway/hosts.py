"""Wiring MCP hosts to the gateway: each host's server config, read, moved and checked.

Every MCP host keeps its servers in its own file and format (:data:`HOSTS`).
:func:`move_to_gateway` takes one VM server's entry out of a host config
(command, args and env, or url and headers: credentials included) and puts it
into the gateway config's ``upstreams`` under the same name, so tool names
(``mcp__<name>__<tool>``) and the catalog keep working; the host entry becomes
the gateway (stdio command, or URL plus bearer token). It is pure: files are
read and written by :func:`read_host_config`, :func:`read_gateway_config`,
:func:`write_host_config` and :func:`write_gateway_config` (atomic, with
backups). :func:`bypass_findings` reads every host config it knows and says
which entries still reach a VM server directly, for the doctor.

Messages name files, servers and keys, never a value: env and headers hold
credentials, and the token is only ever written into the host file.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import stat
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from ..config.parser import Parser
from ..config.settings import DEFAULT_GUARD_TIMEOUT_S, home_dir
from ..errors import ConfigError, StateError, UsageError
from ..fsutil import atomic_write_text, backup_name, ensure_private_dir
from ..netutil import is_loopback, token_digest

__all__ = [
    "HOSTS",
    "Finding",
    "GatewayFile",
    "HostConfig",
    "HostFile",
    "HostSpec",
    "HttpGateway",
    "StdioGateway",
    "bypass_findings",
    "candidate_files",
    "gateway_endpoint",
    "gateway_upstream_of",
    "is_gateway_entry",
    "known_files",
    "locate_server",
    "looks_like_vm_server",
    "move_to_gateway",
    "new_token",
    "read_gateway_config",
    "read_host_config",
    "redacted",
    "render_host_config",
    "upstream_spec",
    "vm_server_entries",
    "write_gateway_config",
    "write_host_config",
]

HttpStyle = Literal["typed", "plain", "codex"]


@dataclass(frozen=True)
class HostSpec:
    """One MCP host: where its server config lives and how an entry is written.

    ``http`` is how an HTTP entry looks: ``typed`` (``type: http``, ``url``,
    ``headers``), ``plain`` (``url``, ``headers``), ``codex`` (``url``,
    ``http_headers``), or None when the file holds stdio servers only.
    """

    name: str
    label: str
    servers_key: str
    project_file: str | None
    toml: bool = False
    stdio_type: bool = False
    http: HttpStyle | None = None
    notes: str = ""


HOSTS: dict[str, HostSpec] = {
    "claude-code": HostSpec(
        "claude-code",
        "Claude Code",
        "mcpServers",
        ".mcp.json",
        stdio_type=True,
        http="typed",
    ),
    "claude-desktop": HostSpec(
        "claude-desktop",
        "Claude Desktop",
        "mcpServers",
        None,
        notes="its config file holds stdio servers only; remote servers are added in the app",
    ),
    "cursor": HostSpec("cursor", "Cursor", "mcpServers", ".cursor/mcp.json", http="plain"),
    "vscode": HostSpec(
        "vscode", "VS Code", "servers", ".vscode/mcp.json", stdio_type=True, http="typed"
    ),
    "codex": HostSpec(
        "codex", "Codex", "mcp_servers", ".codex/config.toml", toml=True, http="codex"
    ),
}

# Keys of a host entry that say how to reach the server (they move, or are replaced).
_TRANSPORT_KEYS = frozenset({"type", "transport", "command", "args", "env", "url", "headers"})
_CODEX_TRANSPORT_KEYS = frozenset({"command", "args", "env", "url", "http_headers"})
# Keys the gateway's upstream cannot carry: moving such an entry would lose part of it.
_CANNOT_MOVE: dict[str, str] = {
    "envFile": "an env file the gateway would not read",
    "env_file": "an env file the gateway would not read",
    "env_vars": "environment variables forwarded from the host, which the gateway lacks",
    "bearer_token_env_var": "a token read from the host's environment",
    "env_http_headers": "headers read from the host's environment",
    "cwd": "a working directory (gateway upstreams start in the gateway's)",
}
_INTERPOLATION = re.compile(r"\$\{[^}]*\}")
_UPSTREAM_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_CODEX_TOOL_TIMEOUT_MARGIN_S = 30
_VM_ENV_PREFIXES = ("VCENTER_", "VSPHERE_", "PROXMOX_", "PVE_", "GOVC_", "ESXI_")
_VM_WORDS = ("vsphere", "vcenter", "esxi", "proxmox", "mcvsphere", "govc")


# ------------------------------------------------------------------ where the files are


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
    if host.name == "claude-code":
        return [_claude_json(env)]
    if host.name == "claude-desktop":
        paths = [
            os.path.join(_xdg_config(env), "Claude", "claude_desktop_config.json"),
            os.path.join(_mac_support(env), "Claude", "claude_desktop_config.json"),
        ]
        return paths[::-1] if mac else paths
    if host.name == "cursor":
        return [os.path.join(home_dir(env), ".cursor", "mcp.json")]
    if host.name == "vscode":
        paths = [
            os.path.join(_xdg_config(env), "Code", "User", "mcp.json"),
            os.path.join(_mac_support(env), "Code", "User", "mcp.json"),
        ]
        return paths[::-1] if mac else paths
    if host.name == "codex":
        return [os.path.join(_codex_home(env), "config.toml")]
    return []


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


# ------------------------------------------------------------------ reading a host config


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
        return _servers_of(self.data, self.file)


def _servers_of(data: Mapping[str, Any], file: HostFile) -> dict[str, Any]:
    node: Any = data
    for key in (*file.scope, file.host.servers_key):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def read_host_config(file: HostFile) -> HostConfig:
    """Read ``file``; ``{}`` when absent. ConfigError (naming the file, never its content).

    JSON files may hold comments and trailing commas (VS Code's ``mcp.json`` is
    JSONC); they are read, and ``had_comments`` says a rewrite will drop them.
    """
    try:
        with open(file.path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return HostConfig(file, {}, None)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        msg = f"cannot read it ({reason})"
        raise ConfigError(msg, path=file.path) from None
    if not text.strip():
        return HostConfig(file, {}, text)
    had_comments = False
    if file.host.toml:
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            msg = f"not valid TOML ({exc})"
            raise ConfigError(msg, path=file.path) from None
    else:
        try:
            data = json.loads(text)
        except ValueError:
            try:
                data = json.loads(_strip_jsonc(text))
            except ValueError as exc:
                msg = f"not valid JSON ({exc.args[0] if exc.args else 'parse error'})"
                raise ConfigError(msg, path=file.path) from None
            had_comments = True
    if not isinstance(data, dict):
        msg = "must hold an object at the top level"
        raise ConfigError(msg, path=file.path)
    return HostConfig(file, data, text, had_comments)


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas → JSON (strings are left alone)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    joined = "".join(out)
    # drop a comma followed only by whitespace and a closing bracket (outside strings)
    result: list[str] = []
    i, n = 0, len(joined)
    while i < n:
        ch = joined[i]
        if ch == '"':
            j = i + 1
            while j < n and joined[j] != '"':
                j += 2 if joined[j] == "\\" else 1
            result.append(joined[i : j + 1])
            i = j + 1
            continue
        if ch == ",":
            j = i + 1
            while j < n and joined[j] in " \t\r\n":
                j += 1
            if j < n and joined[j] in "}]":
                i += 1
                continue
        result.append(ch)
        i += 1
    return "".join(result)


# ------------------------------------------------------------------ what an entry is


def _tokens(entry: Mapping[str, Any]) -> list[str]:
    command = entry.get("command")
    parts: list[Any] = command if isinstance(command, list) else [command]
    args = entry.get("args")
    if isinstance(args, list):
        parts += args
    return [p for p in parts if isinstance(p, str)]


def _headers(entry: Mapping[str, Any]) -> dict[str, Any]:
    for key in ("headers", "http_headers"):
        value = entry.get(key)
        if isinstance(value, dict):
            return value
    return {}


def gateway_upstream_of(entry: Any, name: str, gateway_urls: Iterable[str] = ()) -> str | None:
    """The upstream a host entry reaches through the zerto-rewind gateway, or None.

    A stdio entry is ours when it runs ``zerto-rewind gateway`` (or ``-m
    zerto_rewind gateway``); the upstream is its ``--upstream``. An HTTP entry is
    ours when its URL is one of ``gateway_urls``, or ends in ``/mcp/<name>`` (``name``
    being the entry's own server name, as the installer writes it) and it sends a
    bearer token.
    """
    if not isinstance(entry, dict):
        return None
    tokens = _tokens(entry)
    ours = "gateway" in tokens and (
        "zerto_rewind" in tokens or any(os.path.basename(t) == "zerto-rewind" for t in tokens)
    )
    if ours:
        if "--upstream" in tokens[:-1]:
            return tokens[tokens.index("--upstream") + 1]
        return ""
    url = entry.get("url")
    if not isinstance(url, str):
        return None
    match = re.search(r"/mcp/([A-Za-z0-9_-]+)/?$", urlsplit(url).path)
    if match is None:
        return None
    known = {u.rstrip("/") for u in gateway_urls}
    bearer = any(
        str(k).lower() == "authorization" and str(v).lower().startswith("bearer ")
        for k, v in _headers(entry).items()
    )
    if url.rstrip("/") in known or (bearer and match.group(1) == name):
        return match.group(1)
    return None


def is_gateway_entry(entry: Any, name: str, gateway_urls: Iterable[str] = ()) -> bool:
    """Whether host entry ``name`` reaches its server through the zerto-rewind gateway."""
    return gateway_upstream_of(entry, name, gateway_urls) is not None


def vm_server_entries(config: HostConfig, gateway_urls: Iterable[str] = ()) -> dict[str, Any]:
    """The config's server entries that are not the gateway (candidates to move)."""
    urls = list(gateway_urls)
    servers = config.servers
    return {n: e for n, e in servers.items() if not is_gateway_entry(e, n, urls)}


def looks_like_vm_server(entry: Any) -> list[str]:
    """Why an entry looks like a VM server (key names and words only, never a value)."""
    if not isinstance(entry, dict):
        return []
    reasons: list[str] = []
    env = entry.get("env")
    if isinstance(env, dict):
        keys = sorted(k for k in env if str(k).upper().startswith(_VM_ENV_PREFIXES))
        if keys:
            reasons.append("env " + ", ".join(keys))
    names = [os.path.basename(t).lower() for t in _tokens(entry)]
    words = sorted({w for w in _VM_WORDS for t in names if w in t})
    if words:
        reasons.append("command names " + ", ".join(words))
    url = entry.get("url")
    if isinstance(url, str):
        host_and_path = (urlsplit(url).hostname or "") + urlsplit(url).path
        url_words = sorted({w for w in _VM_WORDS if w in host_and_path.lower()})
        if url_words:
            reasons.append("url names " + ", ".join(url_words))
    return reasons


# ------------------------------------------------------------------ moving an entry


@dataclass(frozen=True)
class StdioGateway:
    """The host runs ``<python> -m zerto_rewind gateway --stdio --upstream NAME --config CFG``."""

    python: str
    config_path: str


@dataclass(frozen=True)
class HttpGateway:
    """The host reaches ``url`` (``…/mcp/NAME``) with a bearer token of client ``client``."""

    url: str
    client: str
    token: str = field(repr=False)


def new_token() -> str:
    """A fresh client token (shown once, stored only in the host file)."""
    return secrets.token_urlsafe(32)


def gateway_endpoint(url: str, name: str) -> str:
    """``http(s)://host:port/mcp/NAME`` from the gateway's base URL (or the full endpoint).

    UsageError for anything but http(s), and for plain http beyond loopback
    (the token would cross the network in clear text).
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        msg = f"--url must be the gateway's http(s)://HOST:PORT, not {url!r}"
        raise UsageError(msg)
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        msg = (
            f"--url {url!r} is plain http beyond this machine: the bearer token would cross "
            "the network in clear text; serve the gateway with TLS and use https://"
        )
        raise UsageError(msg)
    path = parts.path.rstrip("/")
    if path.endswith(f"/mcp/{name}"):
        pass
    elif path.endswith("/mcp"):
        path = f"{path}/{name}"
    else:
        path = f"{path}/mcp/{name}"
    return f"{parts.scheme}://{parts.netloc}{path}"


def upstream_spec(host: HostSpec, name: str, entry: Any) -> dict[str, Any]:
    """The gateway ``upstreams`` spec for a host entry; UsageError says why it cannot move."""
    where = f"server {name!r}"
    if not isinstance(entry, dict):
        msg = f"{where} is not an object"
        raise UsageError(msg)
    lost = [f"{key} ({why})" for key, why in _CANNOT_MOVE.items() if key in entry]
    if lost:
        msg = (
            f"{where} uses {'; '.join(lost)}; the gateway cannot carry that. Give the values "
            "literally in the entry (or add the upstream to the gateway config by hand)"
        )
        raise UsageError(msg)
    kind = entry.get("type", entry.get("transport"))
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
        msg = f"{where} has type {kind!r}; the gateway reaches upstreams over stdio or HTTP only"
        raise UsageError(msg)
    templated = sorted(_templated_fields(entry))
    if templated:
        msg = (
            f"{where}: {', '.join(templated)} use ${{…}} placeholders that only the host "
            "resolves; write the literal values into the entry first"
        )
        raise UsageError(msg)
    headers_key = "http_headers" if host.toml else "headers"
    if "command" in entry and "url" in entry:
        msg = f"{where} has both command and url; keep one"
        raise UsageError(msg)
    if "command" in entry:
        command = entry["command"]
        args = entry.get("args", [])
        if not isinstance(command, str) or not command.strip():
            msg = f"{where}: command must be a non-empty string"
            raise UsageError(msg)
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            msg = f"{where}: args must be a list of strings"
            raise UsageError(msg)
        spec: dict[str, Any] = {"command": [command, *args]}
        env = _string_map(entry.get("env", {}), f"{where}: env")
        if env:
            spec["env"] = env
        return spec
    if "url" in entry:
        url = entry["url"]
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            msg = f"{where}: url must be an http(s):// URL"
            raise UsageError(msg)
        spec = {"url": url}
        headers = _string_map(entry.get(headers_key, {}), f"{where}: {headers_key}")
        if headers:
            spec["headers"] = headers
        return spec
    msg = f"{where} has neither command nor url"
    raise UsageError(msg)


def _templated_fields(entry: Mapping[str, Any]) -> Iterable[str]:
    for key in ("command", "url"):
        if isinstance(entry.get(key), str) and _INTERPOLATION.search(entry[key]):
            yield key
    args = entry.get("args")
    if isinstance(args, list):
        for i, arg in enumerate(args):
            if isinstance(arg, str) and _INTERPOLATION.search(arg):
                yield f"args[{i}]"
    for key in ("env", "headers", "http_headers"):
        mapping = entry.get(key)
        if isinstance(mapping, dict):
            for name, value in mapping.items():
                if isinstance(value, str) and _INTERPOLATION.search(value):
                    yield f"{key}.{name}"


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        msg = f"{where} must be an object"
        raise UsageError(msg)
    found: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            msg = f"{where}.{key} must be a string"
            raise UsageError(msg)
        found[str(key)] = item if isinstance(item, str) else str(item)
    return found


def _gateway_entry(
    host: HostSpec,
    name: str,
    via: StdioGateway | HttpGateway,
    old: Mapping[str, Any],
    gateway_config: Mapping[str, Any],
) -> dict[str, Any]:
    transport = _CODEX_TRANSPORT_KEYS if host.toml else _TRANSPORT_KEYS
    # Host-side knobs (enabled, disabled tools, timeouts, …) stay as they were.
    kept = {k: copy.deepcopy(v) for k, v in old.items() if k not in transport}
    entry: dict[str, Any] = {}
    if isinstance(via, StdioGateway):
        if host.stdio_type:
            entry["type"] = "stdio"
        entry["command"] = via.python
        entry["args"] = [
            "-m",
            "zerto_rewind",
            "gateway",
            "--stdio",
            "--upstream",
            name,
            "--config",
            via.config_path,
        ]
    else:
        if host.http is None:
            msg = (
                f"{host.label}'s config file takes stdio servers only ({host.notes}); "
                "wire it with the stdio gateway (no --url)"
            )
            raise UsageError(msg)
        header = {"Authorization": f"Bearer {via.token}"}
        if host.http == "typed":
            entry = {"type": "http", "url": via.url, "headers": header}
        elif host.http == "plain":
            entry = {"url": via.url, "headers": header}
        else:
            entry = {"url": via.url, "http_headers": header}
    entry.update(kept)
    if host.name == "codex":
        # The guard may wait for a tag up to its budget: Codex must not give up first.
        budget = _guard_budget(gateway_config)
        wanted = int(budget) + _CODEX_TOOL_TIMEOUT_MARGIN_S
        current = entry.get("tool_timeout_sec")
        if not isinstance(current, int | float) or current < wanted:
            entry["tool_timeout_sec"] = wanted
    return entry


def _guard_budget(gateway_config: Mapping[str, Any]) -> float:
    guard = gateway_config.get("guard")
    value = guard.get("timeout_s") if isinstance(guard, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_GUARD_TIMEOUT_S


def move_to_gateway(
    host_config: HostConfig,
    server_name: str,
    gateway_config: Mapping[str, Any],
    *,
    via: StdioGateway | HttpGateway,
    gateway_urls: Iterable[str] = (),
) -> tuple[HostConfig, dict[str, Any]]:
    """Move ``server_name`` behind the gateway: returns (new host config, new gateway config).

    The entry's command, args and env (or url and headers) become
    ``upstreams[server_name]`` of the gateway config; the host entry becomes the
    gateway, keeping its host-side knobs. With :class:`HttpGateway` the token's
    digest joins ``gateway.clients`` under its client name. Neither input is
    changed. UsageError says why it cannot move (no such server, already the
    gateway, a field the gateway cannot carry, a name or client clash);
    ConfigError when the result would not be a valid gateway config.
    """
    file = host_config.file
    servers = host_config.servers
    if server_name not in servers:
        known = ", ".join(sorted(servers)) or "none"
        msg = f"{file.where}: no MCP server named {server_name!r} (servers: {known})"
        raise UsageError(msg)
    old = servers[server_name]
    if is_gateway_entry(old, server_name, gateway_urls):
        msg = f"{file.where}: server {server_name!r} already reaches the zerto-rewind gateway"
        raise UsageError(msg)
    if not _UPSTREAM_NAME.match(server_name):
        msg = (
            f"{file.where}: server name {server_name!r} cannot be a gateway upstream (letters, "
            "digits, - and _ only); rename it in the host first (tool names change with it)"
        )
        raise UsageError(msg)
    try:
        spec = upstream_spec(file.host, server_name, old)
    except UsageError as exc:
        msg = f"{file.where}: {exc}"
        raise UsageError(msg) from None

    gateway = copy.deepcopy(dict(gateway_config))
    upstreams = gateway.setdefault("upstreams", {})
    if not isinstance(upstreams, dict):
        msg = "must be an object of name -> server"
        raise ConfigError(msg, key="upstreams")
    if server_name in upstreams and upstreams[server_name] != spec:
        msg = (
            f"the gateway config already has a different upstream {server_name!r}; remove it "
            "first, or move a server of another name"
        )
        raise UsageError(msg)
    upstreams[server_name] = spec
    if isinstance(via, HttpGateway):
        section = gateway.setdefault("gateway", {})
        if not isinstance(section, dict):
            msg = "must be an object"
            raise ConfigError(msg, key="gateway")
        clients = section.setdefault("clients", {})
        if not isinstance(clients, dict):
            msg = "must be an object of client -> token digest"
            raise ConfigError(msg, key="gateway.clients")
        digest = token_digest(via.token)
        if via.client in clients and clients[via.client] != digest:
            msg = (
                f"the gateway config already has a token for client {via.client!r}; name "
                "another with --client, or remove the old one first"
            )
            raise UsageError(msg)
        clients[via.client] = digest
    _validate_gateway_sections(gateway)

    entry = _gateway_entry(file.host, server_name, via, old, gateway)
    data = copy.deepcopy(host_config.data)
    holder: Any = data
    for key in file.scope:
        holder = holder[key]
    holder[file.host.servers_key] = {
        name: (entry if name == server_name else value)
        for name, value in holder[file.host.servers_key].items()
    }
    return replace(host_config, data=data), gateway


def _validate_gateway_sections(gateway: Mapping[str, Any]) -> None:
    parser = Parser("the gateway config", "")
    parser.upstreams(gateway.get("upstreams", {}), loose_permissions=False)
    parser.gateway(gateway.get("gateway", {}))


def redacted(entry: Any) -> Any:
    """An entry (host or upstream) with every env and header value replaced, for printing."""
    if not isinstance(entry, dict):
        return entry
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ("env", "headers", "http_headers") and isinstance(value, dict):
            out[key] = dict.fromkeys(value, "<redacted>")
        else:
            out[key] = copy.deepcopy(value)
    return out


# ------------------------------------------------------------------ rendering a host config


def render_host_config(config: HostConfig) -> str:
    """The text to write for ``config``.

    JSON as the hosts write it (indent 2, final newline). TOML by editing the
    original text: only the server tables that changed are rewritten, every
    other line is kept; the result is parsed back and must equal ``data``.
    """
    if not config.file.host.toml:
        return json.dumps(config.data, indent=2, ensure_ascii=False) + "\n"
    original = config.text or ""
    old = tomllib.loads(original) if original.strip() else {}
    text = original
    old_servers = old.get("mcp_servers", {}) if isinstance(old.get("mcp_servers"), dict) else {}
    new_servers = config.data.get("mcp_servers", {})
    for name in list(old_servers) + [n for n in new_servers if n not in old_servers]:
        if old_servers.get(name) != new_servers.get(name):
            text = _replace_toml_server(text, name, new_servers.get(name), config.file.path)
    try:
        check = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"rewriting it would give invalid TOML ({exc}); nothing was written"
        raise ConfigError(msg, path=config.file.path) from None
    if check != config.data:
        msg = "could not rewrite it without changing other settings; nothing was written"
        raise ConfigError(msg, path=config.file.path)
    return text


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*(?P<key>[^\[\]#]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY_PART = re.compile(
    r"\s*(?:\"(?P<basic>(?:[^\"\\]|\\.)*)\"|'(?P<literal>[^']*)'|(?P<bare>[A-Za-z0-9_-]+))\s*"
)


def _toml_key_parts(key: str) -> list[str] | None:
    parts: list[str] = []
    pos = 0
    while True:
        match = _TOML_KEY_PART.match(key, pos)
        if match is None:
            return None
        if match.group("basic") is not None:
            try:
                parts.append(json.loads(f'"{match.group("basic")}"'))
            except ValueError:
                return None
        else:
            parts.append(match.group("literal") or match.group("bare") or "")
        pos = match.end()
        if pos == len(key):
            return parts
        if key[pos] != ".":
            return None
        pos += 1


def _replace_toml_server(text: str, name: str, entry: Any, path: str) -> str:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    for i, line in enumerate(lines):
        header = _TOML_HEADER.match(line)
        if header is None:
            continue
        if start is not None:
            blocks.append((start, i))
            start = None
        parts = _toml_key_parts(header.group("key"))
        if parts is not None and parts[:2] == ["mcp_servers", name]:
            start = i
    if start is not None:
        blocks.append((start, len(lines)))
    existed = bool(blocks)
    if not existed and name in (tomllib.loads(text).get("mcp_servers") or {}):
        msg = (
            f"server {name!r} is written as an inline table or dotted keys, which this "
            f"installer does not edit; write it as a [mcp_servers.{name}] table first"
        )
        raise ConfigError(msg, path=path)
    new_block = _toml_server_block(name, entry) if entry is not None else []
    if not existed:
        prefix = "".join(lines)
        sep = "\n" if prefix.strip() else ""
        return prefix + sep + "".join(new_block)
    # Comments and blank lines just above the next header belong to it: give them back.
    # (Not between two of the server's own tables: those lines go with it.)
    starts = {a for a, _ in blocks}
    trimmed = []
    for a, b in blocks:
        while (
            b not in starts
            and b > a + 1
            and (not lines[b - 1].strip() or lines[b - 1].lstrip().startswith("#"))
        ):
            b -= 1
        trimmed.append((a, b))
    out: list[str] = []
    for i, line in enumerate(lines):
        if i == trimmed[0][0]:
            out += new_block
            following = trimmed[0][1]
            while any(a <= following < b for a, b in trimmed):
                following += 1
            if new_block and following < len(lines) and lines[following].strip():
                out.append("\n")
        if not any(a <= i < b for a, b in trimmed):
            out.append(line)
    return "".join(out)


def _toml_server_block(name: str, entry: Mapping[str, Any]) -> list[str]:
    table = f"mcp_servers.{_toml_key(name)}"
    lines = [f"[{table}]\n"]
    subtables: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in entry.items():
        if isinstance(value, dict):
            subtables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}\n")
    for key, value in subtables:
        lines.append(f"\n[{table}.{_toml_key(key)}]\n")
        lines += [f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in value.items()]
    return lines


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            msg = "cannot write a non-finite number to TOML"
            raise ConfigError(msg)
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    msg = f"cannot write a {type(value).__name__} to TOML"
    raise ConfigError(msg)


# ------------------------------------------------------------------ files


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
    """Replace the host file atomically, keeping its mode; returns the backup's path.

    ``private`` (the file now holds a bearer token) takes group and others'
    access away.

    The old file held the credentials that just moved, so its backup goes to
    ``backup_dir`` (made 0700, the backup 0600), beside the gateway config,
    not beside the host file where the agent (or a ``git add``) would find it.
    """
    path = config.file.path
    backup = None
    try:
        mode = 0o600
        if config.text is not None:
            mode = stat.S_IMODE(os.stat(path).st_mode)
            ensure_private_dir(backup_dir)
            name = f"{config.file.host.name}-{os.path.basename(path).lstrip('.')}"
            backup = backup_name(os.path.join(backup_dir, name))
            atomic_write_text(backup, config.text, mode=0o600)
        if private:
            mode &= 0o700
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(path, text, mode=mode)
    except OSError as exc:
        msg = f"cannot write it ({exc.strerror})"
        raise ConfigError(msg, path=path) from None
    except StateError as exc:
        raise ConfigError(str(exc)) from None
    return backup


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


# ------------------------------------------------------------------ the doctor's scan

FindingKind = Literal["bypass", "gateway", "other", "absent", "unreadable", "empty"]


@dataclass(frozen=True)
class Finding:
    """What the doctor concluded about one host file, or one server entry in it.

    ``upstream`` is the gateway upstream a ``gateway`` entry asks for (``""``
    when its command names none).
    """

    host: str
    path: str
    kind: FindingKind
    server: str | None = None
    detail: str = ""
    scope: tuple[str, ...] = ()
    upstream: str | None = None

    @property
    def where(self) -> str:
        """The file, and the scope inside it when there is one."""
        inner = "".join(f"[{json.dumps(k)}]" for k in self.scope)
        return f"{self.path}{inner}" if inner else self.path


def bypass_findings(
    env: Mapping[str, str],
    *,
    project_dirs: Iterable[str] = (),
    upstream_names: Iterable[str] = (),
    gateway_urls: Iterable[str] = (),
    files: Sequence[HostFile] | None = None,
) -> list[Finding]:
    """Read every known host config; say which server entries reach a VM server directly.

    An entry is a *bypass* when the gateway config also lists its name as an
    upstream, or when it looks like a VM server (vCenter/ESXi/Proxmox/govc
    credentials in its env, such a name in its command or URL), and it is not
    the gateway. A file that exists but cannot be read is reported as
    ``unreadable``, never passed. Details name keys, never values.
    """
    upstreams = set(upstream_names)
    urls = list(gateway_urls)
    found: list[Finding] = []
    for file in files if files is not None else known_files(env, project_dirs):
        host = file.host.name
        if not os.path.lexists(file.path):
            found.append(Finding(host, file.path, "absent", detail="no such file"))
            continue
        try:
            config = read_host_config(file)
        except ConfigError as exc:
            found.append(Finding(host, file.path, "unreadable", detail=exc.detail))
            continue
        scopes = [file]
        if host == "claude-code" and not file.scope:
            projects = config.data.get("projects")
            if isinstance(projects, dict):
                scopes += [HostFile(file.host, file.path, ("projects", str(p))) for p in projects]
        any_servers = False
        for scope in scopes:
            for name, entry in _servers_of(config.data, scope).items():
                any_servers = True
                found.append(_classify(scope, name, entry, upstreams, urls))
        if not any_servers:
            found.append(Finding(host, file.path, "empty", detail="no MCP servers"))
    return found


def _classify(
    file: HostFile, name: str, entry: Any, upstreams: set[str], urls: list[str]
) -> Finding:
    host, path, scope = file.host.name, file.path, file.scope
    through = gateway_upstream_of(entry, name, urls)
    if through is not None:
        via = f"upstream {through!r}" if through else "an upstream"
        detail = f"reaches {via} through the gateway"
        return Finding(host, path, "gateway", name, detail, scope, upstream=through)
    reasons = looks_like_vm_server(entry)
    if name in upstreams:
        reasons.insert(0, "the gateway config serves an upstream of this name")
    if reasons:
        return Finding(host, path, "bypass", name, "; ".join(reasons), scope)
    return Finding(host, path, "other", name, "not a VM server", scope)
