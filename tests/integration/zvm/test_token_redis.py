"""The ZVM token cache in a real Redis (token_redis.py): shared by replicas, never shown."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from support.redis_server import RedisServer
from support.sim import sim_settings
from zerto_rewind.errors import StateError, ZvmTimeout
from zerto_rewind.sim import SimServer
from zerto_rewind.zvm.auth import CachedToken, TokenCache
from zerto_rewind.zvm.client import ZvmClient
from zerto_rewind.zvm.token_redis import RedisTokenCache
from zerto_rewind.zvm.token_store import open_token_cache

KEY = "a" * 64  # an identity key is a sha256 hex digest


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for this module's tests."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The module's Redis, emptied for this test."""
    redis_server.flush()
    return redis_server.url


def token(now: float, value: str = "tok-secret-1", lifetime_s: float = 300.0) -> CachedToken:
    return CachedToken.issued(value, "Bearer", lifetime_s, now)


def test_open_token_cache_picks_the_backend(redis_url: str, tmp_path: Path) -> None:
    """A state URL gives the Redis cache; none gives the files under the state directory."""
    assert isinstance(open_token_cache(redis_url, str(tmp_path / "a")), RedisTokenCache)
    assert isinstance(open_token_cache(None, str(tmp_path / "b")), TokenCache)
    assert not (tmp_path / "a").exists()


def test_round_trip_between_replicas_with_a_redis_expiry(redis_url: str) -> None:
    """One replica stores, another loads; Redis forgets the token when it expires."""
    now = time.time()
    one, two = RedisTokenCache(redis_url), RedisTokenCache(redis_url)
    one.store(KEY, token(now))
    assert two.load(KEY) == token(now)
    with redis.Redis.from_url(redis_url) as raw:
        assert 290 <= raw.ttl(f"zerto-rewind:token:{KEY}") <= 300
        assert raw.keys("*") == [f"zerto-rewind:token:{KEY}".encode()]


def test_a_token_past_its_refresh_time_is_not_served(redis_url: str) -> None:
    """A token near its expiry reads as absent, as in the file cache."""
    clock = [1_000_000.0]
    cache = RedisTokenCache(redis_url, wall_clock=lambda: clock[0])
    cache.store(KEY, token(clock[0], lifetime_s=100.0))  # refreshed 10 s before expiry
    clock[0] += 89.0
    assert cache.load(KEY) is not None
    clock[0] += 2.0
    assert cache.load(KEY) is None


def test_drop_removes_only_the_rejected_token(redis_url: str) -> None:
    """Dropping a token another replica already replaced keeps the new one."""
    now = time.time()
    cache = RedisTokenCache(redis_url)
    cache.store(KEY, token(now, "new-token"))
    with cache.lock(KEY, 1.0):
        cache.drop(KEY, "old-token")
    assert cache.load(KEY) == token(now, "new-token")
    with cache.lock(KEY, 1.0):
        cache.drop(KEY, "new-token")
    assert cache.load(KEY) is None


def test_a_damaged_entry_reads_as_absent(redis_url: str) -> None:
    """Something that is not a token under the key: no token, fetch a new one."""
    with redis.Redis.from_url(redis_url) as raw:
        raw.set(f"zerto-rewind:token:{KEY}", b"\xff not json")
    assert RedisTokenCache(redis_url).load(KEY) is None


def test_the_lock_times_out_as_zvm_timeout(redis_url: str) -> None:
    """While another replica fetches a token, a waiter gives up at its timeout with ZvmTimeout."""
    holder, waiter = RedisTokenCache(redis_url), RedisTokenCache(redis_url)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.lock(KEY, 1.0):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(5)
        with pytest.raises(ZvmTimeout, match="another replica"), waiter.lock(KEY, 0.2):
            pass
    finally:
        release.set()
        thread.join()
    with waiter.lock(KEY, 1.0):
        pass  # free again


def test_replicas_fetch_one_token_between_them(redis_url: str) -> None:
    """Two ZVM clients (two replicas) on one Redis, many threads: one token request in all."""
    with SimServer() as sim:
        settings = sim_settings(sim)
        clients = [
            ZvmClient(settings, token_cache=RedisTokenCache(redis_url)),
            ZvmClient(settings, token_cache=RedisTokenCache(redis_url)),
        ]
        start = threading.Barrier(6)
        errors: list[BaseException] = []

        def work(client: ZvmClient) -> None:
            start.wait()
            try:
                client.find_vms("jp-ubuntu", deadline=time.monotonic() + 20)
            except BaseException as exc:  # reported to the test thread below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(clients[i % 2],)) for i in range(6)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            for client in clients:
                client.close()
        assert sim.ca_bundle is not None
        verify = ssl.create_default_context(cafile=sim.ca_bundle)
        with httpx.Client(base_url=sim.url, verify=verify) as control:
            stats = control.get("/_sim/stats").json()
    assert errors == []
    assert stats["token_requests"]["total"] == 1


def test_errors_never_show_the_token_or_the_password(tmp_path: Path) -> None:
    """Redis gone: StateError names the server; neither the token nor the password appears."""
    with RedisServer(tmp_path, password="s3cret-pw") as server:
        cache = RedisTokenCache(server.url)
        cache.store(KEY, token(time.time(), "tok-secret-1"))
    for attempt in (
        lambda: cache.load(KEY),
        lambda: cache.store(KEY, token(time.time(), "tok-secret-2")),
        lambda: cache.drop(KEY, "tok-secret-1"),
    ):
        with pytest.raises(StateError) as caught:
            attempt()
        message = str(caught.value)
        assert f"redis://127.0.0.1:{server.port}/0 is unreachable" in message
        for secret in ("s3cret-pw", "tok-secret-1", "tok-secret-2"):
            assert secret not in message
    with pytest.raises(StateError, match="unreachable"), cache.lock(KEY, 0.5):
        pass
