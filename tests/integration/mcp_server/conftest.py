"""Fixtures for the MCP server's tests: a simulator per test and a config pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import sim_config, write_config

from zerto_rewind.sim import SimServer


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio."""
    return "asyncio"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    """An in-process simulator on a free port, over TLS, with fast cadences."""
    with SimServer(sim_config()) as server:
        yield server


@pytest.fixture
def config(sim: SimServer, tmp_path: Path) -> Path:
    """A config for the simulator with live recovery disabled."""
    return write_config(sim, tmp_path)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A minimal environment: no ZERTO_* variables from the developer's shell."""
    return {"HOME": str(tmp_path)}
