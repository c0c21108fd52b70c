"""The guard's shared state in a real Redis (state_redis.py): the file state's semantics, shared."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from support.redis_server import RedisServer
from zerto_rewind.core.record_mac import RecordMac
from zerto_rewind.core.state import GuardStateLike, TagRecord, VpgRecord
from zerto_rewind.core.state_redis import RedisGuardState
from zerto_rewind.core.state_store import open_state
from zerto_rewind.errors import StateError
from zerto_rewind.zvm.token_redis import RedisTokenCache

# The replicas' shared MAC key, as each reads it from its state directory.
MAC = RecordMac(b"k" * 32)


def a_tag(name: str = "zr t web01") -> TagRecord:
    return TagRecord(name=name, requested_at=1.0, expected_at=6.0, overdue_at=66.0)


def test_open_state_picks_redis_for_a_url(redis_url: str, tmp_path: Path) -> None:
    """A state URL gives the Redis state, with its token cache beside it; it is a GuardStateLike."""
    state = open_state(redis_url, str(tmp_path / "unused"))
    assert isinstance(state, RedisGuardState)
    assert isinstance(state, GuardStateLike)
    assert isinstance(state.token_cache(), RedisTokenCache)
    state.check()
    assert not (tmp_path / "unused").exists(), "the Redis state writes nothing on disk"


def test_vpg_record_round_trip_between_replicas(redis_url: str) -> None:
    """What one replica's locked block changes, another replica reads back."""
    one, two = RedisGuardState(redis_url, mac=MAC), RedisGuardState(redis_url, mac=MAC)
    with one.vpg("vpg-1") as record:
        assert record == VpgRecord("vpg-1")
        record.vpg_name = "VPG One"
        record.tag = a_tag()
        record.cadence_s, record.cadence_source = 5.0, "observed"
        record.history.append({"name": "old"})
    with two.vpg("vpg-1") as record:
        assert record.vpg_name == "VPG One"
        assert record.tag == a_tag()
        assert (record.cadence_s, record.cadence_source) == (5.0, "observed")
        assert record.history == [{"name": "old"}]
    assert two.peek_vpg("vpg-1").tag == a_tag()
    assert two.peek_vpg("vpg-1").vpg_name == "VPG One"


def test_a_failed_block_saves_nothing(redis_url: str) -> None:
    """An exception inside the block leaves the record as it was, and frees the lock."""
    state = RedisGuardState(redis_url, mac=MAC, lock_timeout_s=0.5)

    def fail_inside() -> None:
        with state.vpg("vpg-1") as record:
            record.tag = a_tag()
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail_inside()
    assert state.peek_vpg("vpg-1").tag is None
    with state.vpg("vpg-1"):
        pass  # not left locked


def test_prefixes_keep_guards_apart(redis_url: str) -> None:
    """Two prefixes on one Redis are two separate guards."""
    ours, theirs = (
        RedisGuardState(redis_url, mac=MAC),
        RedisGuardState(redis_url, mac=MAC, prefix="other:"),
    )
    with ours.vpg("vpg-1") as record:
        record.tag = a_tag()
    assert theirs.peek_vpg("vpg-1").tag is None
    assert theirs.peek_vpg("vpg-1") == VpgRecord("vpg-1")
    with redis.Redis.from_url(redis_url) as raw:
        assert {k.decode() for k in raw.keys("*")} == {
            "zerto-rewind:vpg:vpg-1",
            "zerto-rewind:vpgs",
        }


def test_odd_vpg_ids_are_kept(redis_url: str) -> None:
    """An id with characters unfit for a key name is hashed into the key, and kept in the record."""
    state = RedisGuardState(redis_url, mac=MAC)
    odd = "vpg/with spaces:*?"
    with state.vpg(odd) as record:
        record.vpg_name = "odd"
    assert state.peek_vpg(odd).vpg_name == "odd"
    assert RedisGuardState(redis_url, mac=MAC).peek_vpg(odd).vpg_name == "odd"
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.smembers("zerto-rewind:vpgs") == {odd.encode()}


def test_a_damaged_record_starts_over(redis_url: str) -> None:
    """A value that is not a record reads as a fresh record, and the next write replaces it."""
    state = RedisGuardState(redis_url, mac=MAC)
    with redis.Redis.from_url(redis_url) as raw:
        raw.set("zerto-rewind:vpg:vpg-1", b"{not json")
    with state.vpg("vpg-1") as record:
        assert record == VpgRecord("vpg-1")
        record.vpg_name = "again"
    assert state.peek_vpg("vpg-1").vpg_name == "again"


def test_two_replicas_serialize_read_modify_write(redis_url: str) -> None:
    """Threads on two replicas increment one counter under the VPG's lock: no update is lost."""
    replicas = [RedisGuardState(redis_url, mac=MAC), RedisGuardState(redis_url, mac=MAC)]
    inside = 0
    most_inside = 0
    guard = threading.Lock()
    start = threading.Barrier(8)

    def bump(state: RedisGuardState) -> None:
        nonlocal inside, most_inside
        start.wait()
        for _ in range(5):
            with state.vpg("vpg-1") as record:
                with guard:
                    inside += 1
                    most_inside = max(most_inside, inside)
                seen = record.allowed_since_landing
                time.sleep(0.002)  # widen the window a lost update would need
                record.allowed_since_landing = seen + 1
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=bump, args=(replicas[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most_inside == 1
    assert replicas[0].peek_vpg("vpg-1").allowed_since_landing == 40


def test_lock_timeout_is_a_state_error(redis_url: str) -> None:
    """A lock another replica holds past the timeout: StateError naming the VPG and the Redis."""
    holder, waiter = (
        RedisGuardState(redis_url, mac=MAC),
        RedisGuardState(redis_url, mac=MAC, lock_timeout_s=0.3),
    )
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.vpg("vpg-1"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(5)
        started = time.monotonic()
        with pytest.raises(StateError) as caught, waiter.vpg("vpg-1"):
            pass
        assert time.monotonic() - started < 2.0
    finally:
        release.set()
        thread.join()
    message = str(caught.value)
    assert "vpg-1" in message
    assert redis_url in message
    assert "timed out" in message


def test_a_dead_replicas_lock_expires(redis_url: str) -> None:
    """A lock whose holder died (never released) frees itself when its lease runs out."""
    with redis.Redis.from_url(redis_url) as raw:
        dead = raw.lock("zerto-rewind:lock:vpg:vpg-1", timeout=0.5, thread_local=False)
        assert dead.acquire(blocking=False)
    state = RedisGuardState(redis_url, mac=MAC, lock_timeout_s=5.0)
    started = time.monotonic()
    with state.vpg("vpg-1") as record:
        record.vpg_name = "taken over"
    assert 0.2 < time.monotonic() - started < 3.0
    assert state.peek_vpg("vpg-1").vpg_name == "taken over"


def test_a_long_block_keeps_its_lock(redis_url: str) -> None:
    """A block that runs longer than the lease keeps the lock: the lease is renewed meanwhile."""
    slow = RedisGuardState(redis_url, mac=MAC, lock_lease_s=0.6)
    other = RedisGuardState(redis_url, mac=MAC, lock_timeout_s=0.2)
    entered = threading.Event()
    outcome: list[BaseException | None] = []

    def long_block() -> None:
        try:
            with slow.vpg("vpg-1") as record:
                entered.set()
                time.sleep(2.0)  # over three leases
                record.vpg_name = "slow"
            outcome.append(None)
        except BaseException as exc:  # reported to the test thread below
            outcome.append(exc)

    thread = threading.Thread(target=long_block)
    thread.start()
    assert entered.wait(5)
    for _ in range(3):
        time.sleep(0.35)
        with pytest.raises(StateError, match="timed out"), other.vpg("vpg-1"):
            pass
    thread.join()
    assert outcome == [None]
    assert other.peek_vpg("vpg-1").vpg_name == "slow"


def test_a_lost_lock_refuses_the_write(redis_url: str) -> None:
    """If the lock was lost meanwhile (lease gone, another replica in), the write is refused."""
    state = RedisGuardState(redis_url, mac=MAC)

    def lose_the_lock_inside() -> None:
        with state.vpg("vpg-1") as record, redis.Redis.from_url(redis_url) as raw:
            raw.delete("zerto-rewind:lock:vpg:vpg-1")  # as if its lease had run out
            record.vpg_name = "late"

    with pytest.raises(StateError, match="lost the lock on VPG vpg-1"):
        lose_the_lock_inside()
    assert state.peek_vpg("vpg-1").vpg_name == ""


def test_cache_respects_the_readers_ttl(redis_url: str) -> None:
    """A cached value is served while younger than the reader's TTL, and expires in Redis too."""
    one, two = RedisGuardState(redis_url, mac=MAC), RedisGuardState(redis_url, mac=MAC)
    one.store("vms", "https://zvm|web-01", [["vm-1", "vpg-1"]])
    assert two.cached("vms", "https://zvm|web-01", ttl_s=60) == [["vm-1", "vpg-1"]]
    assert two.cached("vms", "https://zvm|web-02", ttl_s=60) is None
    assert two.cached("entitytypes", "https://zvm|web-01", ttl_s=60) is None
    time.sleep(0.05)
    assert two.cached("vms", "https://zvm|web-01", ttl_s=0.01) is None
    with redis.Redis.from_url(redis_url) as raw:
        (key,) = raw.keys("zerto-rewind:cache:vms:*")
        assert 0 < raw.ttl(key) <= 2 * 86_400


def test_unreachable_redis_is_a_state_error_without_the_password(tmp_path: Path) -> None:
    """Redis gone: every operation raises StateError naming the server, never the password."""
    with RedisServer(tmp_path, password="s3cret-pw") as server:
        state = RedisGuardState(server.url, mac=MAC)
        with state.vpg("vpg-1") as record:
            record.vpg_name = "before"
        wrong = RedisGuardState(server.url.replace("s3cret-pw", "wrong-pw"), mac=MAC)
        with pytest.raises(StateError) as refused:
            wrong.peek_vpg("vpg-1")
    assert "refused the credentials" in str(refused.value)
    assert "wrong-pw" not in str(refused.value)
    for attempt in (
        lambda: state.peek_vpg("vpg-1"),
        lambda: state.cached("vms", "k", 60),
        lambda: state.store("vms", "k", []),
        state.check,
    ):
        with pytest.raises(StateError) as caught:
            attempt()
        message = str(caught.value)
        assert f"the shared state at redis://127.0.0.1:{server.port}/0 is unreachable" in message
        assert "s3cret-pw" not in message
    with pytest.raises(StateError, match="unreachable"), state.vpg("vpg-1"):
        pass
