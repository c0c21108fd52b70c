"""The standalone hook with ``guard.prompt_via: approvals``, for headless runs.

A prompt row is denied with the id of an approval request in the guard's own state
directory; ``zerto-rewind approvals`` (no ``--service``: that queue) approves it; the
retry of the same call passes, once. Without the setting the hook keeps ``ask``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from zerto_rewind.testing import Sandbox

CALL = ("mcp__vsphere__power_off_vm", {"name": "no-such-vm"})


def approvals(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "approvals", *args],
        env=box.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def reason(run: object) -> str:
    output = run.output  # type: ignore[attr-defined]
    assert output is not None
    return str(output.get("permissionDecisionReason") or output.get("additionalContext") or "")


def test_the_hook_keeps_ask_by_default(box: Sandbox) -> None:
    box.write_config(approvals={"approvers": {"users": ["root"]}})
    assert box.run_hook(*CALL).decision == "ask"


def test_a_prompt_row_waits_for_an_approval_and_its_retry_passes_once(box: Sandbox) -> None:
    box.write_config(
        guard={**box.guard, "prompt_via": "approvals"},
        approvals={"approvers": {"users": ["root"]}},
    )
    first = box.run_hook(*CALL)
    assert first.decision == "deny"
    found = re.search(r"request (\S+) is waiting for an approver", reason(first))
    assert found, reason(first)
    request_id = found.group(1)
    listed = approvals(box, "list", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [request_id]
    assert approvals(box, "approve", request_id).returncode == 0
    passed = box.run_hook(*CALL)
    assert passed.decision == "context"
    assert "approved this call" in reason(passed)
    assert box.run_hook(*CALL).decision == "deny"  # used once
    log = [json.loads(line) for line in Path(box.log_path).read_text().splitlines()]
    named = [x for x in log if x.get("approval_id") == request_id]
    assert [x["answer"] for x in named if x["origin"] == "approvals"] == [
        "requested",
        "approved",
        "used",
    ]
    # The hook's own lines name the request too (the one approvals step, in every door).
    assert [x["answer"] for x in named if x["origin"] == "hook"] == ["waiting", "approved"]


def test_with_no_approver_a_prompt_row_is_denied_saying_so(box: Sandbox) -> None:
    box.write_config(guard={**box.guard, "prompt_via": "approvals"})
    run = box.run_hook(*CALL)
    assert run.decision == "deny"
    assert "no approver configured" in reason(run)
