"""Pins through the gateway: an upstream that changes its tools after review (a rug pull).

The catalog and its pins come from a real `catalog scan` of the stand-in server;
the gateway runs it as its stdio upstream and a real SDK client calls through
streamable HTTP. After the server's own ``upgrade`` (it drops ``destructiveHint``
from ``power_off_vm``, adds ``list_and_delete_vms`` and sends
``tools/list_changed``), both are unlisted: with no approver they are refused
and never reach the server, while the unchanged tools behave as before.
"""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import (
    RUG_PASSWORD,
    TOKENS,
    approvals_cli,
    client,
    configure_rug_pull,
    decisions,
    gateway_process,
    metric,
    ran_tools,
    scan_rug_pull,
    text_of,
    wait_metric,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

NOTE = "note-value-5b1d7a"


async def test_a_tool_changed_after_review_is_unlisted(box: Sandbox, tmp_path: Path) -> None:
    """Before the change: guarded and read-only calls as reviewed. After: the changed tool and
    the new one are refused (no approver) and never run; the unchanged ones still run."""
    actions_log = tmp_path / "actions.jsonl"
    scanned = scan_rug_pull(actions_log)
    pins = scanned["catalog"]["pins"]
    assert set(pins) == {f"mcp__vsphere__{t}" for t in ("list_vms", "power_off_vm", "upgrade",
                                                        "inventory")}  # fmt: skip
    actions_log.unlink(missing_ok=True)
    configure_rug_pull(box, actions_log, pins)
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            before = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
            assert not before.is_error, text_of(before)
            assert (before.meta or {})["zerto-rewind/checkpoints"][0]["vpg"] == "jp-local"
            assert metric(gw.url, "zerto_rewind_unreviewed_tools", upstream="vsphere") == 0
            upgraded = await c.call_tool("upgrade", {})
            assert not upgraded.is_error, text_of(upgraded)
            wait_metric(gw.url, "zerto_rewind_unreviewed_tools", 2, upstream="vsphere")
            pulled = await c.call_tool("list_and_delete_vms", {"name": "jp-ubuntu"})
            changed = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
            listed = await c.call_tool("list_vms", {})
        metrics = {
            kind: metric(gw.url, "zerto_rewind_tool_pin_mismatches_total",
                          upstream="vsphere", kind=kind)
            for kind in ("new", "changed")
        }  # fmt: skip
        gw.proc.terminate()
        gw.proc.wait(timeout=10)
        stderr = gw.stderr.read_text()
    assert pulled.is_error
    assert changed.is_error
    assert "it is new" in text_of(pulled)
    assert "no approver configured" in text_of(pulled)
    assert "changed since the catalog was reviewed" in text_of(changed)
    assert not listed.is_error, text_of(listed)
    assert ran_tools(actions_log) == ["power_off_vm", "upgrade", "list_vms"]
    assert metrics == {"new": 1.0, "changed": 1.0}
    assert "tool mcp__vsphere__list_and_delete_vms is not pinned" in stderr
    assert "tool mcp__vsphere__power_off_vm changed since it was pinned" in stderr
    rows = {(d["tool"], d["row"], d.get("answer")) for d in decisions(box)}
    assert ("mcp__vsphere__list_and_delete_vms", "unlisted", "no_approver") in rows
    assert ("mcp__vsphere__power_off_vm", "unlisted", "no_approver") in rows


async def test_a_changed_tool_runs_only_once_a_person_approved_it(
    box: Sandbox, tmp_path: Path
) -> None:
    """With an approver, the changed tool's call waits for a person; refused while it waits,
    the same call retried after approval runs, once."""
    actions_log = tmp_path / "actions.jsonl"
    pins = scan_rug_pull(actions_log)["catalog"]["pins"]
    actions_log.unlink(missing_ok=True)
    configure_rug_pull(box, actions_log, pins)
    config = json.loads(Path(box.config_path).read_text())
    config["approvals"] = {"approvers": {"users": [getpass.getuser()]}, "wait_s": 1}
    Path(box.config_path).write_text(json.dumps(config))
    sock = str(tmp_path / "approvals.sock")
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", sock)) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            await c.call_tool("upgrade", {})
            wait_metric(gw.url, "zerto_rewind_unreviewed_tools", 2, upstream="vsphere")
            waiting = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
            assert waiting.is_error
            assert "is waiting for an approver" in text_of(waiting), text_of(waiting)
            assert "power_off_vm" not in ran_tools(actions_log)
            found = re.search(r"request (\S+) is waiting", text_of(waiting))
            assert found is not None
            approved = approvals_cli("--service", f"unix:{sock}", "approve", found.group(1))
            assert approved.returncode == 0, approved.stderr
            ran = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert not ran.is_error, text_of(ran)
    assert ran_tools(actions_log) == ["upgrade", "power_off_vm"]
    asked = [d for d in decisions(box) if d["tool"] == "mcp__vsphere__power_off_vm"]
    assert {d["row"] for d in asked} == {"unlisted"}
    assert asked[-1]["answer"] == "approved"


async def test_no_pins_behaves_as_before(box: Sandbox, tmp_path: Path) -> None:
    """A server with no pins: the catalog's patterns decide, as before pins (and it is logged)."""
    actions_log = tmp_path / "actions.jsonl"
    configure_rug_pull(box, actions_log, None)
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            await c.call_tool("upgrade", {})
            pulled = await c.call_tool("list_and_delete_vms", {"name": "jp-ubuntu"})
        gw.proc.terminate()
        gw.proc.wait(timeout=10)
        stderr = gw.stderr.read_text()
    assert not pulled.is_error  # the glob list_* says read-only: what pins are for
    assert "no catalog.pins" in stderr


async def test_upstream_stderr_goes_to_its_own_redacted_log(box: Sandbox, tmp_path: Path) -> None:
    """The server prints its password and a traceback quoting an argument: the gateway's stderr
    has neither; the upstream's log (0600) has the traceback with the password redacted."""
    actions_log = tmp_path / "actions.jsonl"
    configure_rug_pull(box, actions_log, None)
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            await c.list_tools()
            failed = await c.call_tool("inventory", {"name": "jp-ubuntu", "note": NOTE})
        gw.proc.terminate()
        gw.proc.wait(timeout=10)
        stderr = gw.stderr.read_text()
    assert failed.is_error
    log_path = Path(box.state_dir) / "upstreams" / "vsphere.log"
    upstream_log = log_path.read_text()
    assert RUG_PASSWORD not in stderr
    assert NOTE not in stderr
    assert "rug-pull starting" not in stderr
    assert "Traceback" not in stderr
    assert RUG_PASSWORD not in upstream_log
    assert "password=[redacted]" in upstream_log
    assert "connecting with [redacted]" in upstream_log
    assert "Traceback" in upstream_log
    assert NOTE in upstream_log  # the server's own log keeps what it printed, secrets aside
    assert log_path.stat().st_mode & 0o777 == 0o600
