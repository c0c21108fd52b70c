"""The ledger of gateway.limits, fed by hand: counts per token and in all, and refusals."""

from __future__ import annotations

import pytest

from support.fakes import FakeClock
from zerto_rewind.config.settings import LimitsSettings
from zerto_rewind.gateway.ledger import Ledger, Refusal, Slot


def _ledger(**caps: object) -> tuple[Ledger, FakeClock]:
    clock = FakeClock(100.0)
    return Ledger(LimitsSettings(**caps), clock=clock), clock


def _open(ledger: Ledger, client: str, session_id: str) -> Slot:
    slot = ledger.reserve(client)
    assert isinstance(slot, Slot)
    ledger.admitted(session_id, client, slot)
    ledger.settle(slot)
    return slot


def test_sessions_per_token_then_in_all() -> None:
    """Past its own cap a token is refused, naming it; the total refuses everyone."""
    ledger, _ = _ledger(sessions_per_token=2, sessions=3, handshake_s=30)
    _open(ledger, "a", "a1")
    _open(ledger, "a", "a2")
    refused = ledger.reserve("a")
    assert isinstance(refused, Refusal)
    assert (refused.key, refused.limit, refused.retry_after_s) == ("sessions_per_token", 2, 30)
    assert "gateway.limits.sessions_per_token: 2" in refused.message()
    _open(ledger, "b", "b1")
    full = ledger.reserve("b")
    assert isinstance(full, Refusal)
    assert full.key == "sessions"
    ledger.closed("a1")
    ledger.closed("a1")  # the SDK may discard twice: counted once
    assert isinstance(ledger.reserve("b"), Slot)
    assert ledger.sessions_total == 3


def test_an_opening_the_sdk_refused_frees_its_room() -> None:
    ledger, _ = _ledger(sessions_per_token=1, sessions=5)
    slot = ledger.reserve("a")
    assert isinstance(slot, Slot)
    assert isinstance(ledger.reserve("a"), Refusal)  # counted while it opens
    ledger.settle(slot)  # never admitted
    assert ledger.session_count["a"] == 0
    assert isinstance(ledger.reserve("a"), Slot)


def test_abandoned_counts_from_the_answered_opening_and_spares_used_sessions() -> None:
    ledger, clock = _ledger(handshake_s=10)
    slot = ledger.reserve("a")
    assert isinstance(slot, Slot)
    ledger.admitted("slow", "a", slot)
    clock.now += 60  # initialize waited for the upstream: not abandoned meanwhile
    assert ledger.abandoned() == []
    ledger.settle(slot)
    _open(ledger, "a", "used")
    ledger.used("used")
    clock.now += 9
    assert ledger.abandoned() == []
    clock.now += 1
    assert ledger.abandoned() == ["slow"]


def test_calls_and_bytes_per_token_and_in_all() -> None:
    ledger, _ = _ledger(calls_per_token=1, argument_bytes_per_token=100, argument_bytes=150)
    first = ledger.hold("a")
    assert ledger.grow(first, 80) is None
    assert ledger.call(first) is None
    second = ledger.hold("a")
    over = ledger.grow(second, 30)
    assert isinstance(over, Refusal)
    assert over.key == "argument_bytes_per_token"
    assert ledger.grow(second, 10) is None
    busy = ledger.call(second)
    assert isinstance(busy, Refusal)
    assert busy.key == "calls_per_token"
    other = ledger.hold("b")
    full = ledger.grow(other, 70)
    assert isinstance(full, Refusal)
    assert full.key == "argument_bytes"
    assert ledger.grow(other, 60) is None
    for hold in (first, second, other, first):  # a release is idempotent
        ledger.release(hold)
    assert (ledger.held_total, dict(ledger.held), dict(ledger.calls)) == (0, {}, {})


def test_bytes_a_second_per_token_from_a_bucket_of_one_seconds_worth() -> None:
    ledger, clock = _ledger(argument_bytes_per_s_per_token=1000)
    for size in (600, 300):  # a second's worth at once, then done with at once
        hold = ledger.hold("a")
        assert ledger.grow(hold, size) is None
        ledger.release(hold)
    large = ledger.hold("a")
    assert ledger.grow(large, 2500) is None  # any room left: a large body passes, in debt
    ledger.release(large)
    refused = ledger.grow(ledger.hold("a"), 10)
    assert isinstance(refused, Refusal)
    assert (refused.key, refused.limit, refused.retry_after_s) == (
        "argument_bytes_per_s_per_token",
        1000,
        3,  # 2,400 bytes of debt at 1,000 a second
    )
    assert "1000 bytes of requests a second" in refused.message()
    assert ledger.grow(ledger.hold("b"), 900) is None  # another token's bucket is its own
    clock.now += 2.0
    assert isinstance(ledger.grow(ledger.hold("a"), 10), Refusal)  # still 400 in debt
    clock.now += 0.5
    assert ledger.grow(ledger.hold("a"), 10) is None
    clock.now += 60  # refilled to a second's worth, no more
    assert ledger.grow(ledger.hold("a"), 1000) is None
    assert isinstance(ledger.grow(ledger.hold("a"), 1), Refusal)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"sessions_per_token": 0}, "at least 1"),
        ({"calls_per_token": 2.5}, "whole number"),
        ({"argument_bytes_per_s_per_token": 0}, "at least 1"),
        ({"handshake_s": 61}, "at most 60 seconds"),
        ({"idle_s": 90000}, "at most 86400"),
        ({"sessions_per_token": 10, "sessions": 5}, "must not exceed gateway.limits.sessions"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_the_config_refuses_limits_that_bound_nothing(
    limits: dict[str, object], message: str
) -> None:
    from zerto_rewind.config.parse_gateway import GatewayParser
    from zerto_rewind.errors import ConfigError

    parser = GatewayParser("/tmp/config.json", "/tmp")
    with pytest.raises(ConfigError, match=message):
        parser.gateway_limits(limits)


def test_the_replayed_body_is_handed_over_not_kept() -> None:
    """The middleware's receive gives the body once and drops it: the SDK's is the copy."""
    import anyio

    from zerto_rewind.gateway.limits import _replay

    async def disconnect() -> dict[str, object]:
        return {"type": "http.disconnect"}

    async def run() -> None:
        body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
        box = [body]
        receive = _replay(box, disconnect)  # type: ignore[arg-type]
        first = await receive()
        assert first == {"type": "http.request", "body": body, "more_body": False}
        assert box == []
        assert await receive() == {"type": "http.disconnect"}

    anyio.run(run)
