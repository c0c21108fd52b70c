"""What the gateway records of a forwarded call (gateway/forward.py): one result line per
forwarded change, and an unknown outcome kept for execute-once.

In-process, with test_calls.py's fake gateway (a real state directory, a real log) and a
fake upstream; the whole story over a real upstream is test_gateway_execute_once.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

from unit.gateway.calls_fakes import (
    HOST_TOOL,
    TOOL,
    FakeGateway,
    FakeUpstream,
    confirmed,
    ctx,
    run,
)
from zerto_rewind.core.decision import Decision, Outcome, Row
from zerto_rewind.gateway.upstream import UpstreamError, _result_of


def result_lines(gateway: FakeGateway) -> list[dict[str, Any]]:
    return [line for line in gateway.log() if line.get("event_type") == "tool_call.result"]


def test_a_forwarded_change_that_succeeds_has_one_result_line_naming_its_checkpoint(
    tmp_path: Path,
) -> None:
    gateway = FakeGateway(tmp_path, confirmed())
    run(gateway, FakeUpstream(), ctx(tool_use_id="toolu_7"))
    (line,) = result_lines(gateway)
    assert line["result"] == "succeeded"
    assert (line["tool"], line["tool_use_id"], line["session_id"]) == (
        HOST_TOOL,
        "toolu_7",
        "sess-1",
    )
    assert line["vms"] == list(confirmed().vms)
    assert line["checkpoint_ids"] == [v.checkpoint_id for v in confirmed().vpgs]
    assert line["vpgs"] == [v.vpg_name for v in confirmed().vpgs]
    assert line["client"] == "claude-desktop"
    assert "arguments" not in line  # no argument value in the log


def test_an_is_error_answer_is_failed(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, confirmed())
    upstream = FakeUpstream()
    upstream.result = types.CallToolResult(
        content=[types.TextContent(type="text", text="no such datastore")], is_error=True
    )
    run(gateway, upstream, ctx())
    assert [line["result"] for line in result_lines(gateway)] == ["failed"]


@pytest.mark.parametrize(
    ("error", "result"),
    [
        (UpstreamError("the VM MCP server 'vsphere' did not answer power_off_vm"), "unknown"),
        (UpstreamError("the VM MCP server 'vsphere' is not connected", result="failed"), "failed"),
    ],
)
def test_a_lost_call_is_unknown_and_an_unsent_one_failed(
    tmp_path: Path, error: UpstreamError, result: str
) -> None:
    gateway = FakeGateway(tmp_path, confirmed())
    answer = run(gateway, FakeUpstream(error=error), ctx())
    assert answer.is_error
    assert [line["result"] for line in result_lines(gateway)] == [result]
    remembered = gateway.outcomes.unknown_since(gateway.calls[0])
    assert (remembered is not None) == (result == "unknown")


def test_the_same_call_after_an_unknown_outcome_is_not_sent(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, confirmed(), trust_client_answers=True)
    run(gateway, FakeUpstream(error=UpstreamError("no answer")), ctx())
    upstream = FakeUpstream()
    again = run(gateway, upstream, ctx())  # no client form to ask: refused
    assert again.is_error
    assert upstream.asked == []
    assert "outcome is unknown" in again.content[0].text
    assert gateway.decisions()[-1]["row"] == "outcome_unknown"


def test_a_read_only_call_writes_no_result(tmp_path: Path) -> None:
    gateway = FakeGateway(tmp_path, Decision(Row.READ_ONLY, Outcome.NONE, HOST_TOOL))
    run(gateway, FakeUpstream(), ctx())
    assert not Path(gateway.log_path).exists()


def test_a_cancelled_call_is_recorded_unknown(tmp_path: Path) -> None:
    """The caller went away while the server worked: the call may have run."""
    gateway = FakeGateway(tmp_path, confirmed())

    class Stalled(FakeUpstream):
        async def call_tool(self, tool: str, arguments: Any, timeout_s: float, meta: Any = None):  # type: ignore[no-untyped-def]
            await anyio.sleep(3600)

    async def go() -> None:
        from zerto_rewind.gateway.calls import handle_call

        with anyio.move_on_after(0.2):
            await handle_call(gateway, Stalled(), TOOL, {"name": "web01"}, ctx())  # type: ignore[arg-type]

    anyio.run(go)
    assert [line["result"] for line in result_lines(gateway)] == ["unknown"]


def test_a_result_line_that_cannot_be_written_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = FakeGateway(tmp_path, confirmed())
    upstream = FakeUpstream()
    original = upstream.call_tool

    async def then_break_the_log(*args: Any, **kwargs: Any) -> types.CallToolResult:
        Path(gateway.log_path).unlink()
        Path(gateway.log_path).mkdir()  # the next write fails
        return await original(*args, **kwargs)

    upstream.call_tool = then_break_the_log  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.decisions"):
        answer = run(gateway, upstream, ctx())
    assert not answer.is_error  # the call ran: its answer goes back
    assert "call result not logged" in caplog.text


@pytest.mark.parametrize(
    ("exc", "result"),
    [
        (MCPError(INTERNAL_ERROR, "vCenter task failed"), "failed"),
        (MCPError(CONNECTION_CLOSED, "Connection closed"), "unknown"),
        (MCPError(REQUEST_TIMEOUT, "timed out"), "unknown"),
        (BaseExceptionGroup("g", [MCPError(INTERNAL_ERROR, "refused")]), "failed"),
        (OSError("broken pipe"), "unknown"),
    ],
)
def test_a_json_rpc_error_is_failed_and_a_lost_connection_unknown(
    exc: BaseException, result: str
) -> None:
    assert _result_of(exc) == result
