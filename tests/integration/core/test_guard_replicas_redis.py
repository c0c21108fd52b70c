"""Two guards on one Redis behave as one guard: gateway replicas behind a load balancer.

Each "replica" is a Guard with its own RedisGuardState (its own connections)
and its own ZVM client, as two gateway processes would have; the simulator
counts the tags and tokens they ask for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.redis_server import RedisServer
from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall
from zerto_rewind.core.guard import Guard
from zerto_rewind.core.state_redis import RedisGuardState
from zerto_rewind.testing import Sandbox, fast_sim_config

POWER_OFF = "mcp__vsphere__power_off_vm"
LIST_VMS = "mcp__vsphere__list_vms"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    """A fast simulator whose AWS VPG is deterministically *pending* for a 3 s budget.

    CMH-AWS-1 journals every 4 s, but the guard is told 8 s (a config override),
    so its expected landing is past the budget, and the tag lands before the retry.
    """
    sim = fast_sim_config(cadences={"vcenter": 1.0, "hyperv": 1.0, "azure": 2.0, "aws": 4.0})
    guard = {
        "timeout_s": 3,
        "site_cadence_s": {"vcenter": 1.0, "hyperv": 1.0, "azure": 2.0, "aws": 4.0},
        "cadence_s": {"CMH-AWS-1": 8.0},
        "landing_allowance_s": 0.5,
    }
    with Sandbox(str(tmp_path / "box"), sim_config=sim, guard=guard) as sandbox:
        yield sandbox


def replica(box: Sandbox, state_url: str) -> Guard:
    """A guard as one gateway replica runs it: the state URL set, the ZVM client opened.

    Opened before use, as a long-running server does: the guard's lazy opening
    is not meant for several threads at once.
    """
    settings = box.settings()
    settings.state_url = state_url
    guard = Guard(settings)
    guard.client()
    return guard


def token_requests(box: Sandbox) -> int:
    """Token requests the simulator's Keycloak answered."""
    return int(box.control("GET", "/_sim/stats")["token_requests"]["total"])


def power_off_at_once(guards: list[Guard], calls: int) -> list[Decision]:
    """``calls`` power_off calls on jp-ubuntu released together, spread over ``guards``;
    the guards are closed afterwards."""
    start = threading.Barrier(calls)
    decisions: list[Decision] = []
    lock = threading.Lock()

    def call(guard: Guard) -> None:
        start.wait()
        decision = guard.decide(ToolCall(POWER_OFF, {"name": "jp-ubuntu"}))
        with lock:
            decisions.append(decision)

    threads = [threading.Thread(target=call, args=(guards[i % len(guards)],)) for i in range(calls)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for guard in guards:
            guard.close()
    return decisions


def test_replicas_coalesce_concurrent_calls_into_one_tag(box: Sandbox, redis_url: str) -> None:
    """Six concurrent mutating calls on one VPG, split over two replicas: one tag, one token."""
    guards = [replica(box, redis_url), replica(box, redis_url)]
    assert all(isinstance(g.state(), RedisGuardState) for g in guards)
    decisions = power_off_at_once(guards, 6)
    assert [d.row for d in decisions] == [Row.CONFIRMED] * 6, [d.reason for d in decisions]
    assert box.tag_requests("jp-local") == 1
    assert len({d.vpgs[0].checkpoint_id for d in decisions}) == 1
    assert token_requests(box) == 1, "the replicas share one ZVM token through Redis"


def test_a_pending_tag_is_allowed_on_retry_through_the_other_replica(
    box: Sandbox, redis_url: str
) -> None:
    """Pending through replica A; the retry reaches replica B and is allowed on the same tag."""
    a, b = replica(box, redis_url), replica(box, redis_url)
    try:
        first = a.decide(ToolCall(POWER_OFF, {"name": "win2019-1"}))
        assert first.row == Row.PENDING, first.reason
        assert first.outcome == Outcome.DENY
        assert first.retry_after is not None
        time.sleep(max(0.0, first.retry_after - time.time()))
        retry = b.decide(ToolCall(POWER_OFF, {"name": "win2019-1"}))
    finally:
        a.close()
        b.close()
    assert retry.row == Row.CONFIRMED, retry.reason
    assert retry.vpgs[0].tag == first.vpgs[0].tag
    assert box.tag_requests("CMH-AWS-1") == 1


def test_redis_gone_denies_mutating_calls_and_passes_read_only_ones(
    box: Sandbox, tmp_path: Path
) -> None:
    """Redis stops mid-run: a mutating call is denied naming the shared state; read-only runs."""
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis", password="s3cret-pw")
    server.start()
    guard = replica(box, server.url)
    try:
        before = guard.decide(ToolCall(POWER_OFF, {"name": "jp-ubuntu"}))
        assert before.row == Row.CONFIRMED, before.reason
        server.stop()
        started = time.monotonic()
        denied = guard.decide(ToolCall(POWER_OFF, {"name": "jp-ubuntu"}))
        elapsed = time.monotonic() - started
        read_only = guard.decide(ToolCall(LIST_VMS, {}))
        newcomer = replica(box, server.url)  # a replica (re)started while Redis is down
        try:
            fresh_denied = newcomer.decide(ToolCall(POWER_OFF, {"name": "jp-ubuntu"}))
            fresh_read_only = newcomer.decide(ToolCall(LIST_VMS, {}))
        finally:
            newcomer.close()
    finally:
        server.stop()
        guard.close()
    for decision in (denied, fresh_denied):
        assert (decision.row, decision.outcome) == (Row.ERROR, Outcome.DENY)
        assert decision.reason is not None
        assert f"the shared state at redis://127.0.0.1:{server.port}/0 is unreachable" in (
            decision.reason
        )
        assert "was not run" in decision.reason
        assert "s3cret-pw" not in decision.reason
    assert elapsed < 2.0, "an unreachable Redis is refused at once, not after the budget"
    assert box.tag_requests("jp-local") == 1
    for decision in (read_only, fresh_read_only):
        assert (decision.row, decision.outcome) == (Row.READ_ONLY, Outcome.NONE)


def test_the_tag_bound_holds_across_replicas(box: Sandbox, redis_url: str) -> None:
    """guard.max_tags_per_minute 3, calls alternating over two replicas, each needing a new
    tag: three tags, then both replicas deny, naming the bound."""
    box.write_config(guard={**box.guard, "max_tags_per_minute": 3})
    guards = [replica(box, redis_url), replica(box, redis_url)]
    try:
        decisions = [
            guards[i % 2].decide(ToolCall(POWER_OFF, {"name": "jp-ubuntu"})) for i in range(5)
        ]
    finally:
        for guard in guards:
            guard.close()
    assert [d.row for d in decisions] == [Row.CONFIRMED] * 3 + [Row.FAILED] * 2, [
        d.reason for d in decisions
    ]
    assert box.tag_requests("jp-local") == 3
    for denied in decisions[3:]:
        assert denied.outcome == Outcome.DENY
        assert "guard.max_tags_per_minute: 3" in denied.reason
        assert denied.vpgs[0].bounded


def test_fifty_concurrent_calls_on_one_vpg_are_one_tag_under_a_bound_of_one(
    box: Sandbox, redis_url: str
) -> None:
    """Fifty concurrent calls over two replicas join one tag: all confirmed, one request, and
    the joined tag is not counted against guard.max_tags_per_minute (here 1)."""
    box.write_config(guard={**box.guard, "max_tags_per_minute": 1})
    guards = [replica(box, redis_url), replica(box, redis_url)]
    decisions = power_off_at_once(guards, 50)
    assert [d.row for d in decisions] == [Row.CONFIRMED] * 50, {d.reason for d in decisions}
    assert box.tag_requests("jp-local") == 1
