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
    "credential_fields",
    "entry_url",
    "gateway_config_of",
    "gateway_upstream_of",
    "is_gateway_entry",
    "looks_like_vm_server",
    "redacted",
    "vm_server_entries",
    "zerto_rewind_role",
]

# What says "this server drives VMs": credential env names, and words in a
# server's name, command or URL (substrings: "vmware-mcp", "mcvsphere").
_VM_ENV_PREFIXES = ("VCENTER_", "VSPHERE_", "PROXMOX_", "PVE_", "GOVC_", "ESXI_", "VMWARE_")
_VM_WORDS = (
    "vsphere",
    "vcenter",
    "esxi",
    "proxmox",
    "mcvsphere",
    "govc",
    "hyperv",
    "libvirt",
    "vmware",
)


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


def entry_url(entry: Mapping[str, Any]) -> str | None:
    """An HTTP entry's URL: ``url``, or Gemini's ``httpUrl`` (None for a stdio entry)."""
    for key in ("url", "httpUrl"):
        value = entry.get(key)
        if isinstance(value, str):
            return value
    return None


# Words in an env name, header name or option that say "this holds a credential".
_SECRET_WORDS = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "APIKEY", "API_KEY", "CREDENTIAL")


def _secret_name(name: str) -> bool:
    upper = name.upper().replace("-", "_")
    return any(w in upper for w in _SECRET_WORDS) or upper.endswith(("_PASS", "_PWD"))


def credential_fields(entry: Any) -> list[str]:
    """Where an entry holds credentials inline: env and header names, options; never values.

    ``env.VCENTER_PASSWORD``, ``headers.Authorization``, ``args[3] (--password)``:
    enough for the doctor to name what to move, nothing of the secret itself.
    A value that is only a ``${VAR}`` reference is not a credential in the file.
    """
    if not isinstance(entry, dict):
        return []
    found: list[str] = []
    for key in ("env", "headers", "http_headers"):
        mapping = entry.get(key)
        if not isinstance(mapping, dict):
            continue
        for name, value in mapping.items():
            if not isinstance(value, str) or not value or _only_reference(value):
                continue
            if _secret_name(str(name)) or str(name).lower() in ("authorization", "cookie"):
                found.append(f"{key}.{name}")
    tokens = entry.get("args")
    if isinstance(tokens, list):
        for i, arg in enumerate(tokens):
            if not isinstance(arg, str) or not arg.startswith("-"):
                continue
            option, sep, value = arg.partition("=")
            if not _secret_name(option.lstrip("-")):
                continue
            following = tokens[i + 1] if i + 1 < len(tokens) else None
            inline = value if sep else following
            if isinstance(inline, str) and inline and not _only_reference(inline):
                found.append(f"args[{i}] ({option})")
    return found


def _only_reference(value: str) -> bool:
    """``${VAR}`` / ``$VAR`` (after an optional ``Bearer``): the host fills it in, not the file."""
    bare = re.sub(r"^bearer\s+", "", value.strip(), flags=re.IGNORECASE)
    return re.fullmatch(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*", bare) is not None


def _runs_zerto_rewind(tokens: list[str]) -> bool:
    """``python -m zerto_rewind …`` or the ``zerto-rewind`` console script."""
    return "zerto_rewind" in tokens or any(os.path.basename(t) == "zerto-rewind" for t in tokens)


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
    if "gateway" in tokens and _runs_zerto_rewind(tokens):
        if "--upstream" in tokens[:-1]:
            return tokens[tokens.index("--upstream") + 1]
        return ""
    url = entry_url(entry)
    if url is None:
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


def gateway_config_of(entry: Any) -> str | None:
    """The ``--config`` a stdio gateway entry's command names (None: not given, or HTTP)."""
    tokens = _tokens(entry) if isinstance(entry, dict) else []
    if not ("gateway" in tokens and _runs_zerto_rewind(tokens)):
        return None
    for i, part in enumerate(tokens):
        if part == "--config" and i + 1 < len(tokens):
            return tokens[i + 1]
        if part.startswith("--config="):
            return part.partition("=")[2]
    return None


def is_gateway_entry(entry: Any, name: str, gateway_urls: Iterable[str] = ()) -> bool:
    """Whether host entry ``name`` reaches its server through the zerto-rewind gateway."""
    return gateway_upstream_of(entry, name, gateway_urls) is not None


def vm_server_entries(config: HostConfig, gateway_urls: Iterable[str] = ()) -> dict[str, Any]:
    """The config's server entries that are not the gateway (candidates to move)."""
    urls = list(gateway_urls)
    servers = config.servers
    return {n: e for n, e in servers.items() if not is_gateway_entry(e, n, urls)}


def zerto_rewind_role(entry: Any, name: str = "") -> str | None:
    """``"gateway"`` or ``"serve"`` when entry ``name`` is zerto-rewind itself, else None.

    ``"gateway"`` is exactly :func:`is_gateway_entry` (stdio or HTTP), so the
    doctor's checks and the installer agree on what the gateway is.
    """
    if is_gateway_entry(entry, name):
        return "gateway"
    tokens = _tokens(entry) if isinstance(entry, dict) else []
    if _runs_zerto_rewind(tokens) and "serve" in tokens:
        return "serve"
    return None


def looks_like_vm_server(
    entry: Any, name: str = "", catalog_servers: Iterable[str] = ()
) -> list[str]:
    """Why server ``name`` (its ``entry``) looks like a VM server; ``[]`` when it does not.

    Reasons name keys and words, never a value: VM-credential env names, VM words
    in the server's name, command or URL, and (given the catalog's servers) a
    name the catalog uses or resembles. The doctor's bypass scan, its MCP check
    and its access check all ask this one question.
    """
    catalog = list(catalog_servers)
    if name and name in catalog:
        return ["the catalog names it"]
    reasons: list[str] = []
    lowered = name.lower()
    similar = [s for s in catalog if name and (s.lower() in lowered or lowered in s.lower())]
    if similar:
        reasons.append("named like the catalog's " + ", ".join(similar))
    if isinstance(entry, dict):
        reasons += _entry_reasons(entry)
    name_words = _words_in([lowered])
    if name_words:
        reasons.append("its name says " + ", ".join(name_words))
    return reasons


def _entry_reasons(entry: Mapping[str, Any]) -> list[str]:
    reasons: list[str] = []
    env = entry.get("env")
    if isinstance(env, dict):
        keys = sorted(str(k) for k in env if str(k).upper().startswith(_VM_ENV_PREFIXES))
        if keys:
            reasons.append("env " + ", ".join(keys))
    words = _words_in([os.path.basename(t).lower() for t in _tokens(entry)])
    if words:
        reasons.append("command names " + ", ".join(words))
    url = entry_url(entry)
    if url is not None:
        url_words = _words_in([url.lower()])
        if url_words:
            reasons.append("url names " + ", ".join(url_words))
    return reasons


def _words_in(texts: Iterable[str]) -> list[str]:
    found = {w for w in _VM_WORDS for t in texts if w in t}
    return sorted(found)


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
