"""Fixtures for the core's integration tests: a private Redis per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.redis_server import RedisServer


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
