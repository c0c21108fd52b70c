"""Fixtures for the ZVM client's integration tests: a real TLS simulator per test."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.config import write_sim_config
from support.sim import sim_fixture, sim_settings
from zerto_rewind.sim import SimServer
from zerto_rewind.testing import FAST_CADENCES
from zerto_rewind.zvm import TokenCache, ZvmClient

sim = sim_fixture()


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
    path = write_sim_config(sim, tmp_path, guard={"site_cadence_s": FAST_CADENCES})
    monkeypatch.setenv("ZERTO_REWIND_CONFIG", str(path))
    monkeypatch.delenv("ZERTO_REWIND_STATE_DIR", raising=False)
    return path
