"""The pipeline (core.pipeline): one classification, the steps in their documented order,
and an undecided call denied. Steps are small fakes; the table's own rows are test_guard*."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from zerto_rewind.core import pipeline
from zerto_rewind.core.catalog import MUTATING, READ_ONLY, Classification
from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall
from zerto_rewind.core.pipeline import ORDER, Table, decide, decide_async

TOOL = "mcp__vsphere__power_off_vm"


class Step:
    """A step that records what it saw and answers ``answer`` (None: leaves it)."""

    def __init__(self, name: str, seen: list[tuple[str, str]], answer: Any = None) -> None:
        self.name = name
        self.seen = seen
        self.answer = answer

    def apply(self, call: ToolCall, so_far: Decision) -> Any:
        self.seen.append((self.name, so_far.row))
        return self.answer(so_far) if callable(self.answer) else self.answer


def test_the_steps_run_in_the_documented_order_whatever_the_list_says() -> None:
    seen: list[tuple[str, str]] = []
    steps = [Step(name, seen) for name in reversed(ORDER)]
    decide(ToolCall(TOOL, {}), steps, verdict=Classification(MUTATING, TOOL))
    assert [name for name, _row in seen] == list(ORDER)


def test_a_call_no_step_decides_is_denied_with_a_reason() -> None:
    decision = decide(ToolCall(TOOL, {}), [], verdict=Classification(MUTATING, TOOL))
    assert (decision.row, decision.outcome) == (Row.UNDECIDED, Outcome.DENY)
    assert "no step of the guard decided" in decision.reason


def test_the_call_is_classified_once_and_every_step_reads_that_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []

    def classify(tool: str, arguments: Any, catalog: Any) -> Classification:
        made.append(tool)
        return Classification(READ_ONLY, tool)

    monkeypatch.setattr(pipeline, "classify", classify)
    verdicts: list[Classification | None] = []

    def table(so_far: Decision) -> Decision:
        verdicts.append(so_far.classification)
        return Decision(Row.READ_ONLY, Outcome.NONE, TOOL)

    def approvals(so_far: Decision) -> None:
        verdicts.append(so_far.classification)

    steps = [Step("table", [], table), Step("approvals", [], approvals)]
    decision = decide(ToolCall(TOOL, {}), steps, catalog=object())  # type: ignore[arg-type]
    assert made == [TOOL]
    assert verdicts[0] is verdicts[1] is decision.classification
    assert decision.classification is not None
    assert decision.classification.kind == READ_ONLY


def test_a_step_that_answers_first_keeps_the_table_from_running() -> None:
    """Pins (or self-protection) answered: the table does not tag a call already decided."""

    class Guard:
        def decide(self, call: ToolCall, **kwargs: Any) -> Decision:
            raise AssertionError("the table ran on a decided call")

    held = Decision(Row.UNLISTED, Outcome.PROMPT, TOOL, reason="unreviewed")
    steps = [Table(Guard()), Step("pins", [], held)]  # type: ignore[arg-type]
    decision = decide(ToolCall(TOOL, {}), steps, verdict=Classification(MUTATING, TOOL))
    assert decision.reason == "unreviewed"


def test_the_table_hands_the_guard_the_one_verdict() -> None:
    given: list[dict[str, Any]] = []

    class Guard:
        def decide(self, call: ToolCall, **kwargs: Any) -> Decision:
            given.append(kwargs)
            return Decision(Row.READ_ONLY, Outcome.NONE, call.tool_name)

    verdict = Classification(READ_ONLY, TOOL)
    decide(ToolCall(TOOL, {}), [Table(Guard(), consume=False)], verdict=verdict)  # type: ignore[arg-type]
    assert given == [{"consume": False, "verdict": verdict}]


def test_a_step_that_waits_needs_the_async_pipeline() -> None:
    async def later() -> Decision:
        return Decision(Row.READ_ONLY, Outcome.NONE, TOOL)

    def waits(so_far: Decision) -> Any:
        return later()

    call = ToolCall(TOOL, {})
    verdict = Classification(READ_ONLY, TOOL)
    step = Step("table", [], waits)
    decision = anyio.run(lambda: decide_async(call, [step], verdict=verdict))
    assert decision.row == Row.READ_ONLY
    made: list[Any] = []
    step.answer = lambda so_far: made.append(later()) or made[-1]
    with pytest.raises(TypeError, match="use decide_async"):
        decide(call, [step], verdict=verdict)
    for pending in made:
        pending.close()


def test_an_unknown_step_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy 'audit'"):
        decide(ToolCall(TOOL, {}), [Step("audit", [])], verdict=Classification(MUTATING, TOOL))
