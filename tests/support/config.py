"""Config files for tests: written 0600 as the loader wants, for the simulator or for no ZVM.

* :func:`write_config` writes any content (a dict as JSON, or text or bytes as is), and
  :func:`load_written_settings` loads what it wrote;
* :func:`write_sim_config` logs in to a running simulator;
* :func:`write_offline_config` points at a ZVM nobody answers, with the vSphere
  example catalog: for tests that parse, install or check a config and never
  reach the ZVM.

Top-level sections passed as keyword arguments add to or replace the defaults.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zerto_rewind.config import Settings, load_settings
from zerto_rewind.sim import SimServer

__all__ = [
    "OFFLINE_ZVM",
    "VSPHERE_CATALOG",
    "load_written_settings",
    "ready_zvms",
    "sim_zvm",
    "write_config",
    "write_estate_config",
    "write_offline_config",
    "write_ready_estate_config",
    "write_sim_config",
]

# Nothing listens on port 9 (discard): a call that does reach the ZVM fails at once.
OFFLINE_ZVM: dict[str, Any] = {
    "url": "https://127.0.0.1:9",
    "username": "admin",
    "password_env": "ZPW",
}
# hooks/settings.example.json's catalog: list and get read-only, power_off names `vm`.
VSPHERE_CATALOG: dict[str, Any] = {
    "read_only_tools": ["mcp__vsphere__list_vms", "mcp__vsphere__get_*"],
    "tools": {"mcp__vsphere__power_off_vm": {"vm_arg": "vm"}},
}


def write_config(
    directory: Path, data: Any, *, name: str = "config.json", mode: int = 0o600
) -> Path:
    """Write ``data`` (JSON-encoded unless already text or bytes) to ``directory/name``.

    The file is created 0600, never wider even for a moment; ``mode`` is applied
    after, so a test can write a config that is too open on purpose.
    """
    path = directory / name
    if isinstance(data, bytes):
        payload = data
    else:
        payload = (data if isinstance(data, str) else json.dumps(data)).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(payload)
    path.chmod(mode)
    return path


def load_written_settings(directory: Path, data: Any, *, name: str = "config.json") -> Settings:
    """Write ``data`` as a 0600 config in ``directory`` and load it, ``$HOME`` there too."""
    path = write_config(directory, data, name=name)
    return load_settings({"HOME": str(directory)}, path=str(path))


def sim_zvm(sim: SimServer, *, secret_env: str | None = None) -> dict[str, Any]:
    """The ``zvm`` section for the simulator's password login: inline, or read from $secret_env."""
    creds = sim.credentials
    zvm: dict[str, Any] = {"url": sim.url, "username": creds["username"]}
    if secret_env:
        zvm["password_env"] = secret_env
    else:
        zvm["password"] = creds["password"]
    zvm["ca_bundle"] = sim.ca_bundle
    return zvm


def write_sim_config(
    sim: SimServer,
    directory: Path,
    *,
    secret_env: str | None = None,
    name: str = "config.json",
    **sections: Any,
) -> Path:
    """A 0600 config that logs in to ``sim`` (see :func:`sim_zvm`), state in ``directory/state``."""
    data = {"zvm": sim_zvm(sim, secret_env=secret_env), "state_dir": str(directory / "state")}
    data.update(sections)
    return write_config(directory, data, name=name)


def write_estate_config(
    sims: Mapping[str, SimServer],
    directory: Path,
    *,
    zvm_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    name: str = "config.json",
    **sections: Any,
) -> Path:
    """A 0600 config with one ``zvms`` entry per site's simulator (``zvm_overrides`` change a
    site's entry, e.g. a wrong password or another site's CA), state in ``directory/state``."""
    zvms = {
        site: {**sim_zvm(sim), **(zvm_overrides or {}).get(site, {})} for site, sim in sims.items()
    }
    data = {"zvms": zvms, "state_dir": str(directory / "state")}
    data.update(sections)
    return write_config(directory, data, name=name)


def ready_zvms(ready: Mapping[str, Any], sites: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``zvms`` section for a multi-site simulator's ready file (or ``SimServer.credentials``):
    one password login per site, in estate order (``sites``: only those)."""
    chosen = list(ready["sites"]) if sites is None else list(sites)
    return {
        site: {
            "url": ready["sites"][site]["url"],
            "username": ready["sites"][site]["username"],
            "password": ready["sites"][site]["password"],
            "ca_bundle": ready["sites"][site]["ca_bundle"],
        }
        for site in chosen
    }


def write_ready_estate_config(
    ready: Mapping[str, Any],
    directory: Path,
    *,
    sites: Sequence[str] | None = None,
    name: str = "config.json",
    **sections: Any,
) -> Path:
    """A 0600 config whose ``zvms`` are the multi-site simulator's sites (see
    :func:`ready_zvms`), state in ``directory/state``."""
    data = {"zvms": ready_zvms(ready, sites), "state_dir": str(directory / "state")}
    data.update(sections)
    return write_config(directory, data, name=name)


def write_offline_config(
    directory: Path, *, name: str = "zerto-rewind.json", **sections: Any
) -> Path:
    """A valid 0600 config with the vSphere catalog whose ZVM nobody answers (secret in $ZPW)."""
    data = {"zvm": OFFLINE_ZVM, **VSPHERE_CATALOG}
    data.update(sections)
    return write_config(directory, data, name=name)
