"""One behaviour suite for both approval stores (files, Redis), so that they cannot drift.

Every test here runs on :class:`FileApprovalStore` and on :class:`RedisApprovalStore`
(a real private redis-server). ``replica()`` is a second store over the same
state: another process's view of the state directory, another gateway replica
on the same Redis. Time is a fake clock shared by the replicas.
"""

from __future__ import annotations

from typing import Any

import pytest

from integration.core.approval_stores_helpers import (
    EXPIRES_S,
    Stores,
    a_request,
    run_together,
)
from zerto_rewind.core.approvals import (
    RETENTION_S,
    ApprovalError,
    ApprovalRequest,
)


def approved(stores: Stores, **kwargs: Any) -> ApprovalRequest:
    request, created = stores.store.open_request(a_request(stores.clock(), **kwargs))
    assert created
    stores.store.decide(request.id, True, "unix:alice", "ok")
    return request


def test_open_twice_is_one_request(stores: Stores) -> None:
    """A retried call joins its own open request; it is listed once, as pending."""
    first, created = stores.store.open_request(a_request(stores.clock()))
    assert created
    stores.clock.advance(5)
    again, created_again = stores.replica().open_request(a_request(stores.clock()))
    assert not created_again
    assert again.id == first.id
    assert again.to_json() == first.to_json()
    assert [r.id for r in stores.store.pending()] == [first.id]
    assert stores.store.recent() == []


def test_a_retry_that_waits_again_moves_the_callers_deadline(stores: Stores) -> None:
    """The approver is told until when the caller waits: the latest caller's, never past expiry."""
    template = a_request(stores.clock())
    template.wait_until = stores.clock() + 30
    first, _ = stores.store.open_request(template)
    stores.clock.advance(60)  # the first caller stopped waiting
    retry = a_request(stores.clock())
    retry.wait_until = stores.clock() + 30
    joined, created = stores.replica().open_request(retry)
    assert not created
    assert joined.id == first.id
    shown = stores.store.get(first.id)
    assert shown is not None
    assert shown.wait_until == pytest.approx(stores.clock() + 30)
    hook = a_request(stores.clock())  # a hook's retry does not wait: the deadline stays
    stores.store.open_request(hook)
    again = stores.store.get(first.id)
    assert again is not None
    assert again.wait_until == pytest.approx(shown.wait_until)


def test_another_principal_tool_or_arguments_is_another_request(stores: Stores) -> None:
    """Only the same principal, tool and arguments join: anything else opens its own."""
    base, _ = stores.store.open_request(a_request(stores.clock()))
    others = [
        a_request(stores.clock(), principal="token:agent-b"),
        a_request(stores.clock(), tool="delete_vm"),
        a_request(stores.clock(), args={"vm": "web-02"}),
    ]
    ids = {base.id}
    for template in others:
        request, created = stores.store.open_request(template)
        assert created
        ids.add(request.id)
    assert len(ids) == 4
    assert {r.id for r in stores.store.pending()} == ids


def test_a_request_that_is_no_longer_live_is_not_joined(stores: Stores) -> None:
    """Once used, denied or expired, the same call opens a fresh request."""
    used = approved(stores)
    assert stores.store.consume(used.principal, used.tool, used.args_digest) is not None
    after_use, created = stores.store.open_request(a_request(stores.clock()))
    assert created
    assert after_use.id != used.id

    stores.store.decide(after_use.id, False, "unix:alice")
    after_denial, created = stores.store.open_request(a_request(stores.clock()))
    assert created
    assert after_denial.id not in (used.id, after_use.id)

    stores.clock.advance(EXPIRES_S + 1)
    after_expiry, created = stores.store.open_request(a_request(stores.clock()))
    assert created
    assert after_expiry.id != after_denial.id


def test_replicas_racing_to_open_the_same_call_make_one_request(stores: Stores) -> None:
    """Many threads on two replicas open the same call at once: one request, all joined."""
    replicas = [stores.store, stores.replica()]
    templates = [a_request(stores.clock()) for _ in range(8)]
    results = run_together(8, lambda i: replicas[i % 2].open_request(templates[i]))
    assert sum(created for _, created in results) == 1
    assert len({request.id for request, _ in results}) == 1
    assert len(stores.store.pending()) == 1


def test_pending_is_oldest_first(stores: Stores) -> None:
    ids = []
    for n in range(3):
        request, _ = stores.store.open_request(a_request(stores.clock(), args={"vm": f"v{n}"}))
        ids.append(request.id)
        stores.clock.advance(1)
    assert [r.id for r in stores.replica().pending()] == ids


# --------------------------------------------------------------------------- deciding


def test_decide_approves_once(stores: Stores) -> None:
    """Approve records who, when and the note; a second decision is refused."""
    request, _ = stores.store.open_request(a_request(stores.clock()))
    stores.clock.advance(3)
    decided = stores.store.decide(request.id, True, "unix:alice", "  looks fine  ")
    assert (decided.state, decided.decided_by, decided.note) == (
        "approved",
        "unix:alice",
        "looks fine",
    )
    assert decided.decided_at == stores.clock.now
    assert stores.replica().get(request.id) == decided
    with pytest.raises(ApprovalError, match="is approved, not pending; nothing was changed"):
        stores.replica().decide(request.id, False, "unix:bob")
    assert stores.store.get(request.id) == decided
    assert [r.id for r in stores.store.recent()] == [request.id]
    assert stores.store.pending() == []


def test_deny(stores: Stores) -> None:
    request, _ = stores.store.open_request(a_request(stores.clock()))
    denied = stores.store.decide(request.id, False, "web:carol", None)
    assert (denied.state, denied.decided_by, denied.note) == ("denied", "web:carol", None)
    assert stores.store.consume(request.principal, request.tool, request.args_digest) is None
    with pytest.raises(ApprovalError, match="is denied"):
        stores.store.decide(request.id, True, "web:carol")


def test_decide_unknown_or_malformed_id(stores: Stores) -> None:
    with pytest.raises(ApprovalError, match="no approval request ABCD-EFGH"):
        stores.store.decide("ABCD-EFGH", True, "unix:alice")
    for bad in ("", "../etc", "abcd efgh", "ABCD/EFGH"):
        with pytest.raises(ApprovalError, match="is not an approval request id"):
            stores.store.decide(bad, True, "unix:alice")
        with pytest.raises(ApprovalError, match="is not an approval request id"):
            stores.store.get(bad)
    assert stores.store.get("ABCD-EFGH") is None


def test_decide_on_an_expired_request_changes_nothing_until_the_sweep(stores: Stores) -> None:
    """Expired: decide raises and writes nothing; reads show it expired; the sweep records it."""
    request, _ = stores.store.open_request(a_request(stores.clock()))
    stores.clock.advance(EXPIRES_S)
    with pytest.raises(ApprovalError, match="is expired, not pending; nothing was changed"):
        stores.store.decide(request.id, True, "unix:alice")
    shown = stores.store.get(request.id)
    assert shown is not None
    assert (shown.state, shown.decided_by, shown.decided_at) == ("expired", None, None)
    assert stores.store.pending() == []
    assert [r.state for r in stores.store.recent()] == ["expired"]
    # Nothing was written: the expiry is still the sweep's to record, once.
    assert [r.id for r in stores.replica().sweep()] == [request.id]
    assert stores.store.sweep() == []


# --------------------------------------------------------------------------- using


def test_an_approval_is_used_once(stores: Stores) -> None:
    request = approved(stores)
    stores.clock.advance(2)
    used = stores.store.consume(request.principal, request.tool, request.args_digest)
    assert used is not None
    assert (used.id, used.state, used.used_at) == (request.id, "used", stores.clock.now)
    assert stores.store.consume(request.principal, request.tool, request.args_digest) is None
    assert stores.replica().consume(request.principal, request.tool, request.args_digest) is None
    assert stores.store.get(request.id) == used
    with pytest.raises(ApprovalError, match="is used"):
        stores.store.decide(request.id, True, "unix:alice")


def test_an_approval_is_for_its_own_call_only(stores: Stores) -> None:
    """Another principal, tool or digest finds nothing; the approval stays for its call."""
    request = approved(stores)
    p, t, d = request.principal, request.tool, request.args_digest
    assert stores.store.consume("token:agent-b", t, d) is None
    assert stores.store.consume(p, "delete_vm", d) is None
    assert stores.store.consume(p, t, "0" * 64) is None
    assert stores.store.consume(p, t, d, "ZZZZ-ZZZZ") is None
    assert stores.store.consume(p, t, d, "not an id") is None
    current = stores.store.get(request.id)
    assert current is not None
    assert current.state == "approved"
    used = stores.store.consume(p, t, d, request.id)
    assert used is not None
    assert used.id == request.id


def test_a_pending_request_is_not_an_approval(stores: Stores) -> None:
    request, _ = stores.store.open_request(a_request(stores.clock()))
    assert stores.store.consume(request.principal, request.tool, request.args_digest) is None
    assert (
        stores.store.consume(request.principal, request.tool, request.args_digest, request.id)
        is None
    )
    current = stores.store.get(request.id)
    assert current is not None
    assert current.state == "pending"


def test_an_expired_approval_cannot_be_used(stores: Stores) -> None:
    request = approved(stores)
    stores.clock.advance(EXPIRES_S)
    assert stores.store.consume(request.principal, request.tool, request.args_digest) is None
    assert (
        stores.store.consume(request.principal, request.tool, request.args_digest, request.id)
        is None
    )
    shown = stores.store.get(request.id)
    assert shown is not None
    assert (shown.state, shown.decided_by) == ("expired", "unix:alice")
    assert [r.id for r in stores.store.sweep()] == [request.id]


def test_replicas_racing_to_use_one_approval_make_one_winner(stores: Stores) -> None:
    """Threads on two replicas consume the same approval at once: exactly one gets it."""
    request = approved(stores)
    replicas = [stores.store, stores.replica()]
    results = run_together(
        8,
        lambda i: replicas[i % 2].consume(
            request.principal, request.tool, request.args_digest, None if i % 3 else request.id
        ),
    )
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert winners[0].id == request.id
    current = stores.store.get(request.id)
    assert current is not None
    assert current.state == "used"


# --------------------------------------------------------------------------- expiry


def test_sweep_reports_each_expiry_once(stores: Stores) -> None:
    """Expired pending and approved requests are recorded once; live and decided ones stay."""
    waiting, _ = stores.store.open_request(a_request(stores.clock(), args={"vm": "a"}))
    unused = approved(stores, args={"vm": "b"})
    denied, _ = stores.store.open_request(a_request(stores.clock(), args={"vm": "c"}))
    stores.store.decide(denied.id, False, "unix:alice")
    later, _ = stores.store.open_request(
        a_request(stores.clock(), args={"vm": "d"}, expires_s=EXPIRES_S * 2)
    )
    assert stores.store.sweep() == []
    stores.clock.advance(EXPIRES_S)
    swept = stores.store.sweep()
    assert {r.id for r in swept} == {waiting.id, unused.id}
    assert {r.state for r in swept} == {"expired"}
    assert stores.store.sweep() == []
    assert stores.replica().sweep() == []
    states = {r.id: r.state for r in stores.store.recent()}
    assert states == {waiting.id: "expired", unused.id: "expired", denied.id: "denied"}
    assert [r.id for r in stores.store.pending()] == [later.id]


def test_replicas_sweeping_together_report_each_expiry_once(stores: Stores) -> None:
    ids = {
        stores.store.open_request(a_request(stores.clock(), args={"n": n}))[0].id for n in range(5)
    }
    stores.clock.advance(EXPIRES_S + 1)
    replicas = [stores.store, stores.replica()]
    results = run_together(6, lambda i: replicas[i % 2].sweep())
    reported = [r.id for swept in results for r in swept]
    assert sorted(reported) == sorted(ids)


def test_recent_is_newest_first_and_limited(stores: Stores) -> None:
    ids = []
    for n in range(4):
        request, _ = stores.store.open_request(a_request(stores.clock(), args={"n": n}))
        stores.clock.advance(1)
        stores.store.decide(request.id, n % 2 == 0, "unix:alice")
        ids.append(request.id)
    assert [r.id for r in stores.store.recent()] == ids[::-1]
    assert [r.id for r in stores.replica().recent(limit=2)] == ids[:1:-1]


def test_decided_requests_go_after_the_retention(stores: Stores) -> None:
    """A decided request stays visible for RETENTION_S after its decision, then goes."""
    request, _ = stores.store.open_request(a_request(stores.clock()))
    stores.store.decide(request.id, False, "unix:alice")
    stores.clock.advance(RETENTION_S - 1)
    assert [r.id for r in stores.store.recent()] == [request.id]
    stores.clock.advance(2)
    assert stores.store.recent() == []
    assert stores.store.get(request.id) is None
    assert stores.store.sweep() == []


def test_check(stores: Stores) -> None:
    stores.store.check()
