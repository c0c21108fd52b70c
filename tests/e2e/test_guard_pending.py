"""The seed's cloud case in the real CLI: a checkpoint that lands after the guard budget.

``CMH-AWS-1`` is AWS-protected; the simulator's AWS journal ticks every ``AWS_CADENCE_S``
(10 s), longer than the guard budget (4 s). Each test first waits until just after one of its
checkpoints, so the next one — where a tag lands — is a whole cadence away.
"""

from __future__ import annotations

import pytest

from e2e.fake_anthropic import call, delayed
from e2e.guarded import BUDGET_S, MODES, Guarded, parse_time, retry_time_told
from e2e.harness import mcp_tool

POWER_OFF = mcp_tool("power_off_vm")
AWS_VM, AWS_VPG = "win2019-1", "CMH-AWS-1"


@pytest.mark.parametrize("mode", MODES)
def test_cloud_vpg_is_pending_and_the_retry_runs_on_the_landed_checkpoint(
    guarded: Guarded, mode: str
) -> None:
    """Pending at once (not a budget-long wait), with a retry time; the retry then runs."""
    # The scripted model retries the same call, waiting first until the time it was told.
    guarded.e2e.script(
        [
            [call(POWER_OFF, name=AWS_VM)],
            delayed([call(POWER_OFF, name=AWS_VM)], retry_time_told),
            "powered off after the checkpoint",
        ]
    )
    guarded.wait_for_aws_boundary()

    run = guarded.run(mode)

    assert run.ok, run.describe()
    assert run.result == "powered off after the checkpoint"
    first_id, retry_id = guarded.e2e.api.tool_use_ids()
    # first call: pending, denied with the time to retry; nothing reached the VM
    pending, confirmed = guarded.log()
    assert (pending["row"], pending["decision"]) == ("pending", "deny")
    assert pending["tool_use_id"] == first_id
    assert pending["vpgs"] == [AWS_VPG]
    assert pending["site_types"] == ["aws"]
    assert pending["elapsed_ms"] < BUDGET_S * 1000  # said at once, not after the whole budget
    told = guarded.e2e.api.tool_result(first_id)
    assert told.is_error
    assert told.text == f"PreToolUse:{POWER_OFF} hook error: {pending['reason']}"
    assert f"Retry the same call after {pending['retry_after']}" in told.text
    assert [d["tool_use_id"] for d in run.permission_denials] == [first_id]
    # the model waited as told (the fake API held the retry back until then)
    [held] = guarded.e2e.api.holds
    assert held > 1.0
    # the retry: the landed tag, the same one (no second tag), and the call ran after it landed
    assert (confirmed["row"], confirmed["decision"]) == ("confirmed", "context")
    assert confirmed["tool_use_id"] == retry_id
    assert confirmed["tags"] == pending["tags"]
    assert guarded.tag_requests(AWS_VPG) == 1
    [cp] = confirmed["checkpoint_ids"]
    tag, landed = guarded.tagged_checkpoints(confirmed["vpg_ids"][0])[cp]
    assert [tag] == pending["tags"]
    assert landed <= parse_time(pending["retry_after"])
    assert guarded.vm_actions() == [(AWS_VM, "power_off_vm")]
    [ran_at] = guarded.vm_action_times()
    assert ran_at >= landed
    assert not guarded.e2e.api.tool_result(retry_id).is_error
    assert guarded.e2e.api.saw(f"checkpoint {cp} tagged {tag!r}")


@pytest.mark.parametrize("mode", MODES)
def test_headless_defer_stops_the_run_and_resume_runs_the_call(guarded: Guarded, mode: str) -> None:
    """``on_pending: defer`` stops the run with the call; ``--resume`` after landing runs it."""
    guarded.configure(on_pending="defer")
    guarded.e2e.script([[call(POWER_OFF, name=AWS_VM)], "powered off after the checkpoint"])
    guarded.wait_for_aws_boundary()

    first = guarded.run(mode)

    assert first.ok, first.describe()
    [tool_use_id] = guarded.e2e.api.tool_use_ids()
    assert first.stop_reason == "tool_deferred"
    assert first.deferred_tool_use == {
        "id": tool_use_id,
        "name": POWER_OFF,
        "input": {"name": AWS_VM},
    }
    assert first.permission_denials == []
    assert guarded.vm_actions() == []
    assert guarded.e2e.api.tool_results() == []  # the model has not been answered yet
    [deferred] = guarded.log()
    assert (deferred["row"], deferred["decision"]) == ("pending", "defer")

    # Whoever runs the headless job resumes it once the tag has landed.
    guarded.sleep_until(parse_time(deferred["retry_after"]))
    second = guarded.run(mode, None, resume=first.session_id)

    assert second.ok, second.describe()
    assert second.session_id == first.session_id
    assert second.stop_reason == "end_turn"
    assert second.result == "powered off after the checkpoint"
    assert second.permission_denials == []
    _, confirmed = guarded.log()
    assert (confirmed["row"], confirmed["decision"]) == ("confirmed", "context")
    assert confirmed["tool_use_id"] == tool_use_id
    assert confirmed["tags"] == deferred["tags"]
    assert guarded.tag_requests(AWS_VPG) == 1
    assert guarded.vm_actions() == [(AWS_VM, "power_off_vm")]
    assert not guarded.e2e.api.tool_result(tool_use_id).is_error
    assert guarded.e2e.api.saw(f"checkpoint {confirmed['checkpoint_ids'][0]} tagged")
