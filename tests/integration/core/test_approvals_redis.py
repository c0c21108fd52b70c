"""Approval requests in a real Redis (approvals_redis.py): what is particular to Redis.

The behaviour both stores share (open, join, decide, use once, expiry, the sweep,
races between replicas) is one suite run over both: test_approval_stores.py.
Here: the layout and expiries of the keys, transactions that lose a race and
are run again, damaged data, and a Redis that is down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from integration.core.approval_stores_helpers import EXPIRES_S, MAC, a_request
from support.redis_server import RedisServer
from zerto_rewind.core.approvals import (
    RETENTION_S,
    ApprovalError,
    ApprovalRequest,
)
from zerto_rewind.core.approvals_redis import RedisApprovalStore
from zerto_rewind.core.state_store import open_approvals
from zerto_rewind.errors import StateError


class HookedClock:
    """A fixed wall time that runs a hook on its n-th reading: another replica acting meanwhile.

    Each store reads its clock inside a transaction after the reads and before the
    writes, so a hook that writes the watched keys there makes that transaction lose.
    """

    def __init__(self, now: float) -> None:
        self.now = now
        self.calls = 0
        self._hook: Callable[[], object] | None = None
        self._at = 0
        self._every = False

    def arm(self, hook: Callable[[], object], *, at: int = 1, every: bool = False) -> None:
        """Run ``hook`` on the ``at``-th reading from now (and on each after it, if ``every``)."""
        self._hook, self._at, self._every = hook, self.calls + at, every

    def disarm(self) -> None:
        self._hook = None

    def __call__(self) -> float:
        self.calls += 1
        if self._hook is not None and self.calls >= self._at:
            hook = self._hook
            if not self._every:
                self._hook = None
            hook()
        return self.now


def keys(url: str) -> set[str]:
    with redis.Redis.from_url(url) as raw:
        return {k.decode() for k in raw.keys("*")}


def test_open_approvals_picks_redis_for_a_url(redis_url: str, tmp_path: Path) -> None:
    store = open_approvals(redis_url, str(tmp_path / "unused"), prefix="zr-test:")
    assert isinstance(store, RedisApprovalStore)
    assert store.prefix == "zr-test:"
    store.check()
    store.open_request(a_request(time.time()))
    on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert on_disk == {"unused/keys/state-mac.key"}, "on disk, the Redis store keeps its key only"
    store.close()


def test_key_layout_and_expiries(redis_url: str) -> None:
    """One JSON key per request, the call index, the ids by creation; Redis drops them later."""
    store = RedisApprovalStore(redis_url, mac=MAC)
    now = time.time()
    request, _ = store.open_request(a_request(now))
    found = keys(redis_url)
    req_key = f"zerto-rewind:approvals:req:{request.id}"
    (call_key,) = (k for k in found if k.startswith("zerto-rewind:approvals:call:"))
    (mine,) = (k for k in found if k.startswith("zerto-rewind:approvals:open:"))
    everyone = "zerto-rewind:approvals:open"
    assert found == {req_key, call_key, "zerto-rewind:approvals:ids", mine, everyone}
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.get(call_key) == request.id.encode()
        assert raw.zscore("zerto-rewind:approvals:ids", request.id) == pytest.approx(now)
        # Live: kept past its expiry (the sweep marks it), then for the retention.
        assert EXPIRES_S + RETENTION_S - 5 <= raw.ttl(req_key) <= EXPIRES_S + RETENTION_S + 1
        store.decide(request.id, False, "unix:alice")
        # Decided: kept for the retention, as the file store keeps the file.
        assert RETENTION_S - 5 <= raw.ttl(req_key) <= RETENTION_S + 1
        assert raw.ttl(call_key) > 0
        # The open sets (the caps) hold the id by its expiry, and go soon after it.
        for key in (mine, everyone):
            assert raw.zscore(key, request.id) == pytest.approx(request.expires)
            assert 0 < raw.ttl(key) <= EXPIRES_S + 61
        assert "s3cr3t" not in raw.get(req_key).decode()


def test_no_argument_value_is_stored(redis_url: str) -> None:
    store = RedisApprovalStore(redis_url, mac=MAC)
    store.open_request(a_request(time.time(), args={"vm": "web-01", "password": "s3cr3t-value"}))
    with redis.Redis.from_url(redis_url) as raw:
        for key in raw.keys("*"):
            if raw.type(key) == b"string":
                assert b"s3cr3t-value" not in raw.get(key)


def test_prefixes_keep_stores_apart(redis_url: str) -> None:
    ours, theirs = (
        RedisApprovalStore(redis_url, mac=MAC),
        RedisApprovalStore(redis_url, mac=MAC, prefix="other:"),
    )
    request, _ = ours.open_request(a_request(time.time()))
    assert theirs.pending() == []
    assert theirs.get(request.id) is None
    _, created = theirs.open_request(a_request(time.time()))
    assert created, "another prefix is another guard: it does not join our request"
    assert {k.split(":", 1)[0] for k in keys(redis_url)} == {"zerto-rewind", "other"}


# --------------------------------------------------------------------------- lost races


def test_open_that_loses_the_race_joins_the_winner(redis_url: str) -> None:
    now = time.time()
    clock = HookedClock(now)
    ours, theirs = (
        RedisApprovalStore(redis_url, mac=MAC, clock=clock),
        RedisApprovalStore(redis_url, mac=MAC),
    )
    winner: list[ApprovalRequest] = []
    clock.arm(lambda: winner.append(theirs.open_request(a_request(now))[0]))
    request, created = ours.open_request(a_request(now))
    assert not created
    assert request.id == winner[0].id
    assert clock.calls == 2, "the transaction ran again after losing"
    assert [r.id for r in ours.pending()] == [request.id]


def test_use_that_loses_the_race_gets_nothing(redis_url: str) -> None:
    now = time.time()
    clock = HookedClock(now)
    ours, theirs = (
        RedisApprovalStore(redis_url, mac=MAC, clock=clock),
        RedisApprovalStore(redis_url, mac=MAC),
    )
    request, _ = theirs.open_request(a_request(now))
    theirs.decide(request.id, True, "unix:alice")
    call = request.principal, request.tool, request.args_digest
    used: list[ApprovalRequest | None] = []
    clock.arm(lambda: used.append(theirs.consume(*call)))
    assert ours.consume(*call) is None
    assert clock.calls == 2, "the transaction ran again after losing"
    assert used[0] is not None
    assert used[0].id == request.id
    current = ours.get(request.id)
    assert current is not None
    assert (current.state, current.used_at) == ("used", used[0].used_at)


def test_decision_that_loses_the_race_is_refused(redis_url: str) -> None:
    now = time.time()
    clock = HookedClock(now)
    ours, theirs = (
        RedisApprovalStore(redis_url, mac=MAC, clock=clock),
        RedisApprovalStore(redis_url, mac=MAC),
    )
    request, _ = theirs.open_request(a_request(now))
    clock.arm(lambda: theirs.decide(request.id, False, "unix:bob"))
    with pytest.raises(ApprovalError, match="is denied, not pending"):
        ours.decide(request.id, True, "unix:alice")
    current = ours.get(request.id)
    assert current is not None
    assert (current.state, current.decided_by) == ("denied", "unix:bob")


def test_sweep_that_loses_the_race_reports_nothing(redis_url: str) -> None:
    """Another replica records the expiry between our listing and our write: ours reports none."""
    start = time.time()
    request, _ = RedisApprovalStore(redis_url, mac=MAC).open_request(a_request(start))
    clock = HookedClock(start + EXPIRES_S + 1)
    ours = RedisApprovalStore(redis_url, mac=MAC, clock=clock)
    theirs = RedisApprovalStore(redis_url, mac=MAC, clock=lambda: start + EXPIRES_S + 1)
    swept: list[list[ApprovalRequest]] = []
    # Readings 1 and 2 are the sweep's and the listing's; the 3rd is inside the transaction.
    clock.arm(lambda: swept.append(theirs.sweep()), at=3)
    assert ours.sweep() == []
    assert [r.id for r in swept[0]] == [request.id]
    assert clock.calls == 4, "the transaction ran again after losing"


def test_a_transaction_that_always_loses_gives_up(redis_url: str) -> None:
    """Something rewriting the key forever: StateError after a bounded number of attempts."""
    now = time.time()
    clock = HookedClock(now)
    store = RedisApprovalStore(redis_url, mac=MAC, clock=clock)
    request, _ = store.open_request(a_request(now))
    key = f"zerto-rewind:approvals:req:{request.id}"
    with redis.Redis.from_url(redis_url) as raw:
        clock.arm(lambda: raw.set(key, raw.get(key) or b""), every=True)
        with pytest.raises(StateError, match="changed under 50 transactions in a row"):
            store.decide(request.id, True, "unix:alice")
        clock.disarm()
    current = store.get(request.id)
    assert current is not None
    assert current.state == "pending"


# --------------------------------------------------------------------------- damage


def test_damaged_or_dropped_records_are_skipped(redis_url: str) -> None:
    store = RedisApprovalStore(redis_url, mac=MAC)
    now = time.time()
    damaged, _ = store.open_request(a_request(now, args={"n": 1}))
    dropped, _ = store.open_request(a_request(now, args={"n": 2}))
    kept, _ = store.open_request(a_request(now, args={"n": 3}))
    with redis.Redis.from_url(redis_url) as raw:
        raw.set(f"zerto-rewind:approvals:req:{damaged.id}", b"{not json")
        raw.delete(f"zerto-rewind:approvals:req:{dropped.id}")
        assert [r.id for r in store.pending()] == [kept.id]
        assert store.get(damaged.id) is None
        assert store.get(dropped.id) is None
        # A key Redis dropped is forgotten from the ids; a damaged one is left for inspection.
        assert raw.zscore("zerto-rewind:approvals:ids", dropped.id) is None
        assert raw.zscore("zerto-rewind:approvals:ids", damaged.id) is not None
    with pytest.raises(ApprovalError, match="no approval request"):
        store.decide(damaged.id, True, "unix:alice")


# --------------------------------------------------------------------------- Redis down


def test_redis_down_is_a_state_error_naming_what_failed(tmp_path: Path) -> None:
    """Every operation raises StateError saying what failed and where, never the password."""
    with RedisServer(tmp_path, password="s3cret-pw") as server:
        store = RedisApprovalStore(server.url, mac=MAC)
        request, _ = store.open_request(a_request(time.time()))
        wrong = RedisApprovalStore(server.url.replace("s3cret-pw", "wrong-pw"), mac=MAC)
        with pytest.raises(StateError) as refused:
            wrong.pending()
        assert "listing pending approval requests failed" in str(refused.value)
        assert "refused the credentials" in str(refused.value)
        assert "wrong-pw" not in str(refused.value)
    p, t, d = request.principal, request.tool, request.args_digest
    attempts: list[tuple[str, Callable[[], object]]] = [
        ("opening an approval request for power_off_vm", lambda: store.open_request(request)),
        (f"reading approval request {request.id}", lambda: store.get(request.id)),
        ("listing pending approval requests", store.pending),
        ("listing recent approval requests", store.recent),
        (
            f"deciding approval request {request.id}",
            lambda: store.decide(request.id, True, "unix:alice"),
        ),
        ("using an approval of power_off_vm", lambda: store.consume(p, t, d)),
        ("recording expired approval requests", store.sweep),
        ("checking the approval requests' store", store.check),
    ]
    for what, attempt in attempts:
        with pytest.raises(StateError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"{what} failed: "), message
        assert f"the shared state at redis://127.0.0.1:{server.port}/0 is unreachable" in message
        assert "s3cret-pw" not in message
    store.close()
