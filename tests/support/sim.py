"""The suite's simulator: one configuration, one fixture factory, settings that trust it.

A folder's ``conftest.py`` makes its ``sim`` fixture with :func:`sim_fixture`::

    from support.sim import sim_fixture

    sim = sim_fixture()                      # a fresh simulator per test
    sim = sim_fixture(scope="module", ...)   # one per module, SimConfig fields overridden
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.config import ZvmSettings
from zerto_rewind.sim import SimConfig, SimServer
from zerto_rewind.testing import FAST_CADENCES

__all__ = ["PAIRED_ESTATES", "estate_sims", "sim_config", "sim_fixture", "sim_settings"]


def sim_config(**overrides: Any) -> SimConfig:
    """FAST_CADENCES, no jitter (journal boundaries are exact), quick tags and tasks, seed 7.

    ``overrides`` replace :class:`SimConfig` fields.
    """
    values: dict[str, Any] = {
        "cadences": dict(FAST_CADENCES),
        "jitter": 0.0,
        "tag_lag_s": 0.3,
        "task_duration_s": 0.2,
        "seed": 7,
    }
    values.update(overrides)
    return SimConfig(**values)


def sim_fixture(
    *, scope: str = "function", config: Callable[[], SimConfig] | None = None, **overrides: Any
) -> Any:
    """A pytest fixture named ``sim``: a :class:`SimServer` on a free port, over TLS.

    It runs :func:`sim_config` with ``overrides``, or ``config()`` when given, and
    stops the simulator after the test (or the module, with ``scope="module"``).
    """

    @pytest.fixture(scope=scope, name="sim")  # type: ignore[call-overload]
    def sim() -> Iterator[SimServer]:
        """An in-process simulator on a free port, over TLS, with fast cadences."""
        with SimServer(config() if config else sim_config(**overrides)) as server:
            yield server

    return sim


def sim_settings(sim: SimServer, *, grant: str = "password", **overrides: Any) -> ZvmSettings:
    """ZvmSettings pointing at the simulator, trusting its CA (``grant``: password or client)."""
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


# Two sites that know each other: hq protects web-vpg (web-01) to dr; dr protects
# dr-vpg (db-01) to hq; hq also protects hq-only (app-01, app-02) to an AWS site no ZVM of the
# estate is. Each site's backend sees the estate from its own side, as its ZVM would:
# the same VPG, site and VM identifiers, protected on one side, recovering on the other.
def _vpg(name: str, protected: str, recovery: str, *vms: tuple[str, str]) -> dict[str, Any]:
    kind = "aws" if protected == "aws" else "vcenter"
    return {
        "name": name, "site_kind": kind, "protected_site": protected, "recovery_site": recovery,
        "vms": [{"name": vm, "vcenter_id": moref} for vm, moref in vms],
    }  # fmt: skip


_WEB = _vpg("web-vpg", "hq", "dr", ("web-01", "vm-11"))
_DB = _vpg("dr-vpg", "dr", "hq", ("db-01", "vm-21"))
_HQ: dict[str, Any] = {
    "local_site": {"name": "hq", "kind": "vcenter"},
    "sites": [{"name": "dr", "kind": "vcenter"}, {"name": "aws", "kind": "aws"}],
    "vpgs": [
        _WEB,
        _DB,
        _vpg("hq-only", "hq", "aws", ("app-01", "vm-12"), ("app-02", "vm-13")),
        _vpg("from-aws", "aws", "hq", ("cloud-01", "vm-31")),
    ],
}
_DR: dict[str, Any] = {
    "local_site": {"name": "dr", "kind": "vcenter"},
    "sites": [{"name": "hq", "kind": "vcenter"}],
    "vpgs": [_WEB, _DB, _vpg("dr-own", "dr", "hq", ("web-01b", "vm-22"))],
}
PAIRED_ESTATES: dict[str, dict[str, Any]] = {"hq": _HQ, "dr": _DR}


@contextmanager
def estate_sims(
    directory: Path, estates: Mapping[str, Mapping[str, Any]] | None = None, **overrides: Any
) -> Iterator[dict[str, SimServer]]:
    """One simulator per site (default :data:`PAIRED_ESTATES`), each over TLS with its own
    CA, credentials and estate file; all stopped on exit.

    Until the simulator runs paired sites itself, each site's ZVM is its own process-less
    server: a tag on one is not in the other's journal, which the guard never needs (a
    VPG is tagged and confirmed on one ZVM).
    """
    estates = estates or PAIRED_ESTATES
    with ExitStack() as stack:
        sims: dict[str, SimServer] = {}
        for site, estate in estates.items():
            path = directory / f"estate-{site}.json"
            path.write_text(json.dumps(estate))
            sims[site] = stack.enter_context(SimServer(sim_config(estate_file=path, **overrides)))
        yield sims
