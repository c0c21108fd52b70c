"""The fakes of the gateway's call-path tests (test_calls and its siblings): a gateway
whose guard answers a preset decision, an upstream that records what it is asked, and
the helpers that run one call through them and read its answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types

from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall, VpgOutcome
from zerto_rewind.core.execute_once import ExecuteOnce, Outcomes
from zerto_rewind.core.pipeline import Policy, decide_async
from zerto_rewind.core.state import GuardState
from zerto_rewind.gateway.calls import (
    CallContext,
    handle_call,
)
from zerto_rewind.gateway.request_state import RequestStates
from zerto_rewind.gateway.service import ThreadedExecuteOnce

TOOL = "power_off_vm"


HOST_TOOL = "mcp__vsphere__power_off_vm"


REASON = "zerto-rewind: no VPG protects ghost."


class FakeMetrics:
    """Records every metrics call as a tuple."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def decided(self, decision: Decision, seconds: float, answer: str | None) -> None:
        self.seen.append(("decided", decision.row, answer))
        self.seconds = seconds

    def upstream_error(self, upstream: str, kind: str) -> None:
        self.seen.append(("upstream_error", upstream, kind))

    def forwarded(self, upstream: str, row: str) -> None:
        self.seen.append(("forwarded", upstream, row))


class FakeGateway:
    """The parts of gateway.service.Gateway a call uses; the guard answers ``decision``."""

    def __init__(
        self,
        tmp_path: Path,
        decision: Decision,
        *,
        elicit_timeout_s: float = 5.0,
        trust_client_answers: bool = True,
    ):
        self.decision = decision
        self.calls: list[ToolCall] = []
        self.metrics = FakeMetrics()
        self.log_path = str(tmp_path / "decisions.log")
        # These tests pin the client's own form answer (approvals.trust_client_answers);
        # approval requests have their own tests (test_calls_approvals.py).
        self.settings = SimpleNamespace(
            log_path=self.log_path,
            gateway=SimpleNamespace(elicit_timeout_s=elicit_timeout_s),
            approvals=SimpleNamespace(trust_client_answers=trust_client_answers),
            catalog=SimpleNamespace(resolvers={}),  # no identity check: test_identity.py
        )
        self.states = RequestStates(60.0)
        self.outcomes, self.execute_once = execute_once(tmp_path)

    async def decide(self, call: ToolCall, after: Sequence[Policy] = ()) -> Decision:
        """The table's answer is ``self.decision``; the door's own steps run after it."""
        self.calls.append(call)
        return await decide_async(call, after, start=self.decision)

    def call_timeout_s(self, upstream: Any) -> float:
        assert isinstance(upstream, FakeUpstream)
        return 7.0

    def log(self) -> list[dict[str, Any]]:
        with open(self.log_path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]

    def decisions(self) -> list[dict[str, Any]]:
        """The decision lines of the log, without the forwarded calls' result lines."""
        return [line for line in self.log() if line.get("event_type") != "tool_call.result"]


def execute_once(tmp_path: Path) -> tuple[Outcomes, ThreadedExecuteOnce]:
    """The gateway's execute-once parts over a real state directory under ``tmp_path``."""
    state = GuardState(str(tmp_path / "guard-state"))
    outcomes = Outcomes(lambda: state, 600.0)
    return outcomes, ThreadedExecuteOnce(ExecuteOnce(outcomes))


class FakeUpstream:
    """An upstream named vsphere that answers ``result`` (or raises ``error``)."""

    name = "vsphere"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.asked: list[tuple[str, Any, float]] = []
        self.result = types.CallToolResult(
            content=[types.TextContent(type="text", text="powered off")],
            _meta={"upstream/key": "kept"},
        )

    output: dict[str, Any] | None = None
    schema: dict[str, Any] | None = None

    def output_schema(self, name: str) -> dict[str, Any] | None:
        return self.output

    def input_schema(self, name: str) -> dict[str, Any] | None:
        return self.schema

    async def call_tool(
        self, tool: str, arguments: Any, timeout_s: float, meta: Any = None
    ) -> types.CallToolResult:
        self.asked.append((tool, arguments, timeout_s))
        if self.error is not None:
            raise self.error
        return self.result


def assert_ran_approved(result: Any, upstream: FakeUpstream, by: str | None = None) -> None:
    """The upstream's own answer, then the guard's note: no rewind point, and who approved."""
    assert not result.is_error
    assert result.content[: len(upstream.result.content)] == upstream.result.content
    note = result.content[-1].text
    assert "ran with no rewind point" in note
    if by is not None:
        assert f"{by} approved this call at " in note
    assert "zerto-rewind/approval" in result.meta
    assert result.meta["upstream/key"] == "kept"


def confirmed() -> Decision:
    vpg = VpgOutcome(
        "vpg-1", "jp-local", ("web01", "web02"), site_kind="vcenter", row=Row.CONFIRMED
    )
    vpg.checkpoint_id, vpg.tag = "cp-77", "zr vsphere.power_off_vm web01"
    return Decision(
        Row.CONFIRMED, Outcome.CONTEXT, HOST_TOOL, context="checkpoint cp-77", vpgs=[vpg]
    )


def prompt() -> Decision:
    return Decision(Row.VM_UNKNOWN, Outcome.PROMPT, HOST_TOOL, reason=REASON, vms=("ghost",))


def assert_question(text: str) -> None:
    """The question put to a human: the guard's reason, the tool, and that there is no
    checkpoint (its exact wording belongs to the gateway's docs, and changes)."""
    assert REASON in text
    assert f"Run {HOST_TOOL} " in text
    assert "no Zerto checkpoint" in text
    assert text.strip() == text


def run(gateway: FakeGateway, upstream: FakeUpstream, ctx: CallContext, args: Any = None) -> Any:
    arguments = {"name": "web01"} if args is None else args

    async def go() -> Any:
        return await handle_call(gateway, upstream, TOOL, arguments, ctx)  # type: ignore[arg-type]

    return anyio.run(go)


def ctx(**fields: Any) -> CallContext:
    return CallContext(client="claude-desktop", session_id="sess-1", **fields)


def texts(result: types.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, types.TextContent)]


# ---------------------------------------------------------------- forwarding
