"""Helpers for the ZVM client's integration tests against the simulator."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from zerto_rewind.config import ZvmSettings
from zerto_rewind.sim import SimServer

# Short cadences and lags keep the suite fast; jitter 0 makes boundaries exact.
FAST_CADENCES = {"vcenter": 1.0, "hyperv": 1.0, "vcd": 1.0, "azure": 2.0, "aws": 3.0}


def sim_settings(sim: SimServer, *, grant: str = "password", **overrides: Any) -> ZvmSettings:
    """ZvmSettings pointing at the simulator, trusting its CA."""
    creds = sim.credentials
    values: dict[str, Any] = {"url": sim.url, "ca_bundle": sim.ca_bundle}
    if grant == "password":
        values.update(
            grant="password",
            client_id="zerto-client",
            username=creds["username"],
            secret_source=("inline", creds["password"]),
        )
    else:
        values.update(
            grant="client_credentials",
            client_id=creds["client_id"],
            username=None,
            secret_source=("inline", creds["client_secret"]),
        )
    values.update(overrides)
    return ZvmSettings(**values)


def write_config(sim: SimServer, directory: Path) -> Path:
    """A 0600 config file for the CLI, using the simulator's password credentials."""
    creds = sim.credentials
    config = {
        "zvm": {
            "url": sim.url,
            "username": creds["username"],
            "password": creds["password"],
            "ca_bundle": sim.ca_bundle,
        },
        "guard": {"site_cadence_s": FAST_CADENCES},
        "state_dir": str(directory / "state"),
    }
    path = directory / "config.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(config, fh)
    return path
