"""The record step (core.record): one line per decision, none for read-only calls, and
one behaviour when the line cannot be written — a call that would run is refused."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall
from zerto_rewind.core.record import record

TOOL = "mcp__vsphere__power_off_vm"


class Counted:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float, str | None]] = []

    def decided(self, decision: Decision, seconds: float, answer: str | None) -> None:
        self.seen.append((decision.row, decision.outcome, seconds, answer))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_read_only_call_writes_no_line_but_is_counted(tmp_path: Path) -> None:
    metrics = Counted()
    decision = Decision(Row.READ_ONLY, Outcome.NONE, TOOL)
    log = tmp_path / "decisions.log"
    assert record(decision, ToolCall(TOOL, {}), str(log), metrics=metrics, seconds=0.5) is decision
    assert lines(log) == []
    assert metrics.seen == [(Row.READ_ONLY, Outcome.NONE, 0.5, None)]


def test_a_decision_writes_one_line_with_the_doors_fields(tmp_path: Path) -> None:
    decision = Decision(Row.CONFIRMED, Outcome.CONTEXT, TOOL, context="cp 7", vms=("web01",))
    log = tmp_path / "decisions.log"
    stamped: list[str] = []
    kept = record(
        decision,
        ToolCall(TOOL, {"name": "web01", "secret": "s3cr3t"}),
        str(log),
        extra={"client": "unix:agent", "host": None},
        stamp=lambda line: stamped.append(line["row"]),
    )
    assert kept is decision
    (line,) = lines(log)
    assert (line["row"], line["decision"], line["client"]) == ("confirmed", "context", "unix:agent")
    assert "host" not in line
    assert "s3cr3t" not in json.dumps(line)
    assert stamped == ["confirmed"]


def test_an_approval_answer_logs_the_prompt_it_answered(tmp_path: Path) -> None:
    """The approvals step's refusal is logged as the prompt row with its answer, and the
    reason the approver was asked with (not the agent's whole refusal)."""
    asked = Decision(Row.VM_UNKNOWN, Outcome.PROMPT, TOOL, reason="no VPG protects web01.")
    refused = asked.but(
        outcome=Outcome.DENY,
        reason=f"{asked.reason} It needs…",
        answer="waiting",
        asked=asked.reason,
    )
    log = tmp_path / "decisions.log"
    record(refused, ToolCall(TOOL, {}), str(log))
    (line,) = lines(log)
    assert (line["decision"], line["answer"], line["reason"]) == (
        "prompt",
        "waiting",
        "no VPG protects web01.",
    )


@pytest.mark.parametrize(
    "decision",
    [
        Decision(Row.CONFIRMED, Outcome.CONTEXT, TOOL, context="cp 7"),
        Decision(Row.UNLISTED, Outcome.NONE, TOOL),
    ],
)
def test_a_call_that_would_run_is_refused_when_its_line_cannot_be_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, decision: Decision
) -> None:
    metrics = Counted()
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.decisions"):
        kept = record(decision, ToolCall(TOOL, {}), str(tmp_path), metrics=metrics)  # a dir
    assert (kept.row, kept.outcome, kept.context) == (decision.row, Outcome.DENY, "")
    assert "could not be written to the decision log" in kept.reason
    assert "the call was not run" in kept.reason
    assert metrics.seen[0][1] == Outcome.DENY  # counted as what the door did
    assert [r.getMessage().startswith("decision not logged: ") for r in caplog.records] == [True]


def test_a_call_already_stopped_stays_as_it_was_with_the_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    decision = Decision(Row.FAILED, Outcome.DENY, TOOL, reason="the VPG is paused")
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.decisions"):
        assert record(decision, ToolCall(TOOL, {}), str(tmp_path)) is decision
    assert any("decision not logged" in r.getMessage() for r in caplog.records)


def test_a_prompt_the_door_will_run_is_refused_too(tmp_path: Path) -> None:
    """The client's own person said yes (trust_client_answers): the door says it runs."""
    decision = Decision(Row.VM_UNKNOWN, Outcome.PROMPT, TOOL, reason="no VPG")
    kept = record(decision, ToolCall(TOOL, {}), str(tmp_path), runs=True)
    assert kept.outcome == Outcome.DENY
