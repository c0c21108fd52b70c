"""Execute-once through the real gateway process, over an upstream that stalls after a call ran.

The stand-in vSphere server runs the call (its action log records it), then never answers
(``stalling_server.py``). The gateway's answer times out: the decision log holds the
call's result line, ``unknown``. The same call again is not sent blind: it is a prompt
that says the first call's outcome is unknown (the server still ran it once). Approved
by a person, or after ``guard.unknown_outcome_window_s``, it is forwarded. A call the
server answers has a ``succeeded`` result line; one it answers with ``isError``,
``failed``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    actions,
    approvals_cli,
    client,
    decisions,
    gateway_config,
    gateway_process,
    results,
    stand_in_upstream,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio
STALLING = Path(__file__).with_name("stalling_server.py")
UPSTREAM_TIMEOUT_S = 3
WINDOW_S = 12.0
VM = "jp-ubuntu"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    guard = {"timeout_s": 10, "landing_allowance_s": 0.5, "unknown_outcome_window_s": WINDOW_S}
    with Sandbox(str(tmp_path / "box"), guard=guard) as sandbox:
        yield sandbox


@pytest.fixture
def control(tmp_path: Path) -> Path:
    return tmp_path / "stall-control"


def stalling_upstream(box: Sandbox, actions_log: Path, control: Path) -> dict[str, Any]:
    upstream = stand_in_upstream(box, actions_log)
    upstream["command"] = [sys.executable, str(STALLING)]
    upstream["env"]["STALL_CONTROL"] = str(control)
    upstream["timeout_s"] = UPSTREAM_TIMEOUT_S
    return upstream


def power_offs(actions_log: Path) -> int:
    return sum(1 for a in actions(actions_log) if a["tool"] == "power_off_vm")


async def power_off(url: str) -> Any:
    async with client(url, TOKENS["agent-a"]) as c:
        return await c.call_tool("power_off_vm", {"name": VM})


async def test_a_stalled_call_is_unknown_and_its_retry_waits_for_a_person(
    box: Sandbox, tmp_path: Path, actions_log: Path, control: Path
) -> None:
    sock = str(tmp_path / "approvals.sock")
    gateway_config(
        box,
        upstream=stalling_upstream(box, actions_log, control),
        approvals={"approvers": {"users": ["root"]}, "wait_s": 1},
    )
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", sock)) as gw:
        control.write_text("stall")
        first = await power_off(gw.endpoint())
        assert first.is_error
        assert "may not have run" in text_of(first)
        assert power_offs(actions_log) == 1  # it reached the server, and ran
        (lost,) = results(box)
        assert (lost["result"], lost["tool"], lost["vms"]) == (
            "unknown",
            "mcp__vsphere__power_off_vm",
            [VM],
        )
        assert lost["checkpoint_ids"]  # the rewind point taken in front of it
        assert lost["client"] == "agent-a"

        control.write_text("")
        again = await power_off(gw.endpoint())
        assert again.is_error
        said = text_of(again)
        assert "outcome is unknown" in said
        assert f"check the state of {VM} in vCenter" in said
        assert power_offs(actions_log) == 1  # not sent blind
        asked = decisions(box)[-1]
        assert (asked["row"], asked["decision"]) == ("outcome_unknown", "prompt")
        request_id = asked["approval_id"]

        approved = await anyio.to_thread.run_sync(
            lambda: approvals_cli("--service", f"unix:{sock}", "approve", request_id)
        )
        assert approved.returncode == 0, approved.stderr
        ran = await power_off(gw.endpoint())
        assert not ran.is_error, text_of(ran)
        assert power_offs(actions_log) == 2
        assert [r["result"] for r in results(box)] == ["unknown", "succeeded"]

        settled = await power_off(gw.endpoint())  # after a settled outcome: as before
        assert not settled.is_error, text_of(settled)
        assert power_offs(actions_log) == 3


async def test_after_the_window_the_same_call_is_forwarded_again(
    box: Sandbox, tmp_path: Path, actions_log: Path, control: Path
) -> None:
    gateway_config(box, upstream=stalling_upstream(box, actions_log, control))
    with gateway_process(box, tmp_path) as gw:
        control.write_text("stall")
        assert (await power_off(gw.endpoint())).is_error
        sent = time.monotonic()  # the call was sent before its answer timed out
        control.write_text("")
        held = await power_off(gw.endpoint())
        assert held.is_error  # a prompt, and no approver: refused, not sent
        assert "outcome is unknown" in text_of(held)
        assert power_offs(actions_log) == 1
        await anyio.sleep(max(0.0, WINDOW_S + 0.5 - (time.monotonic() - sent)))
        ran = await power_off(gw.endpoint())
        assert not ran.is_error, text_of(ran)
    assert power_offs(actions_log) == 2
    assert [r["result"] for r in results(box)] == ["unknown", "succeeded"]


async def test_a_call_the_server_fails_has_a_failed_result(
    box: Sandbox, tmp_path: Path, actions_log: Path, control: Path
) -> None:
    gateway_config(box, upstream=stalling_upstream(box, actions_log, control))
    with gateway_process(box, tmp_path) as gw:
        control.write_text("error")
        failed = await power_off(gw.endpoint())
        assert failed.is_error
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.call_tool("list_vms", {})  # read-only: no result line, whatever it says
        control.write_text("")
        retried = await power_off(gw.endpoint())  # a settled outcome: runs as before
        assert not retried.is_error, text_of(retried)
    assert [r["result"] for r in results(box)] == ["failed", "succeeded"]  # none for list_vms
    line = decisions(box)[0]
    (result, _) = results(box)
    assert result["session_id"] == line["session_id"]
    assert result["tool_use_id"] == line["tool_use_id"]  # the gateway's own id: they join
    assert result["tool_use_id"].startswith("gw-")
