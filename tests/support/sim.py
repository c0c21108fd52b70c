"""The suite's simulator: one configuration, one fixture factory, settings that trust it.

A folder's ``conftest.py`` makes its ``sim`` fixture with :func:`sim_fixture`::

    from support.sim import sim_fixture

    sim = sim_fixture()                      # a fresh simulator per test
    sim = sim_fixture(scope="module", ...)   # one per module, SimConfig fields overridden
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zerto_rewind.config import ZvmSettings
from zerto_rewind.sim import SimConfig, SimServer
from zerto_rewind.testing import FAST_CADENCES

__all__ = ["sim_config", "sim_fixture", "sim_settings"]


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
