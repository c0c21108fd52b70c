"""One tools/call through the gateway (gateway/calls.py), in-process: a fake gateway whose
guard answers a preset decision, and a fake upstream that records what it is asked.

The socket-level behaviour is in tests/integration/gateway/; these pin the call path's
own rules: what is forwarded, the refusal texts and ``_meta``, the prompt answers, the
log line and the metrics.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest

from unit.gateway.calls_fakes import (
    HOST_TOOL,
    REASON,
    TOOL,
    FakeGateway,
    FakeUpstream,
    assert_question,
    assert_ran_approved,
    confirmed,
    ctx,
    prompt,
    run,
    texts,
)
from zerto_rewind.core.decision import Decision, Outcome, Row
from zerto_rewind.gateway import calls
from zerto_rewind.gateway.calls import (
    APPROVAL_FIELD,
    APPROVAL_SCHEMA,
    handle_call,
    host_tool_name,
)
from zerto_rewind.gateway.upstream import UpstreamError


def test_host_tool_name_is_the_hosts_spelling() -> None:
    assert host_tool_name("vsphere", "power_off") == "mcp__vsphere__power_off"


def test_a_read_only_call_is_forwarded_untouched_and_not_logged(tmp_path: Path) -> None:
    """none: the guard sees the host's name and the call; the upstream's result comes back
    as is; metrics count the decision and the forward; read-only leaves no log line."""
    gateway = FakeGateway(tmp_path, Decision(Row.READ_ONLY, Outcome.NONE, HOST_TOOL))
    upstream = FakeUpstream()
    result = run(gateway, upstream, ctx())
    assert result is upstream.result
    assert upstream.asked == [(TOOL, {"name": "web01"}, 7.0)]
    (call,) = gateway.calls
    assert (call.tool_name, call.tool_input, call.session_id, call.origin) == (
        HOST_TOOL,
        {"name": "web01"},
        "sess-1",
        "gateway",
    )
    assert gateway.metrics.seen == [
        ("decided", Row.READ_ONLY, None),
        ("forwarded", "vsphere", Row.READ_ONLY),
    ]
    assert not Path(gateway.log_path).exists()


def test_an_allowed_unlisted_call_is_forwarded_and_logged(tmp_path: Path) -> None:
    """none on another row (unlisted tools allowed): forwarded, and the log line names the
    client, without an answer (nobody was asked)."""
    gateway = FakeGateway(tmp_path, Decision(Row.UNLISTED, Outcome.NONE, HOST_TOOL))
    upstream = FakeUpstream()
    assert run(gateway, upstream, ctx()) is upstream.result
    line, result = gateway.log()
    assert (result["event_type"], result["result"]) == ("tool_call.result", "succeeded")
    assert (line["client"], line["row"], line["origin"]) == (
        "claude-desktop",
        "unlisted",
        "gateway",
    )
    assert (line["session_id"], line["tool"]) == ("sess-1", HOST_TOOL)
    assert "answer" not in line


def test_no_arguments_reach_the_guard_as_an_empty_object(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, Decision(Row.READ_ONLY, Outcome.NONE, HOST_TOOL))
    upstream = FakeUpstream()

    async def go() -> Any:
        return await handle_call(gateway, upstream, TOOL, None, ctx())  # type: ignore[arg-type]

    anyio.run(go)
    assert gateway.calls[0].tool_input == {}
    assert upstream.asked == [(TOOL, None, 7.0)]


def test_a_confirmed_call_is_forwarded_and_its_result_names_the_checkpoint(tmp_path: Path) -> None:
    """context: the upstream's content and _meta are kept; a text block with the guard's
    context and _meta zerto-rewind/checkpoints are added."""
    gateway = FakeGateway(tmp_path, confirmed())
    result = run(gateway, FakeUpstream(), ctx())
    assert texts(result) == ["powered off", "\n\ncheckpoint cp-77"]
    assert result.meta["upstream/key"] == "kept"
    assert result.meta["zerto-rewind/checkpoints"] == [
        {
            "vm": "web01,web02",
            "vpg": "jp-local",
            "vpg_id": "vpg-1",
            "checkpoint_id": "cp-77",
            "tag": "zr vsphere.power_off_vm web01",
        }
    ]
    assert ("forwarded", "vsphere", Row.CONFIRMED) in gateway.metrics.seen


def test_the_checkpoint_block_reads_apart_when_a_host_joins_blocks_with_nothing(
    tmp_path: Path,
) -> None:
    """Copilot CLI concatenates text blocks as they are: the guard's block starts with a blank
    line, so the upstream's last word and the guard's first never run together; a host that
    shows blocks one by one sees the same words once trimmed."""
    result = run(FakeGateway(tmp_path, confirmed()), FakeUpstream(), ctx())
    joined = "".join(texts(result))
    assert joined == "powered off\n\ncheckpoint cp-77"
    assert [t.strip() for t in texts(result)] == ["powered off", "checkpoint cp-77"]


def test_the_checkpoint_block_alone_has_no_leading_blank_line(tmp_path: Path) -> None:
    """An upstream result with no content: the guard's block is the only one, unpadded."""
    upstream = FakeUpstream()
    upstream.result = types.CallToolResult(content=[])
    result = run(FakeGateway(tmp_path, confirmed()), upstream, ctx())
    assert texts(result) == ["checkpoint cp-77"]


def test_structured_content_carries_the_note_where_codex_looks(tmp_path: Path) -> None:
    """Codex shows the model structuredContent instead of the text: an object there gets the
    note under ``zerto-rewind``; the upstream's own keys are kept."""
    upstream = FakeUpstream()
    upstream.result = types.CallToolResult(
        content=[types.TextContent(type="text", text="powered off")],
        structured_content={"result": "powered off"},
    )
    result = run(FakeGateway(tmp_path, confirmed()), upstream, ctx())
    structured = result.structured_content
    assert structured is not None
    assert structured["result"] == "powered off"
    assert structured["zerto-rewind"]["note"] == "checkpoint cp-77"
    assert structured["zerto-rewind"]["checkpoints"][0]["checkpoint_id"] == "cp-77"


def test_a_closed_output_schema_keeps_structured_content_as_it_is(tmp_path: Path) -> None:
    """A tool whose output schema forbids other keys: the note stays in the text and _meta."""
    upstream = FakeUpstream()
    upstream.output = {"type": "object", "additionalProperties": False}
    upstream.result = types.CallToolResult(
        content=[types.TextContent(type="text", text="off")], structured_content={"state": "off"}
    )
    result = run(FakeGateway(tmp_path, confirmed()), upstream, ctx())
    assert result.structured_content == {"state": "off"}
    assert texts(result)[-1] == "\n\ncheckpoint cp-77"


# ---------------------------------------------------------------- refusals


def test_a_denied_call_is_not_forwarded_and_says_why(tmp_path: Path) -> None:
    """deny: isError with the guard's reason; _meta gives the row, refused, and the retry time."""
    decision = Decision(Row.PENDING, Outcome.DENY, HOST_TOOL, reason="pending: retry later")
    decision = decision.but(retry_after=1_800_000_100.0)
    gateway = FakeGateway(tmp_path, decision)
    upstream = FakeUpstream()
    result = run(gateway, upstream, ctx())
    assert upstream.asked == []
    assert (result.is_error, texts(result)) == (True, ["pending: retry later"])
    assert result.meta == {
        "zerto-rewind/row": "pending",
        "zerto-rewind/outcome": "refused",
        "zerto-rewind/retry_after": 1_800_000_100.0,
    }
    assert gateway.metrics.seen == [("decided", Row.PENDING, None)]
    assert gateway.log()[0]["decision"] == "deny"


def test_a_refusal_without_a_reason_still_says_what_was_refused(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, Decision(Row.FAILED, Outcome.DEFER, HOST_TOOL))
    result = run(gateway, FakeUpstream(), ctx())
    assert texts(result) == [f"zerto-rewind did not allow {HOST_TOOL}"]
    assert result.meta == {"zerto-rewind/row": "failed", "zerto-rewind/outcome": "refused"}


def test_an_upstream_failure_is_an_error_that_may_not_have_run(tmp_path: Path) -> None:
    """The guard allowed it, the upstream failed: an error saying the call may not have run,
    naming the checkpoint that protects it; the upstream error is counted, not a forward."""
    gateway = FakeGateway(tmp_path, confirmed())
    result = run(gateway, FakeUpstream(UpstreamError("the VM MCP server 'vsphere' hung")), ctx())
    assert result.is_error is True
    assert texts(result) == [
        "the VM MCP server 'vsphere' hung; the call may not have run. checkpoint cp-77"
    ]
    assert gateway.metrics.seen[-1] == ("upstream_error", "vsphere", "call")
    assert not any(seen[0] == "forwarded" for seen in gateway.metrics.seen)
    plain = FakeGateway(tmp_path, Decision(Row.READ_ONLY, Outcome.NONE, HOST_TOOL))
    result = run(plain, FakeUpstream(UpstreamError("down")), ctx())
    assert texts(result) == ["down; the call may not have run. "]


def test_a_call_whose_log_line_cannot_be_written_is_not_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed (core.record): a change the decision log cannot account for is refused."""
    gateway = FakeGateway(tmp_path, Decision(Row.UNLISTED, Outcome.NONE, HOST_TOOL))
    gateway.settings.log_path = str(tmp_path)  # a directory: the append fails
    upstream = FakeUpstream()
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.decisions"):
        result = run(gateway, upstream, ctx())
    assert (upstream.asked, result.is_error) == ([], True)
    assert "could not be written to the decision log" in texts(result)[0]
    assert any("decision not logged" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- prompts


def test_a_prompt_without_a_way_to_ask_is_refused(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, prompt())
    upstream = FakeUpstream()
    result = run(gateway, upstream, ctx())
    assert upstream.asked == []
    assert texts(result) == [
        f"{REASON} This MCP client cannot ask a person to approve, so the call was not run."
    ]
    assert gateway.metrics.seen == [("decided", Row.VM_UNKNOWN, "no_elicitation")]
    assert gateway.log()[0]["answer"] == "no_elicitation"


@pytest.mark.parametrize(
    ("reply", "answer", "ending"),
    [
        (True, "approved", None),
        (False, "declined", "The person asked declined; the call was not run."),
        (None, "cancelled", "Nobody approved it; the call was not run."),
        ("raise", "failed", "The approval request failed; the call was not run."),
        ("hang", "timeout", "Nobody answered in time; the call was not run."),
    ],
)
def test_a_prompt_asks_the_human_over_the_back_channel(
    tmp_path: Path, reply: Any, answer: str, ending: str | None
) -> None:
    """The question is the guard's reason plus "run it anyway?"; only a yes forwards."""
    asked: list[str] = []

    async def ask(message: str) -> bool | None:
        asked.append(message)
        if reply == "raise":
            raise RuntimeError("client went away")
        if reply == "hang":
            await anyio.sleep(5)
        return reply  # type: ignore[no-any-return]

    gateway = FakeGateway(tmp_path, prompt(), elicit_timeout_s=0.05)
    upstream = FakeUpstream()
    result = run(gateway, upstream, ctx(ask=ask))
    assert len(asked) == 1
    assert_question(asked[0])
    assert gateway.metrics.seen[0] == ("decided", Row.VM_UNKNOWN, answer)
    assert gateway.log()[0]["answer"] == answer
    if ending is None:
        assert_ran_approved(result, upstream)
        assert upstream.asked == [(TOOL, {"name": "web01"}, 7.0)]
    else:
        assert upstream.asked == []
        assert texts(result) == [f"{REASON} {ending}"]


def test_an_inline_client_is_asked_by_an_input_required_result(tmp_path: Path) -> None:
    """A 2026-07-28 client gets an InputRequiredResult: the question as a form, and a state
    bound to this exact call; nothing is forwarded or counted yet."""
    gateway = FakeGateway(tmp_path, prompt())
    upstream = FakeUpstream()
    result = run(gateway, upstream, ctx(ask_inline=True))
    assert isinstance(result, types.InputRequiredResult)
    (key,) = result.input_requests
    assert key == "zerto-rewind/approve"
    params = result.input_requests[key].params
    assert_question(params.message)
    assert params.requested_schema == APPROVAL_SCHEMA
    assert gateway.states.valid(
        gateway.calls[0], ctx(ask_inline=True, request_state=result.request_state)
    )
    assert (upstream.asked, gateway.metrics.seen) == ([], [])


def elicit(action: str, content: dict[str, Any] | None = None) -> types.ElicitResult:
    return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        (elicit("accept", {APPROVAL_FIELD: True}), "approved"),
        (elicit("accept", {APPROVAL_FIELD: False}), "declined"),
        (elicit("accept", {APPROVAL_FIELD: "yes"}), "declined"),  # only a real true approves
        (elicit("accept"), "declined"),
        (elicit("decline"), "declined"),
        (elicit("cancel"), "cancelled"),
    ],
)
def test_an_inline_answer_to_this_very_call_decides(
    tmp_path: Path, response: Any, answer: str
) -> None:
    gateway = FakeGateway(tmp_path, prompt())
    first = run(gateway, FakeUpstream(), ctx(ask_inline=True))
    upstream = FakeUpstream()
    again = ctx(
        ask_inline=True,
        input_responses={"zerto-rewind/approve": response},
        request_state=first.request_state,
    )
    result = run(gateway, upstream, again)
    assert gateway.decisions()[-1]["answer"] == answer
    assert gateway.metrics.seen[-1][0] == ("forwarded" if answer == "approved" else "decided")
    if answer == "approved":
        assert_ran_approved(result, upstream)
    else:
        assert upstream.asked == []
        assert result.is_error is True


@pytest.mark.parametrize("mismatch", ["state", "arguments", "no_answer", "other_key"])
def test_an_inline_answer_to_another_call_asks_again(tmp_path: Path, mismatch: str) -> None:
    """An approval is bound to the call it was asked about: another state, other arguments,
    or no answer under our key means the question is asked again."""
    gateway = FakeGateway(tmp_path, prompt())
    first = run(gateway, FakeUpstream(), ctx(ask_inline=True))
    state = "e30." + "0" * 64 if mismatch == "state" else first.request_state
    key = "other/key" if mismatch == "other_key" else "zerto-rewind/approve"
    responses = {} if mismatch == "no_answer" else {key: elicit("accept", {APPROVAL_FIELD: True})}
    args = {"name": "web02"} if mismatch == "arguments" else None
    upstream = FakeUpstream()
    again = ctx(ask_inline=True, input_responses=responses, request_state=state)
    result = run(gateway, upstream, again, args)
    assert isinstance(result, types.InputRequiredResult)
    assert upstream.asked == []


def test_a_client_with_a_back_channel_is_asked_there_even_if_it_could_answer_inline(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def ask(message: str) -> bool | None:
        asked.append(message)
        return True

    gateway = FakeGateway(tmp_path, prompt())
    upstream = FakeUpstream()
    result = run(gateway, upstream, ctx(ask=ask, ask_inline=True))
    assert len(asked) == 1
    assert_ran_approved(result, upstream)


def test_an_inline_answer_is_bound_to_the_arguments_not_their_order(tmp_path: Path) -> None:
    """The same arguments in another key order are the same call; a value JSON cannot
    encode is bound by its text."""
    from datetime import UTC, datetime

    when = datetime(2027, 1, 15, tzinfo=UTC)
    gateway = FakeGateway(tmp_path, prompt())
    first = run(
        gateway, FakeUpstream(), ctx(ask_inline=True), {"a": 1, "name": "web01", "at": when}
    )
    upstream = FakeUpstream()
    again = ctx(
        ask_inline=True,
        input_responses={"zerto-rewind/approve": elicit("accept", {APPROVAL_FIELD: True})},
        request_state=first.request_state,
    )
    result = run(gateway, upstream, again, {"at": when, "name": "web01", "a": 1})
    assert_ran_approved(result, upstream)


def test_an_inline_answer_that_is_not_an_elicit_result_is_no_approval(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, prompt())
    first = run(gateway, FakeUpstream(), ctx(ask_inline=True))
    upstream = FakeUpstream()
    again = ctx(
        ask_inline=True,
        input_responses={"zerto-rewind/approve": {"action": "accept"}},
        request_state=first.request_state,
    )
    result = run(gateway, upstream, again)
    assert (upstream.asked, result.is_error) == ([], True)
    assert gateway.log()[-1]["answer"] == "cancelled"


def test_the_warnings_say_what_failed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def ask(message: str) -> bool | None:
        raise RuntimeError("client went away")

    gateway = FakeGateway(tmp_path, prompt())
    gateway.settings.log_path = str(tmp_path)  # a directory: the append fails
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.gateway"):
        run(gateway, FakeUpstream(), ctx(ask=ask))
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "elicitation failed: RuntimeError"
    assert messages[1].startswith("decision not logged: ")
    assert str(tmp_path) in messages[1]


def test_the_call_carries_its_start_time_and_the_decision_its_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = iter([100.0, 102.5, 102.5])
    clock = SimpleNamespace(monotonic=lambda: next(ticks, 102.5), time=lambda: 1_800_000_000.0)
    monkeypatch.setattr(calls, "time", clock)  # not the time module: the event loop uses it
    decision = Decision(Row.FAILED, Outcome.DENY, HOST_TOOL, reason="no")
    gateway = FakeGateway(tmp_path, decision)
    run(gateway, FakeUpstream(), ctx())
    assert gateway.calls[0].started_at == 1_800_000_000.0
    assert decision.elapsed_ms == 0  # immutable: the door logs a copy with its duration
    assert gateway.metrics.seconds == pytest.approx(2.5)
    assert gateway.log()[0]["elapsed_ms"] == 2500


def test_the_hosts_tool_use_id_reaches_the_guard_and_the_log(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, Decision(Row.UNLISTED, Outcome.NONE, HOST_TOOL))
    run(gateway, FakeUpstream(), ctx(tool_use_id="toolu_42"))
    assert gateway.calls[0].tool_use_id == "toolu_42"
    assert gateway.log()[0]["tool_use_id"] == "toolu_42"


def test_an_inline_question_is_logged_when_asked(tmp_path: Path) -> None:
    """A question nobody ever answers still leaves its line, answer "asked"."""
    gateway = FakeGateway(tmp_path, prompt())
    run(gateway, FakeUpstream(), ctx(ask_inline=True))
    (line,) = gateway.log()
    assert (line["answer"], line["row"], line["client"]) == (
        "asked",
        "vm_unknown",
        "claude-desktop",
    )
