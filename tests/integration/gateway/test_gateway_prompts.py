"""Prompt rows through the gateway: a person approves on a channel the agent cannot answer.

Over HTTP with tokens, the agent holds its session's token, so an elicitation sent to
that session could be answered by the agent itself: its answer approves nothing. The
call opens an approval request in the gateway's state and waits; an approver answers on
the approvals socket (``zerto-rewind approvals``), known by ``SO_PEERCRED``. Over stdio
for a single user, ``approvals.trust_client_answers`` keeps the client's form answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    actions,
    approvals_cli,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.testing import DEMO_CATALOG, Sandbox

pytestmark = pytest.mark.anyio

PROMPT_ROWS = [
    ("mystery_tool", {"name": "jp-ubuntu"}, "unlisted"),
    ("power_off_vm", {"name": "no-such-vm"}, "vm_unknown"),
    ("reconfigure_vm", {"vm": {"name": "web-01", "cpus": 2}}, "no_vm"),
]
# reconfigure_vm's VM is looked for where it is not: its calls are the no-VM row.
TOOLS = {**DEMO_CATALOG["tools"], "mcp__vsphere__reconfigure_vm": {"vm_arg": "target.name"}}


def configure(box: Sandbox, actions_log: Path, wait_s: float, **approvals: Any) -> None:
    gateway_config(
        box,
        actions_log,
        tools=TOOLS,
        approvals={"approvers": {"users": ["root"]}, "wait_s": wait_s, **approvals},
    )


@pytest.fixture
def socket_path(tmp_path: Path) -> str:
    return str(tmp_path / "approvals.sock")


@pytest.fixture
def gw(
    box: Sandbox, tmp_path: Path, actions_log: Path, socket_path: str
) -> Iterator[GatewayProcess]:
    configure(box, actions_log, wait_s=1.5)
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", socket_path)) as p:
        yield p


def answering(action: str, content: dict[str, Any] | None, seen: list[str]) -> Any:
    """An elicitation callback that records the question and gives a fixed answer."""

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return callback


def pending(socket_path: str) -> list[dict[str, Any]]:
    listed = approvals_cli("--service", f"unix:{socket_path}", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(("tool", "arguments", "row"), PROMPT_ROWS)
async def test_the_agents_own_yes_does_not_run_the_call(
    gw: GatewayProcess,
    box: Sandbox,
    actions_log: Path,
    socket_path: str,
    tool: str,
    arguments: dict[str, Any],
    row: str,
    mode: str,
) -> None:
    """The agent's own SDK client, with its own token, answers every question "accept":
    the call is not run, and it waits as an approval request naming its id."""
    seen: list[str] = []
    callback = answering("accept", {"approve": True}, seen)
    async with client(
        gw.endpoint(), TOKENS["agent-a"], elicitation_callback=callback, mode=mode
    ) as c:
        result = await c.call_tool(tool, arguments)
    assert result.is_error
    assert actions(actions_log) == []
    (request,) = pending(socket_path)
    assert f"request {request['id']} is waiting for an approver" in text_of(result)
    assert (request["tool"], request["principal"]) == (f"mcp__vsphere__{tool}", "agent-a")
    assert [d["answer"] for d in decisions(box) if d["row"] == row] == ["requested", "waiting"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_approver_on_the_socket_lets_the_waiting_call_run(
    box: Sandbox, tmp_path: Path, actions_log: Path, socket_path: str, mode: str
) -> None:
    """The call waits; a person lists it and approves it with the CLI; the call runs once."""
    configure(box, actions_log, wait_s=30)
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", socket_path)) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"], mode=mode) as c:
            async with anyio.create_task_group() as tg:
                results: list[Any] = []

                async def the_call() -> None:
                    results.append(await c.call_tool("power_off_vm", {"name": "no-such-vm"}))

                tg.start_soon(the_call)
                with anyio.fail_after(20):
                    while not (found := await anyio.to_thread.run_sync(pending, socket_path)):
                        await anyio.sleep(0.1)
                approved = await anyio.to_thread.run_sync(
                    lambda: approvals_cli(
                        "--service", f"unix:{socket_path}", "approve", found[0]["id"]
                    )
                )
                assert approved.returncode == 0, approved.stderr
            (result,) = results
            assert not result.is_error, text_of(result)
            # Used once: the same call again waits as a new request, and is not run.
            again = await c.call_tool("power_off_vm", {"name": "no-such-vm"})
    assert actions(actions_log) == [{"tool": "power_off_vm", "vm": "no-such-vm"}] or [
        a["tool"] for a in actions(actions_log)
    ] == ["power_off_vm"]
    assert again.is_error
    answers = [(d["answer"], d.get("approver")) for d in decisions(box)]
    assert ("approved", "unix:root") in answers
    assert ("used", "unix:root") in answers


async def test_a_denial_is_refused_with_who_denied_and_why(
    gw: GatewayProcess, box: Sandbox, actions_log: Path, socket_path: str
) -> None:
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
        (request,) = pending(socket_path)
        denied = approvals_cli(
            "--service", f"unix:{socket_path}", "deny", request["id"], "--reason", "not today"
        )
        assert denied.returncode == 0, denied.stderr
        shown = approvals_cli("--service", f"unix:{socket_path}", "show", request["id"], "--json")
    assert json.loads(shown.stdout)["state"] == "denied"
    assert json.loads(shown.stdout)["note"] == "not today"
    assert actions(actions_log) == []
    assert ("denied", "unix:root") in [(d["answer"], d.get("approver")) for d in decisions(box)]


async def test_an_approval_does_not_cover_another_token(
    gw: GatewayProcess, box: Sandbox, actions_log: Path, socket_path: str
) -> None:
    """agent-a's approved call, made by agent-b with the same arguments, is not run."""
    async with client(gw.endpoint(), TOKENS["agent-a"]) as a:
        await a.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    (request,) = pending(socket_path)
    assert (
        approvals_cli("--service", f"unix:{socket_path}", "approve", request["id"]).returncode == 0
    )
    async with client(gw.endpoint(), TOKENS["agent-b"]) as b:
        result = await b.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert result.is_error
    assert actions(actions_log) == []


def test_trusting_client_answers_with_tokens_over_http_does_not_start(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    configure(box, actions_log, wait_s=1, trust_client_answers=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zerto_rewind",
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--allow-privileged-upstream",
        ],
        env=box.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "approvals.trust_client_answers" in proc.stderr
    assert "could answer its own questions" in proc.stderr


def stdio_gateway(box: Sandbox, callback: Any) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "zerto_rewind",
            "gateway",
            "--stdio",
            "--upstream",
            "vsphere",
            "--allow-privileged-upstream",
        ],
        env=box.env(),
    )
    return Client(params, cache=None, elicitation_callback=callback)


@pytest.mark.parametrize(
    ("action", "content", "answer", "runs"),
    [
        ("accept", {"approve": True}, "approved", True),
        ("decline", None, "declined", False),
        ("cancel", None, "cancelled", False),
        ("accept", {"approve": False}, "declined", False),
    ],
)
async def test_a_single_user_stdio_gateway_may_trust_its_clients_answer(
    box: Sandbox,
    actions_log: Path,
    action: str,
    content: dict[str, Any] | None,
    answer: str,
    runs: bool,
) -> None:
    """With approvals.trust_client_answers over stdio, the form answer decides (as before)."""
    configure(box, actions_log, wait_s=1, trust_client_answers=True)
    seen: list[str] = []
    async with stdio_gateway(box, answering(action, content, seen)) as c:
        result = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert len(seen) == 1
    assert "no Zerto checkpoint" in seen[0]
    assert result.is_error is not runs
    assert bool(actions(actions_log)) is runs
    assert decisions(box)[-1]["answer"] == answer
