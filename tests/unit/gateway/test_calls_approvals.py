"""Prompt rows as approval requests (gateway/calls.py with a real ApprovalsService).

The agent's own client can answer an elicitation; here its answer approves nothing. Only
an approver's decision in the service's store lets the call run, once, for the same
principal and the same call.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest

from unit.gateway.calls_fakes import (
    HOST_TOOL,
    TOOL,
    FakeGateway,
    FakeUpstream,
    assert_ran_approved,
    prompt,
    texts,
)
from zerto_rewind.config.settings import ApprovalsSettings, GatewaySettings
from zerto_rewind.core.approvals import Approver
from zerto_rewind.core.decision import Decision, ToolCall
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.calls import CallContext, handle_call
from zerto_rewind.gateway.request_state import RequestStates

APPROVER = Approver("unix", "olivia")


class ApprovalGateway(FakeGateway):
    """The parts of the Gateway a call uses, with a real approvals service on files."""

    def __init__(self, tmp_path: Path, decision: Decision, **approvals: Any) -> None:
        super().__init__(tmp_path, decision)
        config = ApprovalsSettings(**{"approver_users": ("olivia",), "wait_s": 0.3, **approvals})
        self.settings = SimpleNamespace(
            log_path=self.log_path,
            gateway=GatewaySettings(clients={"agent-a": "0" * 64, "olivia-bot": "1" * 64}),
            approvals=config,
            state_url=None,
            state_connection_url=lambda: None,
            state_dir=str(tmp_path / "state"),
        )
        self.approvals = ApprovalsService(self.settings)  # type: ignore[arg-type]


def ctx(client: str = "agent-a", **fields: Any) -> CallContext:
    return CallContext(client=client, session_id="sess-1", **fields)


def call(gateway: ApprovalGateway, upstream: FakeUpstream, c: CallContext, args: Any = None) -> Any:
    async def go() -> Any:
        return await handle_call(gateway, upstream, TOOL, args or {"name": "web01"}, c)  # type: ignore[arg-type]

    return anyio.run(go)


def pending(gateway: ApprovalGateway) -> list[Any]:
    return gateway.approvals.store.pending()


def approve(gateway: ApprovalGateway, approver: Approver = APPROVER) -> Any:
    (request,) = pending(gateway)
    return gateway.approvals.answer_sync(approver, request.id, True)


def test_the_agents_own_yes_approves_nothing(tmp_path: Path) -> None:
    """A client that answers every elicitation "accept" is not asked, and its call waits,
    then is refused with the request's id; nothing reaches the upstream."""
    asked: list[str] = []

    async def yes(message: str) -> bool | None:
        asked.append(message)
        return True

    gateway = ApprovalGateway(tmp_path, prompt())
    upstream = FakeUpstream()
    result = call(gateway, upstream, ctx(ask=yes))
    assert (asked, upstream.asked) == ([], [])
    (request,) = pending(gateway)
    (text,) = texts(result)
    assert result.is_error
    assert f"request {request.id} is waiting for an approver" in text
    assert f"zerto-rewind approvals approve {request.id}" in text
    assert (request.principal, request.tool, request.vms) == ("agent-a", HOST_TOOL, ["ghost"])
    answers = [line.get("answer") for line in gateway.log()]
    assert answers == ["requested", "waiting"]


def test_an_approved_request_runs_its_call_once(tmp_path: Path) -> None:
    gateway = ApprovalGateway(tmp_path, prompt())
    call(gateway, FakeUpstream(), ctx())
    approve(gateway)
    upstream = FakeUpstream()
    assert_ran_approved(call(gateway, upstream, ctx()), upstream, by="unix:olivia")
    assert upstream.asked == [(TOOL, {"name": "web01"}, 7.0)]
    line = gateway.log()[-1]
    assert (line["answer"], line["approver"]) == ("approved", "unix:olivia")
    # Used once: the same call again opens a new request and is not run.
    again = FakeUpstream()
    assert call(gateway, again, ctx()).is_error
    assert again.asked == []
    assert len(pending(gateway)) == 1


@pytest.mark.parametrize(
    ("client", "args"),
    [("agent-b", None), ("agent-a", {"name": "web02"}), ("agent-a", {"name": "web01", "x": 1})],
)
def test_an_approval_covers_only_its_principal_and_its_call(
    tmp_path: Path, client: str, args: Any
) -> None:
    gateway = ApprovalGateway(tmp_path, prompt())
    call(gateway, FakeUpstream(), ctx())
    approve(gateway)
    upstream = FakeUpstream()
    assert call(gateway, upstream, ctx(client), args).is_error
    assert upstream.asked == []


def test_an_approval_given_while_the_call_waits_runs_it(tmp_path: Path) -> None:
    """The call waits (with progress) and runs as soon as a person approves."""
    gateway = ApprovalGateway(tmp_path, prompt(), wait_s=5.0)
    upstream = FakeUpstream()
    ticks: list[tuple[float, float, str]] = []

    async def progress(done: float, total: float, message: str) -> None:
        ticks.append((done, total, message))

    async def go() -> Any:
        async with anyio.create_task_group() as tg:

            async def approver() -> None:
                while not pending(gateway):
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)
                (request,) = pending(gateway)
                await gateway.approvals.answer(APPROVER, request.id, True)

            tg.start_soon(approver)
            with anyio.fail_after(4):
                return await handle_call(
                    gateway,  # type: ignore[arg-type]
                    upstream,  # type: ignore[arg-type]
                    TOOL,
                    {"name": "web01"},
                    ctx(progress=progress),
                )

    import zerto_rewind.gateway.approvals as approvals_module

    approvals_module_tick = approvals_module.ApprovalsService.wait

    async def fast_ticks(
        self: Any, request_id: str, timeout_s: float, on_tick: Any = None, tick_s: float = 5.0
    ) -> Any:
        return await approvals_module_tick(self, request_id, timeout_s, on_tick, 0.1)

    approvals_module.ApprovalsService.wait = fast_ticks  # type: ignore[method-assign]
    try:
        result = anyio.run(go)
    finally:
        approvals_module.ApprovalsService.wait = approvals_module_tick  # type: ignore[method-assign]
    assert_ran_approved(result, upstream)
    assert ticks, "no progress notification while waiting"
    assert all(total == 5.0 and "waiting for a person" in msg for _, total, msg in ticks)


def test_a_denied_request_is_refused_with_who_and_why(tmp_path: Path) -> None:
    gateway = ApprovalGateway(tmp_path, prompt())
    call(gateway, FakeUpstream(), ctx())
    (request,) = pending(gateway)
    gateway.approvals.answer_sync(APPROVER, request.id, False, "not on a Friday")
    upstream = FakeUpstream()
    result = call(gateway, upstream, ctx())
    # A denied request is decided: the retry opens a new one, and is refused.
    assert upstream.asked == []
    assert result.is_error
    assert gateway.approvals.store.get(request.id).state == "denied"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("approver", "why"),
    [
        (Approver("unix", "mallory"), "not an approver"),
        (Approver("unix", "bob"), "agent"),  # bob runs agents (approvals.agent_users)
        (Approver("web", "olivia-bot"), "agent"),
    ],
)
def test_who_may_not_approve(tmp_path: Path, approver: Approver, why: str) -> None:
    from zerto_rewind.core.approvals import ApprovalError

    gateway = ApprovalGateway(
        tmp_path,
        prompt(),
        approver_users=("olivia", "bob"),
        agent_users=("bob",),
        web_approvers={"olivia-bot": "scrypt$x$x$x$x$x"},
    )
    call(gateway, FakeUpstream(), ctx())
    (request,) = pending(gateway)
    with pytest.raises(ApprovalError, match=why):
        gateway.approvals.answer_sync(approver, request.id, True)
    assert gateway.approvals.store.get(request.id).state == "pending"  # type: ignore[union-attr]
    assert gateway.log()[-1]["answer"] == "refused"


def test_the_requester_cannot_approve_its_own_request(tmp_path: Path) -> None:
    from zerto_rewind.core.approvals import ApprovalError

    gateway = ApprovalGateway(tmp_path, prompt(), approver_users=("olivia", "root"))
    call(gateway, FakeUpstream(), ctx("stdio:root"))
    (request,) = pending(gateway)
    with pytest.raises(ApprovalError, match="made this request"):
        gateway.approvals.answer_sync(Approver("unix", "root"), request.id, True)


def test_no_approver_configured_refuses_at_once(tmp_path: Path) -> None:
    gateway = ApprovalGateway(tmp_path, prompt(), approver_users=())
    result = call(gateway, FakeUpstream(), ctx())
    assert "no approver configured" in texts(result)[0]
    assert pending(gateway) == []


def test_without_approvers_an_approval_is_not_used_up(tmp_path: Path) -> None:
    """The gateway used an existing approval before it checked that anyone may approve
    (the hook and the service checked first). The one approvals step checks first."""
    gateway = ApprovalGateway(tmp_path, prompt())
    call(gateway, FakeUpstream(), ctx())
    approve(gateway)
    gateway.approvals.config = ApprovalsSettings(approver_users=(), wait_s=0.3)
    upstream = FakeUpstream()
    result = call(gateway, upstream, ctx())
    assert upstream.asked == []
    assert "no approver configured" in texts(result)[0]
    digest = ToolCall(HOST_TOOL, {"name": "web01"}).args_digest
    assert gateway.approvals.store.consume("agent-a", HOST_TOOL, digest) is not None


def test_a_store_that_fails_refuses_the_call(tmp_path: Path) -> None:
    """The approval channel down: the prompt is refused, never run."""
    gateway = ApprovalGateway(tmp_path, prompt())
    (tmp_path / "state").write_text("not a directory")
    upstream = FakeUpstream()
    result = call(gateway, upstream, ctx())
    assert upstream.asked == []
    assert "the approval channel failed" in texts(result)[0]


def test_an_expired_approval_does_not_run(tmp_path: Path) -> None:
    gateway = ApprovalGateway(tmp_path, prompt(), expires_s=0.5)
    call(gateway, FakeUpstream(), ctx())
    approve(gateway)
    import time

    time.sleep(0.6)
    upstream = FakeUpstream()
    assert call(gateway, upstream, ctx()).is_error
    assert upstream.asked == []


def test_an_inline_client_with_url_mode_is_shown_the_page(tmp_path: Path) -> None:
    """A 2026-07-28 client that can show URLs gets the request's page, with a bound state;
    its retry with that state waits for the approval (and its own accept approves nothing)."""
    gateway = ApprovalGateway(tmp_path, prompt())
    gateway.approvals.page_url = "https://127.0.0.1:9443"
    first = call(gateway, FakeUpstream(), ctx(url_inline=True, ask_inline=True))
    assert isinstance(first, types.InputRequiredResult)
    (request,) = pending(gateway)
    (elicit,) = first.input_requests.values()
    assert elicit.params.url == f"https://127.0.0.1:9443/requests/{request.id}"
    accepted = {"zerto-rewind/approve": types.ElicitResult(action="accept")}
    retry = ctx(url_inline=True, ask_inline=True, input_responses=accepted,
                request_state=first.request_state)  # fmt: skip
    upstream = FakeUpstream()
    refused = call(gateway, upstream, retry)
    # the state was valid: it waited, and no one approved
    assert refused.is_error
    assert upstream.asked == []
    approve(gateway)
    # The state is single use: replaying it is shown the page again, not run on it alone.
    replay = call(gateway, FakeUpstream(), retry)
    assert not isinstance(replay, types.InputRequiredResult)  # approved: runs
    assert replay.is_error is not True


@pytest.mark.parametrize("change", ["client", "session", "arguments", "expired", "twice"])
def test_request_state_is_bound_and_single_use(tmp_path: Path, change: str) -> None:
    clock = [1000.0]
    states = RequestStates(60.0, clock=lambda: clock[0])
    the_call = ToolCall(HOST_TOOL, {"name": "web01"})
    issued = states.issue(the_call, ctx(), "R1")
    other = {
        "client": ctx("agent-b", request_state=issued),
        "session": CallContext(client="agent-a", session_id="sess-2", request_state=issued),
        "arguments": ctx(request_state=issued),
        "expired": ctx(request_state=issued),
        "twice": ctx(request_state=issued),
    }[change]
    checked = ToolCall(HOST_TOOL, {"name": "web02"}) if change == "arguments" else the_call
    if change == "expired":
        clock[0] += 61
    if change == "twice":
        assert states.valid(checked, other, "R1")
    assert not states.valid(checked, other, "R1")
