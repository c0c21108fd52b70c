"""The seed's known issue, reproduced with its fixed wait and shown fixed by the guard.

The seed waited a fixed 45 s for a tag: fine for vSphere (5 s cadence), a false
denial on AWS (630 s) — the tag landed a minute after the hook said "failed".
Here the AWS cadence is 12 s and the fixed wait and the budget scaled to 4–5 s.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from zerto_rewind.testing import Sandbox
from zerto_rewind.zvm.client import ZvmClient

FIXED_WAIT_S = 4.0  # the seed's hard-coded wait_for_tag, scaled


def seed_wait_for_tag(client: ZvmClient, vpg_id: str, name: str) -> bool:
    """The seed's algorithm: tag, then poll for a fixed time regardless of cadence."""
    requested = datetime.now(UTC)
    client.tag_checkpoint(vpg_id, name)
    give_up = time.monotonic() + FIXED_WAIT_S
    while time.monotonic() < give_up:
        if any(c.tag == name for c in client.list_checkpoints(vpg_id, since=requested)):
            return True
        time.sleep(0.5)
    return False


def test_fixed_wait_denies_and_the_tag_lands_anyway(slow_aws_box: Sandbox) -> None:
    """Seed behaviour: 'failed' after the fixed wait, yet the tag is in the journal later."""
    box = slow_aws_box
    with box.client() as client:
        vpg = client.find_vpg("CMH-AWS-1")
        box.wait_past_boundary("CMH-AWS-1")
        assert seed_wait_for_tag(client, vpg.vpg_id, "seed-wait") is False, (
            "the seed would deny here"
        )
        box.wait_past_boundary("CMH-AWS-1", margin_s=1.0)
        landed = [c for c in client.list_checkpoints(vpg.vpg_id) if c.tag == "seed-wait"]
    assert len(landed) == 1, "…while the checkpoint it gave up on landed anyway: a false denial"


def test_guard_says_pending_never_failed_and_allows_the_retry(slow_aws_box: Sandbox) -> None:
    """The fix: same VPG and budget → pending at once, the retry runs on the landed checkpoint."""
    box = slow_aws_box
    box.wait_past_boundary("CMH-AWS-1")
    first = box.run_hook("mcp__vsphere__power_off_vm", {"name": "win2019-1"})
    record = box.log_records()[-1]
    assert record["row"] == "pending"
    assert first.elapsed_s < 3.0
    box.wait_past_boundary("CMH-AWS-1", margin_s=1.0)
    retry = box.run_hook("mcp__vsphere__power_off_vm", {"name": "win2019-1"})
    assert retry.decision == "context"
    allowed = box.log_records()[-1]
    assert allowed["tags"] == record["tags"]
    assert allowed["checkpoint_ids"][0] in retry.reason
    assert [r["row"] for r in box.log_records()] == ["pending", "confirmed"], "never 'failed'"
