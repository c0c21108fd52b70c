"""The hook's watchdog, in the real hook process: a guard stuck past its budget still denies."""

from __future__ import annotations

from zerto_rewind.core.state import GuardState
from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"


def test_a_guard_stuck_on_a_lock_is_denied_by_the_watchdog_before_the_host_gives_up(
    box: Sandbox,
) -> None:
    """Another process holds jp-local's state lock (the guard would wait 20 s for it): with a
    3 s budget the watchdog denies at ~2.7 s, naming the budget, long before a host timeout.

    Not a ZVM timeout: the ZVM answers at once, so only the watchdog can end the wait.
    """
    with box.client() as client:
        vpg_id = client.find_vpg("jp-local").vpg_id
    with GuardState(box.state_dir).vpg(vpg_id):
        run = box.run_hook(
            POWER_OFF, {"name": "jp-ubuntu"}, env=box.env(ZERTO_HOOK_GUARD_TIMEOUT="3")
        )
    assert run.decision == "deny", run.stdout + run.stderr
    assert "3 s budget" in run.reason
    assert run.elapsed_s < 6.0  # the lock alone would hold it 20 s
    assert box.tag_requests("jp-local") == 0
    assert box.log_records()[-1]["row"] == "error"
