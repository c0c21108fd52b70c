"""Every row of the decision table through the gateway, in the real Claude Code CLI, no hook.

Claude Code's only vSphere server is ``zerto-rewind gateway`` — once as a stdio command (a new
gateway per run), once over streamable HTTP with a bearer token (one gateway per module) —
and the gateway's upstream is the real mcvsphere (PyPI) against govmomi's vCenter simulator.
Nothing is installed in Claude Code's settings: no hook, no permission rule.

Each test reads three independent records: the vCenter itself (pyVmomi: did the VM change),
the ZVM simulator (its tag counters and the journal's tagged checkpoints) and what the
scripted model was sent (the tool results in its next request); plus the gateway's decision
log. Each row uses its own VM and VPG (``gateway_e2e.VM``), so the tests of one transport
share one vcsim, one ZVM simulator and (HTTP) one gateway.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.fake_anthropic import call, delayed
from e2e.gateway_e2e import (
    AWS_VPG,
    BUDGET_S,
    CLIENT_NAME,
    CONFIRMED_VPG,
    DEFAULT_VMS,
    FAILED_VPG,
    UNLISTED_TOOL,
    UNLISTED_VPG,
    VM,
    GatewayRig,
    sent_messages,
    tool,
)
from e2e.guarded import parse_time, retry_time_told
from e2e.harness import ClaudeRun, E2ESession

TRANSPORTS = ["stdio", "http"]
POWER_OFF, LIST_VMS = tool("power_off"), tool("list_vms")
MAINTENANCE = tool("enter_maintenance_mode")
CHECKPOINT_NOTE = "zerto-rewind: a Zerto checkpoint protects this"


@pytest.fixture(scope="module", params=TRANSPORTS)
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[str, GatewayRig]
]:  # fmt: skip
    transport = str(request.param)
    root = tmp_path_factory.mktemp(f"gateway-{transport}")
    with GatewayRig.running(root, http=transport == "http") as started:
        yield transport, started


class Through:
    """One test's Claude Code session whose only VM server is the gateway."""

    def __init__(self, transport: str, rig: GatewayRig, e2e: E2ESession, tmp: Path) -> None:
        self.transport, self.rig, self.e2e = transport, rig, e2e
        self.capture = tmp / "sent.jsonl" if transport == "stdio" else None
        e2e.mcp_config = rig.mcp_config(tmp / "gateway-mcp.json", transport, capture=self.capture)
        self.log_start = len(rig.log())

    def run(self) -> ClaudeRun:
        # No settings file: nothing but the gateway stands between the model and the VMs.
        run = self.e2e.run(permission_mode="bypassPermissions", timeout=120)
        assert run.ok, run.describe()
        assert not self.e2e.project_dir.joinpath(".claude").exists()
        return run

    def decisions(self) -> list[dict[str, Any]]:
        return self.rig.log_since(self.log_start)

    def client(self) -> str:
        """The client name the gateway logs: the token's name over HTTP, the OS user on stdio."""
        return CLIENT_NAME if self.transport == "http" else f"stdio:{getpass.getuser()}"


@pytest.fixture
def gw(rig: tuple[str, GatewayRig], e2e: E2ESession, tmp_path: Path) -> Through:
    transport, started = rig
    return Through(transport, started, e2e, tmp_path)


def test_confirmed_call_runs_on_a_tagged_checkpoint_and_the_model_is_told(gw: Through) -> None:
    """Read-only passes; power_off gets a landed tag first, the VM really powers off, and the
    model's next request carries the checkpoint in the tool result."""
    gw.rig.power_on(VM.confirmed)
    tags_before = gw.rig.tag_requests(CONFIRMED_VPG)
    gw.e2e.script([[call(LIST_VMS)], [call(POWER_OFF, name=VM.confirmed)], "powered off"])

    run = gw.run()

    assert run.result == "powered off"
    assert run.permission_denials == []
    # the vCenter: that VM and only that VM is off
    states = gw.rig.power_states()
    assert states[VM.confirmed] == "poweredOff"
    assert all(states[vm] == "poweredOn" for vm in (VM.failed, VM.unlisted, VM.unknown))
    # the ZVM: one tag on the VPG, and it is a real tagged checkpoint in the journal
    assert gw.rig.tag_requests(CONFIRMED_VPG) == tags_before + 1
    confirmed = [d for d in gw.decisions() if d["tool"] == POWER_OFF]
    assert [(d["row"], d["decision"]) for d in confirmed] == [("confirmed", "context")]
    [record] = confirmed
    assert record["vms"] == [VM.confirmed]
    assert record["vpgs"] == [CONFIRMED_VPG]
    assert record["client"] == gw.client()
    [cp] = record["checkpoint_ids"]
    tag, landed = gw.rig.tagged_checkpoints(CONFIRMED_VPG)[cp]
    assert record["tags"] == [tag]
    assert landed <= parse_time(record["time"])  # landed before the gateway forwarded the call
    # the model: the listing came from vcsim; the power_off result names the checkpoint
    list_id, power_id = gw.e2e.api.tool_use_ids()
    listing = gw.e2e.api.tool_result(list_id)
    assert not listing.is_error
    assert all(vm in listing.text for vm in DEFAULT_VMS)
    told = gw.e2e.api.tool_result(power_id)
    assert not told.is_error
    assert f"VM '{VM.confirmed}' powered off" in told.text  # mcvsphere's own answer
    assert CHECKPOINT_NOTE in told.text
    assert f"checkpoint {cp} tagged {tag!r}" in told.text
    assert f"VPG '{CONFIRMED_VPG}'" in told.text
    # ... and it was in the very next request the model got after the call
    after = next(r for r in gw.e2e.api.main_requests() if r.turn == 2)
    assert f"checkpoint {cp} tagged" in str(after.body["messages"][-1])


def test_failed_checkpoint_refuses_fast_and_the_vm_is_untouched(gw: Through) -> None:
    """A paused VPG cannot take a tag: an error result with the reason; mcvsphere never runs."""
    gw.e2e.script([[call(POWER_OFF, name=VM.failed)], "understood"])

    run = gw.run()

    assert run.result == "understood"
    assert gw.rig.power_states()[VM.failed] == "poweredOn"
    assert gw.rig.tag_requests(FAILED_VPG) == 0
    [record] = gw.decisions()
    assert (record["row"], record["decision"], record["vpgs"]) == ("failed", "deny", [FAILED_VPG])
    assert record["elapsed_ms"] < 3000
    assert record["client"] == gw.client()
    [told] = gw.e2e.api.tool_results()
    assert told.is_error
    assert record["reason"] in told.text
    assert "paused" in told.text
    assert "no rewind point could be made" in told.text


def test_pending_then_the_retry_runs_on_the_same_tag(gw: Through) -> None:
    """The AWS VPG's tag lands after the budget: refused at once with a retry time; the model
    waits until then and retries; the retry runs on the tag already requested (one tag)."""
    gw.rig.power_on(VM.pending)
    tags_before = gw.rig.tag_requests(AWS_VPG)
    seen_while_pending: list[str] = []

    def wait_as_told(messages: list[dict[str, Any]]) -> float | None:
        # read the vCenter while the model holds its retry: the refused call did not run
        seen_while_pending.append(gw.rig.power_states()[VM.pending])
        return retry_time_told(messages)

    gw.e2e.script(
        [
            [call(POWER_OFF, name=VM.pending)],
            delayed([call(POWER_OFF, name=VM.pending)], wait_as_told),
            "powered off after the checkpoint",
        ]
    )

    run = gw.run()

    assert run.result == "powered off after the checkpoint"
    first_id, retry_id = gw.e2e.api.tool_use_ids()
    pending, confirmed = gw.decisions()
    assert (pending["row"], pending["decision"], pending["vpgs"]) == ("pending", "deny", [AWS_VPG])
    assert pending["elapsed_ms"] < BUDGET_S * 1000  # said at once, not after the whole budget
    told = gw.e2e.api.tool_result(first_id)
    assert told.is_error
    assert pending["reason"] in told.text
    assert parse_time(pending["time"]) < parse_time(pending["retry_after"])
    assert f"Retry the same call after {pending['retry_after']}" in told.text
    assert seen_while_pending == ["poweredOn"]
    [held] = gw.e2e.api.holds  # the scripted model really waited for the time it was told
    assert held > 1.0
    # the retry: the landed tag, the same one, and no second tag request
    assert (confirmed["row"], confirmed["decision"]) == ("confirmed", "context")
    assert confirmed["tags"] == pending["tags"]
    assert gw.rig.tag_requests(AWS_VPG) == tags_before + 1
    [cp] = confirmed["checkpoint_ids"]
    tag, landed = gw.rig.tagged_checkpoints(AWS_VPG)[cp]
    assert [tag] == pending["tags"]
    assert landed <= parse_time(pending["retry_after"])
    retried = gw.e2e.api.tool_result(retry_id)
    assert not retried.is_error
    assert f"checkpoint {cp} tagged {tag!r}" in retried.text
    assert gw.rig.power_states()[VM.pending] == "poweredOff"


PROMPT_ROWS = [
    ("vm_unknown", call(POWER_OFF, name=VM.unknown), "no VPG protects DC0_C0_RP0_VM0"),
    ("no_vm", call(MAINTENANCE, evacuate_vms=False), "cannot tell which VM"),
    ("unlisted", call(tool(UNLISTED_TOOL), name=VM.unlisted), "is not in the zerto-rewind catalog"),
]


def test_prompt_rows_do_not_run_headless(gw: Through) -> None:
    """VM unknown, no VM (a host-level tool), unlisted tool: a person must approve. This
    gateway names no approver, so each is refused at once, saying so; none of them runs, and
    the agent's own client is never asked (its answer would approve nothing)."""
    gw.e2e.script([*[[c] for _row, c, _why in PROMPT_ROWS], "none of them ran"])
    hosts_before = gw.rig.maintenance_modes()

    run = gw.run()

    assert run.result == "none of them ran"
    states = gw.rig.power_states()
    assert states[VM.unknown] == "poweredOn"
    assert states[VM.unlisted] == "poweredOn"  # not suspended
    assert gw.rig.maintenance_modes() == hosts_before
    assert not any(hosts_before.values())
    assert gw.rig.tag_requests(UNLISTED_VPG) == 0
    log = gw.decisions()
    assert [(d["tool"], d["row"], d["decision"], d["answer"]) for d in log] == [
        (c.name, row, "prompt", "no_approver") for row, c, _why in PROMPT_ROWS
    ]
    results = gw.e2e.api.tool_results()
    for (_row, _call, why), record, told in zip(PROMPT_ROWS, log, results, strict=True):
        assert why in record["reason"]
        assert told.is_error
        assert record["reason"] in told.text
        assert "no approver configured" in told.text
    if gw.capture is not None:
        # What the CLI declared (stdio tee): MCP 2026-07-28, elicitation form and url, on
        # every request; no question came back, so no call carried an answer.
        sent = sent_messages(gw.capture)
        calls = [m for m in sent if m.get("method") == "tools/call"]
        meta = calls[0]["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert "form" in meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"]
        assert [c["params"].get("inputResponses") for c in calls] == [None] * 3
