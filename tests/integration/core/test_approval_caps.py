"""The bounds on approval requests, on both stores (files, a real Redis).

``approvals.max_open_per_principal`` caps the open requests of one principal;
``MAX_OPEN_TOTAL`` caps them for everyone, and ``MAX_KEPT_ENDED`` the ended ones
kept for the page, so the store stays bounded whatever the number of calls.
The fixtures are the store suite's (conftest.py).
"""

from __future__ import annotations

import os

import pytest

from integration.core.approval_stores_helpers import (
    EXPIRES_S,
    Stores,
    a_request,
    run_together,
)
from zerto_rewind.core import approvals_redis, approvals_store
from zerto_rewind.core.approvals import ApprovalLimitError, FileApprovalStore
from zerto_rewind.core.approvals_redis import RedisApprovalStore


def test_past_the_cap_a_new_request_is_refused_and_nothing_is_stored(stores: Stores) -> None:
    for n in range(3):
        _, created = stores.store.open_request(a_request(stores.clock(), args={"vm": f"v{n}"}), 3)
        assert created
    with pytest.raises(ApprovalLimitError) as refused:
        stores.replica().open_request(a_request(stores.clock(), args={"vm": "v9"}), 3)
    assert "token:agent-a already has 3 open approval requests" in str(refused.value)
    assert "approvals.max_open_per_principal: 3" in str(refused.value)
    reason = refused.value.reason()
    assert "no request was opened and the call was not run" in reason
    assert "zerto-rewind approvals list" in reason
    assert len(stores.store.pending()) == 3
    # A retry of an open call still joins it; another principal has its own cap.
    digest = a_request(stores.clock(), args={"vm": "v0"}).args_digest
    (first,) = (r for r in stores.store.pending() if r.args_digest == digest)
    again, created = stores.store.open_request(a_request(stores.clock(), args={"vm": "v0"}), 3)
    assert not created
    assert again.id == first.id
    _, created = stores.store.open_request(a_request(stores.clock(), principal="token:b"), 3)
    assert created


def test_a_decision_or_an_expiry_frees_a_place(stores: Stores) -> None:
    opened = [
        stores.store.open_request(a_request(stores.clock(), args={"vm": f"v{n}"}), 2)[0]
        for n in range(2)
    ]
    with pytest.raises(ApprovalLimitError):
        stores.store.open_request(a_request(stores.clock(), args={"vm": "new"}), 2)
    stores.store.decide(opened[0].id, False, "unix:alice")
    _, created = stores.store.open_request(a_request(stores.clock(), args={"vm": "new"}), 2)
    assert created
    with pytest.raises(ApprovalLimitError):
        stores.store.open_request(a_request(stores.clock(), args={"vm": "newer"}), 2)
    stores.clock.advance(EXPIRES_S + 1)
    _, created = stores.store.open_request(a_request(stores.clock(), args={"vm": "newer"}), 2)
    assert created


def test_replicas_racing_past_the_cap_open_no_more_than_it(stores: Stores) -> None:
    """Eight distinct calls at once on two replicas, cap 3: three open, five refused."""
    replicas = [stores.store, stores.replica()]
    templates = [a_request(stores.clock(), args={"vm": f"v{n}"}) for n in range(8)]

    def open_one(i: int) -> bool:
        try:
            return replicas[i % 2].open_request(templates[i], 3)[1]
        except ApprovalLimitError:
            return False

    results = run_together(8, open_one)
    assert sum(results) == 3
    assert len(stores.store.pending()) == 3


def test_the_store_caps_open_requests_for_all_principals(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(approvals_store, "MAX_OPEN_TOTAL", 4)
    monkeypatch.setattr(approvals_redis, "MAX_OPEN_TOTAL", 4)
    for n in range(4):
        stores.store.open_request(a_request(stores.clock(), principal=f"token:p{n}"), 20)
    with pytest.raises(ApprovalLimitError) as refused:
        stores.store.open_request(a_request(stores.clock(), principal="token:p9"), 20)
    assert refused.value.total
    assert "holds 4 open approval requests, its limit for all callers" in str(refused.value)
    assert len(stores.store.pending()) == 4


def test_ended_requests_kept_are_bounded(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond MAX_KEPT_ENDED, the oldest ended requests go before their retention."""
    monkeypatch.setattr(approvals_store, "MAX_KEPT_ENDED", 3)
    ids = []
    for n in range(6):
        request, _ = stores.store.open_request(a_request(stores.clock(), args={"vm": f"v{n}"}))
        stores.clock.advance(1)
        stores.store.decide(request.id, False, "unix:alice")
        ids.append(request.id)
    assert [r.id for r in stores.store.recent()] == ids[:2:-1]
    store = stores.store
    if isinstance(store, FileApprovalStore):
        kept = [n for n in os.listdir(store.root) if n.endswith(".json")]
        assert sorted(kept) == sorted(f"{i}.json" for i in ids[3:])
    else:
        assert isinstance(store, RedisApprovalStore)
        client = store._redis
        assert [i for i in ids if client.exists(store._req_key(i))] == ids[3:]
