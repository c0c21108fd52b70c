"""The approvals page's login limit (gateway/approvals_login.py), on its own clocks.

The page over HTTP is tests/unit/gateway/test_approvals_web.py and, with a real
gateway process, tests/integration/gateway/test_gateway_bounds.py.
"""

from __future__ import annotations

import json

import anyio
import pytest

from support.fakes import FakeClock
from zerto_rewind.gateway import approvals_login
from zerto_rewind.gateway.approvals_login import (
    FREE_FAILURES,
    MAX_DELAY_S,
    MAX_HELD,
    Failure,
    LoginLimit,
    source_of,
)
from zerto_rewind.gateway.notify import login_failures_body


def test_every_loopback_address_is_one_source_and_ipv6_counts_by_64() -> None:
    assert {source_of(a) for a in ("127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.5")} == {
        "loopback"
    }
    assert source_of("10.1.2.3") == "10.1.2.3"
    assert source_of("2001:db8::1") == source_of("2001:db8::ffff") == "2001:db8::/64"
    assert source_of("2001:db8:0:1::1") != source_of("2001:db8::1")
    assert source_of(None) == "unknown"


def test_failures_space_the_turns_up_to_the_maximum_and_a_login_clears_them() -> None:
    clock = FakeClock()
    limit = LoginLimit(clock=clock)
    key = limit.key("olivia", "loopback", None)
    spacing = []
    for _ in range(FREE_FAILURES + 5):
        limit.fail(key, "loopback")
        spacing.append(limit.delay_s(key))
    assert spacing[: FREE_FAILURES - 1] == [0.0] * (FREE_FAILURES - 1)
    assert spacing[FREE_FAILURES - 1 :] == [1.0, 2.0, 4.0, MAX_DELAY_S, MAX_DELAY_S, MAX_DELAY_S]
    assert limit.delay_s(limit.key("olivia", "10.0.0.9", None)) == 0.0  # another source
    assert limit.delay_s(limit.key("pat", "loopback", None)) == 0.0  # another name
    limit.clear(key)
    assert limit.delay_s(key) == 0.0


def test_failures_older_than_the_window_are_forgotten() -> None:
    clock = FakeClock()
    limit = LoginLimit(clock=clock)
    key = ("olivia", "loopback")
    for _ in range(FREE_FAILURES - 1):
        limit.fail(key, "loopback")
    clock.now += approvals_login.WINDOW_S + 1
    limit.fail(key, "loopback")
    assert limit.delay_s(key) == 0.0


def test_a_known_browser_cookie_is_its_own_key_and_cannot_be_forged() -> None:
    limit = LoginLimit()
    cookie = limit.known_cookie("olivia")
    browser_key = limit.key("olivia", "loopback", cookie)
    assert browser_key[1].startswith("browser:")
    # For another name, tampered, or from another gateway's key: the source counts.
    assert limit.key("pat", "loopback", cookie) == ("pat", "loopback")
    tampered = cookie[:-1] + ("1" if cookie.endswith("0") else "0")
    assert limit.key("olivia", "loopback", tampered) == ("olivia", "loopback")
    assert LoginLimit().key("olivia", "loopback", cookie) == ("olivia", "loopback")
    assert limit.key("olivia", "loopback", "x" * 500) == ("olivia", "loopback")


def test_the_turn_holds_an_attempt_and_refuses_only_beyond_max_held() -> None:
    limit = LoginLimit()
    key = ("olivia", "loopback")
    for _ in range(FREE_FAILURES):
        limit.fail(key, "loopback")  # the next turn is 1 s away
    admitted: list[bool] = []

    async def attempt() -> None:
        async with limit.turn(key) as ok:
            admitted.append(ok)

    async def main() -> float:
        started = anyio.current_time()
        async with anyio.create_task_group() as tg:
            for _ in range(MAX_HELD + 1):
                tg.start_soon(attempt)
        return anyio.current_time() - started

    elapsed = anyio.run(main)
    assert admitted.count(False) == 1  # the one beyond MAX_HELD, answered at once
    assert admitted[0] is False
    assert admitted.count(True) == MAX_HELD
    assert 0.9 <= elapsed < 3  # held for the turn; no failure in between spaces them more


def test_failures_are_listed_and_reported_at_most_once_a_minute() -> None:
    wall = FakeClock(50_000.0)
    limit = LoginLimit(wall=wall)
    limit.fail(("olivia", "loopback"), "loopback")
    first = limit.due_report()
    assert [(f.name, f.source) for f in first] == [("olivia", "loopback")]
    limit.fail(("pat", "10.0.0.9"), "10.0.0.9")
    assert limit.due_report() == []  # within the minute: kept for the next report
    wall.now += approvals_login.REPORT_EVERY_S
    assert [f.name for f in limit.due_report()] == ["pat"]
    assert [f.name for f in limit.recent()] == ["pat", "olivia"]
    wall.now += 25 * 3600
    assert limit.recent() == []


def test_the_webhook_body_names_who_was_tried_from_where_and_no_password() -> None:
    failures = [
        Failure(1_700_000_000.0, "olivia", "loopback", False),
        Failure(1_700_000_030.0, "<!channel>", "10.0.0.9", False),
    ]
    body = login_failures_body(failures, "https://approvals.example.test")
    assert body["event"] == "login_failed"
    assert body["count"] == 2
    assert [f["name"] for f in body["failures"]] == ["olivia", "<!channel>"]
    assert "2 failed approver login(s)" in body["text"]
    assert "olivia from loopback" in body["text"]
    assert "<!channel>" not in body["text"]  # chat markup neutralised in the line
    assert body["text"].endswith(": https://approvals.example.test")
    assert "password" not in json.dumps(body["failures"])


@pytest.mark.parametrize("count", [approvals_login._CAPACITY + 5])
def test_keys_are_bounded(count: int) -> None:
    limit = LoginLimit()
    for n in range(count):
        limit.fail((f"name-{n}", "loopback"), "loopback")
    assert len(limit._keys) == approvals_login._CAPACITY
