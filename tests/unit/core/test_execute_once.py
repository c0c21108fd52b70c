"""The execute-once step (core/execute_once.py) alone: a fake state and a fake clock.

A change whose last identical call's outcome is unknown becomes a prompt that says so;
a settled outcome, another caller, other arguments or a window that ran out change
nothing; a state that cannot be read is a prompt, never a blind send.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall
from zerto_rewind.core.execute_once import KIND, ExecuteOnce, Outcomes
from zerto_rewind.core.pipeline import ORDER, decide
from zerto_rewind.core.record_mac import RecordMac
from zerto_rewind.core.state import GuardState
from zerto_rewind.errors import StateError

TOOL = "mcp__vsphere__create_vm"
WINDOW_S = 600.0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeState:
    """The two calls of GuardStateLike the step uses; ``broken`` makes both fail."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], Any] = {}
        self.broken = False
        self.writes = 0

    def cached(self, kind: str, key: str, ttl_s: float) -> Any | None:
        if self.broken:
            raise StateError("the shared state at redis://127.0.0.1:1 is unreachable")
        return self.entries.get((kind, key))

    def store(self, kind: str, key: str, value: Any) -> None:
        if self.broken:
            raise StateError("the shared state at redis://127.0.0.1:1 is unreachable")
        self.writes += 1
        self.entries[(kind, key)] = value


def a_call(principal: str = "token:agent-a", name: str = "web-01") -> ToolCall:
    return ToolCall(TOOL, {"name": name, "disk_gb": 10}, session_id="s1", principal=principal)


def confirmed() -> Decision:
    return Decision(
        Row.CONFIRMED,
        Outcome.CONTEXT,
        TOOL,
        context="checkpoint 42 protects web-01",
        vms=("web-01",),
    )


def setup(state: FakeState | None = None) -> tuple[FakeState, Clock, Outcomes, ExecuteOnce]:
    state = state or FakeState()
    clock = Clock()
    outcomes = Outcomes(lambda: state, WINDOW_S, clock=clock)  # type: ignore[arg-type,return-value]
    return state, clock, outcomes, ExecuteOnce(outcomes)


def test_the_step_sits_after_the_identity_check_and_before_approvals() -> None:
    assert ORDER.index("vm_identity") < ORDER.index("execute_once") < ORDER.index("approvals")


def test_an_unknown_outcome_makes_the_same_call_a_prompt_naming_when_and_what_to_check() -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now - 30)
    held = step.apply(a_call(), confirmed())
    assert held is not None
    assert (held.row, held.outcome, held.context) == (Row.OUTCOME_UNKNOWN, Outcome.PROMPT, "")
    assert "outcome is unknown" in held.reason
    assert "1970-01-12T13:46:10.000Z" in held.reason  # when the first call was sent
    assert "check the state of web-01 in vCenter" in held.reason
    assert held.vms == ("web-01",)  # the approver and the log still name the VM


def test_a_settled_outcome_lets_the_retry_run_as_before() -> None:
    state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now - 30)
    outcomes.settle(a_call(), "succeeded", clock.now - 5)
    assert step.apply(a_call(), confirmed()) is None
    outcomes.settle(a_call(), "failed", clock.now)
    assert step.apply(a_call(), confirmed()) is None
    assert state.writes == 2  # the second settled outcome had nothing left to settle


def test_a_settled_outcome_with_nothing_to_settle_writes_nothing() -> None:
    state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "succeeded", clock.now)
    assert state.writes == 0
    assert step.apply(a_call(), confirmed()) is None


@pytest.mark.parametrize(
    "other", [a_call(principal="token:agent-b"), a_call(name="web-02"), ToolCall("x", {})]
)
def test_another_caller_tool_or_arguments_is_another_call(other: ToolCall) -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    assert step.apply(other, confirmed()) is None


def test_the_key_is_the_canonical_arguments_whatever_their_order() -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    reordered = ToolCall(TOOL, {"disk_gb": 10, "name": "web-01"}, principal="token:agent-a")
    assert step.apply(reordered, confirmed()) is not None


def test_after_the_window_the_call_runs_as_before() -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    clock.now += WINDOW_S - 1
    assert step.apply(a_call(), confirmed()) is not None
    clock.now += 2
    assert step.apply(a_call(), confirmed()) is None


@pytest.mark.parametrize("outcome", [Outcome.DENY, Outcome.DEFER])
def test_a_stopped_call_stays_as_the_table_left_it(outcome: str) -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    assert step.apply(a_call(), Decision(Row.FAILED, outcome, TOOL)) is None


def test_a_read_only_call_is_never_held() -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    assert step.apply(a_call(), Decision(Row.READ_ONLY, Outcome.NONE, TOOL)) is None


def test_a_prompt_already_keeps_its_reason_and_adds_the_unknown_outcome() -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    asked = Decision(Row.VM_UNKNOWN, Outcome.PROMPT, TOOL, reason="no VPG protects web-01.")
    held = step.apply(a_call(), asked)
    assert held is not None
    assert held.row == Row.VM_UNKNOWN
    assert held.reason.startswith("no VPG protects web-01. zerto-rewind holds")


def test_a_state_that_cannot_be_read_is_a_prompt_saying_so() -> None:
    state, _clock, _outcomes, step = setup()
    state.broken = True
    held = step.apply(a_call(), confirmed())
    assert held is not None
    assert held.outcome == Outcome.PROMPT
    assert "could not read whether the same call was sent before" in held.reason
    assert "StateError" in held.reason


def test_a_state_that_cannot_be_written_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    state, clock, outcomes, _step = setup()
    state.broken = True
    outcomes.settle(a_call(), "unknown", clock.now)  # does not raise: the call already ran
    assert "call outcome not kept in the state" in caplog.text


def test_a_zero_window_turns_it_off() -> None:
    state = FakeState()
    outcomes = Outcomes(lambda: state, 0.0)  # type: ignore[arg-type,return-value]
    outcomes.settle(a_call(), "unknown", 0.0)
    assert state.writes == 0
    assert ExecuteOnce(outcomes).apply(a_call(), confirmed()) is None


def test_through_the_pipeline_the_unknown_outcome_reaches_the_approvals_as_a_prompt() -> None:
    _state, clock, outcomes, step = setup()
    outcomes.settle(a_call(), "unknown", clock.now)
    decision = decide(a_call(), [step], start=confirmed())
    assert decision.outcome == Outcome.PROMPT


def test_in_the_real_state_the_entry_is_sealed_like_the_tag_records(tmp_path: Any) -> None:
    """The entry carries the state's MAC; one changed without the key is not believed
    (read as absent, as a tag record is)."""
    state = GuardState(str(tmp_path / "state"), mac=RecordMac(b"k" * 32))
    outcomes = Outcomes(lambda: state, WINDOW_S)
    step = ExecuteOnce(outcomes)
    outcomes.settle(a_call(), "unknown", time.time())
    assert step.apply(a_call(), confirmed()) is not None
    (path,) = (tmp_path / "state" / "cache").glob(f"{KIND}-*.json")
    raw = json.loads(path.read_text())
    assert raw["value"]["result"] == "unknown"
    assert raw["mac"].startswith("v1:")
    raw["value"]["result"] = "succeeded"  # written without the key
    path.write_text(json.dumps(raw))
    assert state.cached(KIND, json.dumps(["token:agent-a", TOOL, a_call().args_digest]), 60) is None
