"""Fixtures for the core's integration tests: a private Redis per test module, and the
approval stores (files, Redis) one behaviour suite runs on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.core.approval_stores_helpers import MAC, Stores
from support.fakes import FakeClock
from support.redis_server import RedisServer
from zerto_rewind.core.approvals import FileApprovalStore
from zerto_rewind.core.approvals_redis import RedisApprovalStore


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for this module's tests, stopped when the module is done."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The module's Redis, emptied for this test."""
    redis_server.flush()
    return redis_server.url


@pytest.fixture(params=["file", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Each approval store in turn (files, then Redis), with replicas on the same state."""
    clock = FakeClock(time.time())
    if request.param == "file":
        state_dir = str(tmp_path / "state")

        def make() -> Any:
            return FileApprovalStore(state_dir, clock=clock)
    else:
        url = request.getfixturevalue("redis_url")

        def make() -> Any:
            return RedisApprovalStore(url, mac=MAC, clock=clock)

    made = Stores(request.param, make, clock)
    yield made
    made.close()
