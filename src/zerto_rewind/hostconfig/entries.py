"""What a host's server entry is: the gateway, zerto-rewind itself, or a VM server.

Every test here reads key names and words, never a value: env and headers hold
credentials.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from .files import HostConfig

__all__ = [
    "gateway_upstream_of",
    "is_gateway_entry",
    "looks_like_vm_server",
    "redacted",
    "vm_server_entries",
]

_VM_ENV_PREFIXES = ("VCENTER_", "VSPHERE_", "PROXMOX_", "PVE_", "GOVC_", "ESXI_")
_VM_WORDS = ("vsphere", "vcenter", "esxi", "proxmox", "mcvsphere", "govc")


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
