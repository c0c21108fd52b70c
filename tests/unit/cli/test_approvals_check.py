"""doctor's approvals check: warn where the agent's own client answers, or nobody can."""

from __future__ import annotations

from types import SimpleNamespace

from zerto_rewind.cli.doctor.config import approvals_check
from zerto_rewind.config.settings import ApprovalsSettings


def check(**values: object) -> tuple[str, str]:
    found = approvals_check(SimpleNamespace(approvals=ApprovalsSettings(**values)))  # type: ignore[arg-type]
    return found.status, found.detail


def test_trusting_client_answers_is_a_warning() -> None:
    status, detail = check(trust_client_answers=True, approver_users=("olivia",))
    assert status == "warn"
    assert "agent that holds its session" in detail


def test_no_approver_is_a_warning() -> None:
    assert check()[0] == "warn"


def test_named_approvers_pass() -> None:
    status, detail = check(approver_users=("olivia",), approver_groups=("ops",))
    assert status == "pass"
    assert "olivia" in detail
    assert "group ops" in detail


def test_the_log_table_shows_an_approvals_events() -> None:
    from zerto_rewind.cli.log_cmd import _cells

    record = {"decision": "approval", "answer": "approved", "approval_id": "ZB81-ENAX",
              "approver": "unix:olivia", "row": "vm_unknown"}  # fmt: skip
    assert _cells(record, {})["what became of it"] == "approved ZB81-ENAX by unix:olivia"
    assert _cells({"answer": "waiting", "row": "unlisted"}, {})["what became of it"] == "waiting"
