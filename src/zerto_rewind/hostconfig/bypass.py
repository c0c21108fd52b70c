"""The doctor's bypass scan: which host entries still reach a VM server directly.

:func:`bypass_findings` reads every host config :mod:`.specs` knows and says,
per entry, whether it goes through the gateway, bypasses it, or is no VM server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from .entries import credential_fields, gateway_config_of, gateway_upstream_of, looks_like_vm_server
from .files import read_host_config, servers_of
from .specs import HostFile, known_files

__all__ = [
    "Finding",
    "bypass_findings",
]

FindingKind = Literal["bypass", "gateway", "other", "absent", "unreadable", "empty"]


@dataclass(frozen=True)
class Finding:
    """What the doctor concluded about one host file, or one server entry in it.

    ``upstream`` is the gateway upstream a ``gateway`` entry asks for (``""``
    when its command names none), ``config`` the gateway config its command
    names (stdio). ``credentials`` are where a ``bypass`` entry holds
    credentials inline (``env.VCENTER_PASSWORD``: names, never values).
    """

    host: str
    path: str
    kind: FindingKind
    server: str | None = None
    detail: str = ""
    scope: tuple[str, ...] = ()
    upstream: str | None = None
    config: str | None = None
    credentials: tuple[str, ...] = ()

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
            for name, entry in servers_of(config.data, scope).items():
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
        config = gateway_config_of(entry)
        return Finding(host, path, "gateway", name, detail, scope, upstream=through, config=config)
    reasons = looks_like_vm_server(entry, name)
    if name in upstreams:
        reasons.insert(0, "the gateway config serves an upstream of this name")
    if reasons:
        secrets = tuple(credential_fields(entry))
        return Finding(host, path, "bypass", name, "; ".join(reasons), scope, credentials=secrets)
    return Finding(host, path, "other", name, "not a VM server", scope)
