"""Parallel tool use in the real CLI: two mutating calls in one assistant turn.

Finding (2.1.328): the CLI does not run two mutating MCP calls of one turn at the same time.
It runs call 1's PreToolUse hook, then call 1, then call 2's hook, then call 2 (presumably
because MCP tools without ``readOnlyHint`` are not concurrency-safe). So on the same VPG the
second call finds a tag that a change has already used and gets a fresh checkpoint of its
own — one rewind point between the two changes — and on different VPGs each VPG is tagged
once. Either way no call makes more than one tag per VPG.
"""

from __future__ import annotations

from collections import Counter

import pytest

from e2e.fake_anthropic import call
from e2e.guarded import MODES, Guarded, hook_contexts, parse_time
from e2e.harness import mcp_tool

POWER_OFF = mcp_tool("power_off_vm")
RECONFIGURE = mcp_tool("reconfigure_vm")


def _hook_started(record: dict[str, object]) -> float:
    return parse_time(str(record["time"])) - int(str(record["elapsed_ms"])) / 1000


@pytest.mark.parametrize("mode", MODES)
def test_two_calls_on_the_same_vpg_each_get_one_checkpoint(guarded: Guarded, mode: str) -> None:
    """Both run; the second hook starts after the first change and tags again, once."""
    calls = [call(POWER_OFF, name="jp-ubuntu"), call(RECONFIGURE, vm={"name": "jp-ubuntu"})]
    guarded.e2e.script([calls, "both done"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.permission_denials == []
    assert guarded.vm_actions() == [
        ("jp-ubuntu", "power_off_vm"),
        ("jp-ubuntu", "reconfigure_vm"),
    ]
    first, second = guarded.log()
    assert [first["tool_use_id"], second["tool_use_id"]] == guarded.e2e.api.tool_use_ids()
    assert [(r["row"], r["decision"]) for r in (first, second)] == [("confirmed", "context")] * 2
    # one tag per call, none doubled: two calls, two tag requests, two checkpoints
    assert guarded.tag_requests("jp-local") == 2
    assert guarded.tag_requests() == 2
    assert first["checkpoint_ids"] != second["checkpoint_ids"]
    assert first["tags"] != second["tags"]
    # serial in the host: hook 2 started after change 1; its checkpoint lies between the changes
    first_ran, second_ran = guarded.vm_action_times()
    assert _hook_started(second) >= first_ran
    tagged = guarded.tagged_checkpoints(first["vpg_ids"][0])
    landed = [tagged[r["checkpoint_ids"][0]][1] for r in (first, second)]
    assert landed[0] <= first_ran <= landed[1] <= second_ran
    # both contexts reach the model, in one system message after the two tool results
    contexts = hook_contexts(guarded.e2e.api.system_texts())
    assert [tool for tool, _text in contexts] == [POWER_OFF, RECONFIGURE]
    for record, (_tool, context) in zip((first, second), contexts, strict=True):
        assert f"checkpoint {record['checkpoint_ids'][0]} tagged" in context
    assert not any(r.is_error for r in guarded.e2e.api.tool_results())


@pytest.mark.parametrize("mode", MODES)
def test_two_calls_on_different_vpgs_get_a_tag_each(guarded: Guarded, mode: str) -> None:
    """Each VPG gets exactly one tag of its own; both calls run with their own checkpoints."""
    # multi-1 sits in two VPGs (multi-a, multi-b): its call tags both.
    calls = [call(POWER_OFF, name="jp-ubuntu"), call(POWER_OFF, name="multi-1")]
    guarded.e2e.script([calls, "both done"])

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.permission_denials == []
    assert guarded.vm_actions() == [("jp-ubuntu", "power_off_vm"), ("multi-1", "power_off_vm")]
    by_vm = {r["vms"][0]: r for r in guarded.log()}
    assert set(by_vm) == {"jp-ubuntu", "multi-1"}
    assert all((r["row"], r["decision"]) == ("confirmed", "context") for r in by_vm.values())
    assert by_vm["jp-ubuntu"]["vpgs"] == ["jp-local"]
    assert sorted(by_vm["multi-1"]["vpgs"]) == ["multi-a", "multi-b"]
    assert len(by_vm["multi-1"]["checkpoint_ids"]) == 2
    # The real CLI ran the hook after each call too (PostToolUse): one result line per change.
    assert sorted((r["vms"][0], r["result"]) for r in guarded.results()) == [
        ("jp-ubuntu", "succeeded"),
        ("multi-1", "succeeded"),
    ]
    stats = guarded.box.control("GET", "/_sim/stats")["tag_requests"]
    assert Counter(stats) == Counter({"jp-local": 1, "multi-a": 1, "multi-b": 1})
    contexts = [text for _tool, text in hook_contexts(guarded.e2e.api.system_texts())]
    assert len(contexts) == 2
    for vm, record in by_vm.items():
        [context] = [t for t in contexts if f"- VM {vm}:" in t]
        for cp in record["checkpoint_ids"]:
            assert f"checkpoint {cp} tagged" in context
