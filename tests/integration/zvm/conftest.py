"""Fixtures for the ZVM client's integration tests: a real TLS simulator per test."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from zvm_sim_helpers import FAST_CADENCES, sim_settings, write_config

from zerto_rewind.sim import SimConfig, SimServer
from zerto_rewind.zvm import TokenCache, ZvmClient


@pytest.fixture
def sim() -> Iterator[SimServer]:
    """An in-process simulator on a free port, over TLS, with fast cadences."""
    config = SimConfig(
        cadences=dict(FAST_CADENCES), jitter=0.0, tag_lag_s=0.3, task_duration_s=0.2, seed=7
    )
    with SimServer(config) as server:
        yield server


@pytest.fixture
def control(sim: SimServer) -> Iterator[httpx.Client]:
    """An httpx client for the simulator's /_sim control plane."""
    assert sim.ca_bundle is not None
    verify = ssl.create_default_context(cafile=sim.ca_bundle)
    with httpx.Client(base_url=sim.url, verify=verify, timeout=5.0) as client:
        yield client


@pytest.fixture
def state_dir(tmp_path: Path) -> str:
    """A private state directory for the token cache."""
    return str(tmp_path / "state")


@pytest.fixture
def client(sim: SimServer, state_dir: str) -> Iterator[ZvmClient]:
    """A ZvmClient for the simulator with a file token cache and quick retries."""
    settings = sim_settings(sim)
    with ZvmClient(settings, token_cache=TokenCache(state_dir), backoff_s=0.05) as c:
        yield c


@pytest.fixture
def cli_env(sim: SimServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the CLI at the simulator through ZERTO_REWIND_CONFIG."""
    path = write_config(sim, tmp_path)
    monkeypatch.setenv("ZERTO_REWIND_CONFIG", str(path))
    monkeypatch.delenv("ZERTO_REWIND_STATE_DIR", raising=False)
    return path
