"""Fixtures for the MCP server's tests: a simulator per test and a config pointing at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.mcp_server.mcp_helpers import SIM_CADENCES, write_mcp_config
from support.sim import sim_fixture
from zerto_rewind.sim import SimServer


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio."""
    return "asyncio"


sim = sim_fixture(cadences=SIM_CADENCES)


@pytest.fixture
def config(sim: SimServer, tmp_path: Path) -> Path:
    """A config for the simulator with live recovery disabled."""
    return write_mcp_config(sim, tmp_path)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A minimal environment: no ZERTO_* variables from the developer's shell."""
    return {"HOME": str(tmp_path)}
