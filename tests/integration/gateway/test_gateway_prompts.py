"""Prompt rows through the gateway: MCP elicitation when the client can, else refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from gateway_helpers import (
    TOKENS,
    GatewayProcess,
    actions,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)

from zerto_rewind.cli.sandbox import DEMO_CATALOG, Sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def gw(box: Sandbox, tmp_path: Path, actions_log: Path) -> Iterator[GatewayProcess]:
    # reconfigure_vm's VM is looked for where it is not: its calls are the no-VM row.
    tools = {**DEMO_CATALOG["tools"], "mcp__vsphere__reconfigure_vm": {"vm_arg": "target.name"}}
    gateway_config(box, actions_log, gateway={"elicit_timeout_s": 3}, tools=tools)
    with gateway_process(box, tmp_path) as process:
        yield process


def answering(action: str, content: dict[str, Any] | None, seen: list[str]) -> Any:
    """An elicitation callback that records the question and gives a fixed answer."""

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return callback


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("tool", "arguments", "row"),
    [
        ("mystery_tool", {"name": "jp-ubuntu"}, "unlisted"),
        ("power_off_vm", {"name": "no-such-vm"}, "vm_unknown"),
        ("reconfigure_vm", {"vm": {"name": "web-01", "cpus": 2}}, "no_vm"),
    ],
)
async def test_approve_forwards_the_call(
    gw: GatewayProcess,
    box: Sandbox,
    actions_log: Path,
    tool: str,
    arguments: dict[str, Any],
    row: str,
    mode: str,
) -> None:
    """Each prompt row asks the human with the reason; approve runs the call, and it is logged.

    Both protocol eras: ``legacy`` asks over the back channel, ``auto`` (2026-07-28)
    by an InputRequiredResult that the client answers and retries.
    """
    seen: list[str] = []
    callback = answering("accept", {"approve": True}, seen)
    async with client(
        gw.endpoint(), TOKENS["agent-a"], elicitation_callback=callback, mode=mode
    ) as c:
        result = await c.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert len(seen) == 1
    assert "without a checkpoint" in seen[0] or "no Zerto checkpoint" in seen[0]
    assert [a["tool"] for a in actions(actions_log)] == [tool]
    # A 2026-07-28 client is asked by an InputRequiredResult: that question is logged
    # at once ("asked"), so one nobody answers still leaves a line; then the answer.
    answers = [d["answer"] for d in decisions(box) if d["row"] == row]
    assert answers == (["asked", "approved"] if mode == "auto" else ["approved"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("action", "content", "answer"),
    [
        ("decline", None, "declined"),
        ("cancel", None, "cancelled"),
        ("accept", {"approve": False}, "declined"),
    ],
)
async def test_decline_cancel_or_unticked_does_not_run(
    gw: GatewayProcess,
    box: Sandbox,
    actions_log: Path,
    action: str,
    content: dict[str, Any] | None,
    answer: str,
    mode: str,
) -> None:
    """Anything but an explicit approval leaves the call unforwarded (both eras)."""
    callback = answering(action, content, [])
    async with client(
        gw.endpoint(), TOKENS["agent-a"], elicitation_callback=callback, mode=mode
    ) as c:
        result = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert result.is_error
    assert "the call was not run" in text_of(result)
    assert actions(actions_log) == []
    assert decisions(box)[-1]["answer"] == answer


async def test_an_unanswered_question_times_out_as_a_refusal(
    gw: GatewayProcess, box: Sandbox, actions_log: Path
) -> None:
    """A human who never answers is not an approval: refused after elicit_timeout_s."""
    import anyio

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(30)
        return types.ElicitResult(action="accept", content={"approve": True})

    # Handshake era: the gateway itself waits for the answer over the back channel.
    async with client(
        gw.endpoint(), TOKENS["agent-a"], elicitation_callback=never, mode="legacy"
    ) as c:
        with anyio.fail_after(15):
            result = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert result.is_error
    assert "Nobody answered in time" in text_of(result)
    assert actions(actions_log) == []
    assert decisions(box)[-1]["answer"] == "timeout"
