"""Every row of the decision table, in the real Claude Code CLI, in both permission modes.

Each test checks three independent records: what reached the stand-in VM server (from the
simulator's ``GET /_sim/vm-actions``), what the model was told (the fake API's recorded tool
results and mid-conversation system texts) and the decision-log line. Settings come from
``zerto-rewind install claude-code --project DIR`` (the ``guarded`` fixture).
"""

from __future__ import annotations

import json
import os

import pytest

from e2e.fake_anthropic import call
from e2e.guarded import MODES, Guarded, hook_contexts
from e2e.harness import mcp_tool

POWER_OFF = mcp_tool("power_off_vm")
RECONFIGURE = mcp_tool("reconfigure_vm")
RUN_COMMAND = mcp_tool("run_command")
LIST_VMS = mcp_tool("list_vms")
GET_VM = mcp_tool("get_vm")
MYSTERY = mcp_tool("mystery_tool")


@pytest.mark.parametrize("mode", MODES)
def test_read_only_calls_never_start_the_hook(guarded: Guarded, mode: str) -> None:
    """Read-only tools run with no hook process at all: even a broken config cannot stop them."""
    [entry] = guarded.installed()["hooks"]["PreToolUse"]
    # guard.protect_self (default on) adds Claude Code's file and shell tools, no read-only one
    own = "Bash$|Write$|Edit$|MultiEdit$|NotebookEdit$"
    assert entry["matcher"] == f"^(?:mcp__vsphere__(?!(?:list_vms|get_.*)$)|{own})"
    # A hook that starts with a broken (here: changed since install) config denies every call
    # and logs it,
    # so a read-only call that still runs, with nothing logged, never started the hook.
    with open(guarded.box.config_path, "w", encoding="utf-8") as fh:
        fh.write("{ this is not JSON")
    read_only = [call(LIST_VMS), call(GET_VM, name="jp-ubuntu")]
    guarded.e2e.script([read_only, [call(POWER_OFF, name="jp-ubuntu")], "ok"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    list_id, get_id, power_id = guarded.e2e.api.tool_use_ids()
    assert "jp-ubuntu" in guarded.e2e.api.tool_result(list_id).text
    assert not guarded.e2e.api.tool_result(get_id).is_error
    assert run.denied_tools == [POWER_OFF]
    assert "the guard's config" in guarded.e2e.api.tool_result(power_id).text
    # exactly one hook ran: the mutating call's
    assert [(r["tool"], r["row"]) for r in guarded.log()] == [(POWER_OFF, "config_error")]
    assert guarded.vm_actions() == []
    assert guarded.tag_requests() == 0
    assert not os.path.exists(guarded.box.state_dir)  # no guard state touched either


@pytest.mark.parametrize("mode", MODES)
def test_confirmed_checkpoint_lets_every_argument_shape_run(guarded: Guarded, mode: str) -> None:
    """A landed tag lets the call run; the model is told VM, VPG, checkpoint and how to rewind."""
    shapes = [
        call(POWER_OFF, name="jp-ubuntu"),
        call(RECONFIGURE, vm={"name": "jp-ubuntu", "cpus": 4}),
        call(RUN_COMMAND, command="ssh admin@jp-ubuntu.lab.local 'sudo reboot'"),
    ]
    guarded.e2e.script([*[[c] for c in shapes], "all three done"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.result == "all three done"
    assert run.permission_denials == []
    assert guarded.vm_actions() == [
        ("jp-ubuntu", "power_off_vm"),
        ("jp-ubuntu", "reconfigure_vm"),
        ("jp-ubuntu.lab.local", "run_command"),
    ]
    log = guarded.log()
    assert [(r["tool"], r["row"], r["decision"]) for r in log] == [
        (c.name, "confirmed", "context") for c in shapes
    ]
    assert all(r["vms"] == ["jp-ubuntu"] and r["vpgs"] == ["jp-local"] for r in log)
    # each change has its own checkpoint, really in the journal with our tag, landed before it
    tagged = guarded.tagged_checkpoints(log[0]["vpg_ids"][0])
    checkpoints = [r["checkpoint_ids"][0] for r in log]
    assert len(set(checkpoints)) == 3
    assert guarded.tag_requests("jp-local") == 3
    for record, ran_at in zip(log, guarded.vm_action_times(), strict=True):
        [cp] = record["checkpoint_ids"]
        tag, landed = tagged[cp]
        assert record["tags"] == [tag]
        assert landed <= ran_at
    # what the model read: the tool ran, then the checkpoint as hook context
    results = guarded.e2e.api.tool_results()
    assert [r.is_error for r in results] == [False, False, False]
    contexts = hook_contexts(guarded.e2e.api.system_texts())
    assert [tool for tool, _text in contexts] == [c.name for c in shapes]
    for (_tool, context), cp in zip(contexts, checkpoints, strict=True):
        assert context.startswith("zerto-rewind: a Zerto checkpoint protects this")
        assert f"checkpoint {cp} tagged" in context
        assert "VPG 'jp-local'" in context
        assert "zerto-rewind checkpoints" in context  # no MCP server installed: the CLI


@pytest.mark.parametrize("mode", MODES)
def test_failed_checkpoint_denies_fast_and_the_call_never_happens(
    guarded: Guarded, mode: str
) -> None:
    """A VPG that cannot take a tag (replication paused) is a deny in seconds, with the reason."""
    guarded.e2e.script([[call(POWER_OFF, name="sql-paused-1")], "understood"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.denied_tools == [POWER_OFF]
    assert guarded.vm_actions() == []
    [record] = guarded.log()
    assert (record["row"], record["decision"], record["vpgs"]) == ("failed", "deny", ["paused-vpg"])
    assert record["elapsed_ms"] < 3000
    [result] = guarded.e2e.api.tool_results()
    assert result.is_error
    assert result.text == f"PreToolUse:{POWER_OFF} hook error: {record['reason']}"
    assert "paused" in record["reason"]
    assert "no rewind point could be made" in record["reason"]


PROMPT_ROWS = [
    ("vm_unknown", call(POWER_OFF, name="web-01"), "no VPG protects web-01"),
    ("no_vm", call(RECONFIGURE, vm={"cpus": 4}), "cannot tell which VM"),
    ("unlisted", call(MYSTERY, name="jp-ubuntu"), "is not in the zerto-rewind catalog"),
]


@pytest.mark.parametrize("mode", MODES)
def test_prompt_rows_ask_which_headless_is_a_denial(guarded: Guarded, mode: str) -> None:
    """VM unknown, no VM, unlisted tool: the guard asks; ``claude -p`` cannot, so none runs."""
    guarded.e2e.script([*[[c] for _row, c, _why in PROMPT_ROWS], "none of them ran"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.denied_tools == [c.name for _row, c, _why in PROMPT_ROWS]
    assert guarded.vm_actions() == []
    assert guarded.tag_requests() == 0
    log = guarded.log()
    assert [(r["tool"], r["row"], r["decision"]) for r in log] == [
        (c.name, row, "prompt") for row, c, _why in PROMPT_ROWS
    ]
    results = guarded.e2e.api.tool_results()
    for (_row, _call, why), record, result in zip(PROMPT_ROWS, log, results, strict=True):
        assert why in record["reason"]
        assert result.is_error
        # an `ask` the CLI could not put to anyone: the model gets the reason as the error
        assert result.text == record["reason"], json.dumps([result.text, record["reason"]])
