"""The approvals step (core.approval_policy): one flow for every door, in its order —
approvers configured, then an approval used, then a request opened (and sent once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.core.approval_policy import Approvals
from zerto_rewind.core.approvals import FileApprovalStore, new_request
from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall

TOOL = "mcp__vsphere__power_off_vm"
ARGS = {"name": "web01"}
PRINCIPAL = "unix:agent"
ASKED = "zerto-rewind: no VPG protects web01."


def prompt() -> Decision:
    return Decision(Row.VM_UNKNOWN, Outcome.PROMPT, TOOL, reason=ASKED, vms=("web01",))


def step(tmp_path: Path, store: Any = None, **config: Any) -> tuple[Approvals, list[Any]]:
    sent: list[Any] = []
    settings = ApprovalsSettings(**{"approver_users": ("olivia",), **config})
    chosen = store if store is not None else FileApprovalStore(str(tmp_path / "state"))
    policy = Approvals(
        lambda: chosen,
        settings,
        str(tmp_path / "decisions.log"),
        principal=PRINCIPAL,
        notify=sent.append,
        link=lambda request_id: f"https://approvals.example/requests/{request_id}",
    )
    return policy, sent


def approved(tmp_path: Path) -> FileApprovalStore:
    store = FileApprovalStore(str(tmp_path / "state"))
    template = new_request(
        tool=TOOL, tool_input=ARGS, vms=("web01",), row=Row.VM_UNKNOWN, why=ASKED,
        principal=PRINCIPAL,
    )  # fmt: skip
    request, _ = store.open_request(template, 10)
    store.decide(request.id, True, "unix:olivia", None)
    return store


def log(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "decisions.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_only_a_prompt_is_the_approvals_business(tmp_path: Path) -> None:
    policy, _ = step(tmp_path)
    confirmed = Decision(Row.CONFIRMED, Outcome.CONTEXT, TOOL, context="cp")
    assert policy.apply(ToolCall(TOOL, ARGS), confirmed) is None


def test_without_an_approver_an_existing_approval_is_not_used_up(tmp_path: Path) -> None:
    """The order the gateway's own path had wrong: approvers first, then an approval."""
    store = approved(tmp_path)
    policy, sent = step(tmp_path, store, approver_users=())
    decision = policy.apply(ToolCall(TOOL, ARGS), prompt())
    assert decision is not None
    assert (decision.outcome, decision.answer) == (Outcome.DENY, "no_approver")
    assert decision.reason.startswith(ASKED)
    assert "no approver configured" in decision.reason
    assert store.consume(PRINCIPAL, TOOL, ToolCall(TOOL, ARGS).args_digest) is not None
    assert sent == []


def test_an_approval_of_this_call_lets_it_run_once(tmp_path: Path) -> None:
    policy, sent = step(tmp_path, approved(tmp_path))
    call = ToolCall(TOOL, ARGS)
    first = policy.apply(call, prompt())
    assert first is not None
    assert (first.outcome, first.answer, first.asked) == (Outcome.CONTEXT, "approved", ASKED)
    assert "unix:olivia approved this call" in first.context
    again = policy.apply(call, prompt())
    assert again is not None
    assert (again.outcome, again.answer) == (Outcome.DENY, "waiting")
    assert [line["answer"] for line in log(tmp_path)] == ["used", "requested"]
    assert len(sent) == 1


def test_a_new_request_is_sent_once_and_named_in_the_refusal(tmp_path: Path) -> None:
    policy, sent = step(tmp_path)
    call = ToolCall(TOOL, ARGS)
    first = policy.apply(call, prompt())
    retry = policy.apply(call, prompt())
    assert first is not None
    assert retry is not None
    assert first.approval.id == retry.approval.id
    assert (first.outcome, first.answer) == (Outcome.DENY, "waiting")
    assert f"request {first.approval.id} is waiting" in first.reason
    assert f"https://approvals.example/requests/{first.approval.id}" in first.reason
    assert [request.id for request in sent] == [first.approval.id]  # the retry joined it


def test_a_capped_queue_refuses_at_once(tmp_path: Path) -> None:
    policy, _ = step(tmp_path, max_open_per_principal=1)
    policy.apply(ToolCall(TOOL, ARGS), prompt())
    capped = policy.apply(ToolCall(TOOL, {"name": "web02"}), prompt())
    assert capped is not None
    assert (capped.outcome, capped.answer) == (Outcome.DENY, "capped")


def test_a_store_that_cannot_be_opened_refuses_with_what_failed(tmp_path: Path) -> None:
    def broken() -> Any:
        raise ConnectionError("redis is down")

    settings = ApprovalsSettings(approver_users=("olivia",))
    policy = Approvals(broken, settings, str(tmp_path / "log"), principal=PRINCIPAL)
    decision = policy.apply(ToolCall(TOOL, ARGS), prompt())
    assert decision is not None
    assert (decision.outcome, decision.answer) == (Outcome.DENY, "approvals_down")
    assert "approval channel failed (ConnectionError)" in decision.reason
    assert "redis is down" not in decision.reason
