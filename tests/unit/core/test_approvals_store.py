"""The rules both approval stores share (approvals_store) and the model's own clock rules."""

from __future__ import annotations

import pytest

from zerto_rewind.core.approvals_model import (
    APPROVED,
    DENIED,
    PENDING,
    RETENTION_S,
    USED,
    ApprovalError,
    ApprovalRequest,
    new_request,
)
from zerto_rewind.core.approvals_store import check_id, decide_request

NOW = 1_800_000_000.0


def a_request() -> ApprovalRequest:
    return new_request(
        tool="power_off_vm", tool_input={"vm": "web-1"}, vms=["web-1"], row="unknown_vm",
        why="VM not in Zerto", principal="token:agent", expires_s=600.0, now=NOW,
    )  # fmt: skip


@pytest.mark.parametrize("request_id", ["", "ab/../x", "ABCD-EFGH.json", "abcd-efgh", "ILOU-0000"])
def test_check_id_refuses_what_is_not_an_id(request_id: str) -> None:
    """Lower case, paths, look-alike letters and the empty id are refused, before any path."""
    with pytest.raises(ApprovalError, match="is not an approval request id"):
        check_id(request_id)


def test_check_id_accepts_the_ids_new_request_makes() -> None:
    check_id(a_request().id)


def test_done_at_is_the_use_else_the_decision_else_the_expiry() -> None:
    request = a_request()
    assert request.done_at == NOW + 600.0
    request.decided_at = NOW + 10.0
    assert request.done_at == NOW + 10.0
    request.used_at = NOW + 20.0
    assert request.done_at == NOW + 20.0


@pytest.mark.parametrize(
    ("state", "age_s", "retired"),
    [
        (PENDING, RETENTION_S + 1, False),  # live requests stay whatever their age
        (APPROVED, RETENTION_S + 1, False),
        (DENIED, RETENTION_S - 1, False),
        (DENIED, RETENTION_S + 1, True),
        (USED, RETENTION_S + 1, True),
    ],
)
def test_a_request_is_retired_only_once_ended_past_the_retention(
    state: str, age_s: float, retired: bool
) -> None:
    request = a_request()
    request.state, request.decided_at = state, NOW
    assert request.retired(NOW + age_s) is retired


def test_decide_request_saves_once_and_refuses_a_second_answer() -> None:
    saved: list[ApprovalRequest] = []
    request = a_request()
    decided = decide_request(
        request, request.id, True, "unix:alice", "  ok  ", NOW + 1, saved.append
    )
    assert (decided.state, decided.decided_by, decided.note) == (APPROVED, "unix:alice", "ok")
    with pytest.raises(ApprovalError, match="is approved, not pending; nothing was changed"):
        decide_request(request, request.id, False, "unix:bob", None, NOW + 2, saved.append)
    assert saved == [request]


def test_decide_request_refuses_an_expired_or_missing_request() -> None:
    saved: list[ApprovalRequest] = []
    request = a_request()
    with pytest.raises(ApprovalError, match="is expired, not pending"):
        decide_request(request, request.id, True, "unix:alice", None, NOW + 601, saved.append)
    with pytest.raises(ApprovalError, match="no approval request ABCD-EFGH"):
        decide_request(None, "ABCD-EFGH", True, "unix:alice", None, NOW, saved.append)
    assert saved == []
