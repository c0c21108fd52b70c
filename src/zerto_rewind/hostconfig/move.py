"""Moving a VM server behind the gateway: the pure transformation of a host config.

:func:`move_to_gateway` takes one VM server's entry out of a host config
(command, args and env, or url and headers: credentials included) and puts it
into the gateway config's ``upstreams`` under the same name, so tool names
(``mcp__<name>__<tool>``) and the catalog keep working; the host entry becomes
the gateway (stdio command, or URL plus bearer token). It reads and writes no
file: :mod:`.files` does. Messages name files, servers and keys, never a value;
the token is only ever written into the host file.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ..config.parse_gateway import GatewayParser
from ..config.settings import DEFAULT_GUARD_TIMEOUT_S
from ..errors import ConfigError, UsageError
from ..netutil import is_loopback, token_digest
from .entries import is_gateway_entry, redacted
from .files import HostConfig
from .specs import HostSpec

__all__ = [
    "HttpGateway",
    "StdioGateway",
    "describe_move",
    "gateway_endpoint",
    "move_to_gateway",
    "new_token",
    "upstream_spec",
]

# Keys of a host entry that say how to reach the server (they move, or are replaced).
_TRANSPORT_KEYS = frozenset(
    {"type", "transport", "command", "args", "env", "url", "httpUrl", "headers"}
)
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
# Gemini also expands a bare $VAR_NAME in env values.
_BARE_INTERPOLATION = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")
_UPSTREAM_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_CODEX_TOOL_TIMEOUT_MARGIN_S = 30


@dataclass(frozen=True)
class StdioGateway:
    """The host runs ``<python> -m zerto_rewind gateway --stdio --upstream NAME --config CFG``.

    ``allow_privileged``: the operator accepted an upstream that runs as root or
    as the guard's owner, so the command carries ``--allow-privileged-upstream``.
    """

    python: str
    config_path: str
    allow_privileged: bool = False


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
    _refuse_unmovable(host, where, entry)
    # Gemini: httpUrl, or url with an explicit streamable-HTTP type
    url_key = "url" if host.http == "gemini" and "httpUrl" not in entry else host.url_key
    if "command" in entry and url_key in entry:
        msg = f"{where} has both command and {url_key}; keep one"
        raise UsageError(msg)
    if "command" in entry:
        return _stdio_spec(where, entry)
    if url_key in entry:
        return _http_spec(where, entry, url_key, host.headers_key)
    msg = f"{where} has neither command nor {url_key}"
    raise UsageError(msg)


def _refuse_unmovable(host: HostSpec, where: str, entry: Mapping[str, Any]) -> None:
    """UsageError for what the gateway cannot carry: host-only fields, an SSE or unknown
    transport, placeholders only the host resolves."""
    lost = [f"{key} ({why})" for key, why in _CANNOT_MOVE.items() if key in entry]
    if lost:
        msg = (
            f"{where} uses {'; '.join(lost)}; the gateway cannot carry that. Give the values "
            "literally in the entry (or add the upstream to the gateway config by hand)"
        )
        raise UsageError(msg)
    kind = entry.get("type", entry.get("transport"))
    # "local" is Copilot's word for stdio.
    if kind not in (None, "stdio", "local", "http", "streamable-http", "streamableHttp"):
        msg = f"{where} has type {kind!r}; the gateway reaches upstreams over stdio or HTTP only"
        raise UsageError(msg)
    streamable = kind in ("http", "streamable-http", "streamableHttp")
    if host.http == "gemini" and "url" in entry and "httpUrl" not in entry and not streamable:
        msg = (
            f"{where} has url, which {host.label} reaches over SSE; the gateway reaches "
            "upstreams over stdio or streamable HTTP only (httpUrl)"
        )
        raise UsageError(msg)
    bare = _BARE_INTERPOLATION if host.http == "gemini" else _INTERPOLATION
    templated = sorted(_templated_fields(entry, bare))
    if templated:
        msg = (
            f"{where}: {', '.join(templated)} use $… placeholders that only the host "
            "resolves; write the literal values into the entry first"
        )
        raise UsageError(msg)


def _stdio_spec(where: str, entry: Mapping[str, Any]) -> dict[str, Any]:
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


def _http_spec(
    where: str, entry: Mapping[str, Any], url_key: str, headers_key: str
) -> dict[str, Any]:
    url = entry[url_key]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        msg = f"{where}: {url_key} must be an http(s):// URL"
        raise UsageError(msg)
    spec: dict[str, Any] = {"url": url}
    headers = _string_map(entry.get(headers_key, {}), f"{where}: {headers_key}")
    if headers:
        spec["headers"] = headers
    return spec


def _templated_fields(entry: Mapping[str, Any], env_pattern: re.Pattern[str]) -> Iterable[str]:
    for key in ("command", "url", "httpUrl"):
        if isinstance(entry.get(key), str) and _INTERPOLATION.search(entry[key]):
            yield key
    args = entry.get("args")
    if isinstance(args, list):
        for i, arg in enumerate(args):
            if isinstance(arg, str) and _INTERPOLATION.search(arg):
                yield f"args[{i}]"
    for key in ("env", "headers", "http_headers"):
        mapping = entry.get(key)
        pattern = env_pattern if key == "env" else _INTERPOLATION
        if isinstance(mapping, dict):
            for name, value in mapping.items():
                if isinstance(value, str) and pattern.search(value):
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
            entry["type"] = host.stdio_type
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
        if via.allow_privileged:
            entry["args"].append("--allow-privileged-upstream")
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
        else:
            entry = {host.url_key: via.url, host.headers_key: header}
    entry.update(kept)
    # json round trip: the specs hold tuples (hashable), the host file wants lists
    for key, value in host.entry_defaults:
        entry.setdefault(key, json.loads(json.dumps(value)))
    for key, value in host.entry_forced:
        entry[key] = json.loads(json.dumps(value))
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
    upstream_user: str | None = None,
) -> tuple[HostConfig, dict[str, Any]]:
    """Move ``server_name`` behind the gateway: returns (new host config, new gateway config).

    The entry's command, args and env (or url and headers) become
    ``upstreams[server_name]`` of the gateway config (with ``upstream_user`` as
    its ``user``: who the gateway starts it as); the host entry becomes the
    gateway, keeping its host-side knobs. With :class:`HttpGateway` the token's
    digest joins ``gateway.clients`` under its client name. Neither input is
    changed. UsageError says why it cannot move (no such server, already the
    gateway, a field the gateway cannot carry, a name or client clash);
    ConfigError when the result would not be a valid gateway config.
    """
    file = host_config.file
    spec = _moved_spec(host_config, server_name, gateway_urls, upstream_user)
    old = host_config.servers[server_name]
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
        _add_client(gateway, via)
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


def _moved_spec(
    host_config: HostConfig,
    server_name: str,
    gateway_urls: Iterable[str],
    upstream_user: str | None,
) -> dict[str, Any]:
    """The upstream spec of the host's ``server_name``; UsageError when it cannot move."""
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
    if upstream_user is not None:
        if "command" not in spec:
            msg = (
                f"--upstream-user: {server_name!r} is an HTTP server, which runs under its own "
                "identity elsewhere; the user applies to a stdio server (command) only"
            )
            raise UsageError(msg)
        spec["user"] = upstream_user
    return spec


def _add_client(gateway: dict[str, Any], via: HttpGateway) -> None:
    """Put the HTTP client's token digest into ``gateway.clients`` of the gateway config."""
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


def _validate_gateway_sections(gateway: Mapping[str, Any]) -> None:
    parser = GatewayParser("the gateway config", "")
    parser.upstreams(gateway.get("upstreams", {}), loose_permissions=False)
    parser.gateway(gateway.get("gateway", {}))


def describe_move(
    name: str,
    current: HostConfig,
    moved: HostConfig,
    new_gateway: dict[str, object],
    gateway_path: str,
    via: StdioGateway | HttpGateway,
) -> list[str]:
    """What a move changes, one line each, every secret hidden (for the summary and --dry-run)."""
    upstreams = new_gateway.get("upstreams")
    upstream = upstreams.get(name) if isinstance(upstreams, dict) else None
    entry = moved.servers[name]
    if isinstance(via, StdioGateway):
        reached = shlex.join([entry["command"], *entry["args"]])
    else:
        reached = f"{via.url} (client {via.client!r}, bearer token in the header)"
    shown = json.dumps(redacted(entry if isinstance(via, StdioGateway) else {"url": via.url}))
    return [
        f"host file:   {current.file.where}",
        f"gateway:     {gateway_path}",
        f"upstream:    {name} = {json.dumps(redacted(upstream))}",
        f"host entry:  {shown}",
        f"the host now reaches {name!r} through: {reached}",
    ]
