"""`zerto-rewind gateway --stdio --upstream vsphere`, as a host starts it, with the SDK client."""

from __future__ import annotations

import sys
from pathlib import Path

import mcp_types as types
import pytest

from integration.gateway.gateway_helpers import (
    actions,
    decisions,
    gateway_config,
    results,
    stdio_gateway,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


async def test_every_kind_of_call_over_stdio(box: Sandbox, tmp_path: Path) -> None:
    """Read-only runs, confirmed runs with its checkpoint, failed and unlisted do not run."""
    actions_log = tmp_path / "actions.jsonl"
    gateway_config(box, actions_log)
    async with stdio_gateway(box) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "power_off_vm" in names
        assert not (await c.call_tool("list_vms", {})).is_error
        confirmed = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
        failed = await c.call_tool("power_off_vm", {"name": "sql-paused-1"})
        unlisted = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert not confirmed.is_error, text_of(confirmed)
    assert (confirmed.meta or {})["zerto-rewind/checkpoints"][0]["vpg"] == "jp-local"
    assert failed.is_error
    assert unlisted.is_error
    assert [a["vm"] for a in actions(actions_log)] == ["jp-ubuntu"]
    clients = {d["client"] for d in decisions(box)}
    assert len(clients) == 1
    assert clients.pop().startswith("stdio:")


async def test_each_stdio_connection_logs_its_host_and_a_session_of_its_own(
    box: Sandbox, tmp_path: Path
) -> None:
    """Two hosts, each its own gateway process: every decision line names the host's
    clientInfo and a random per-connection session id, and the tag carries that session."""
    gateway_config(box, tmp_path / "actions.jsonl")
    hosts = {
        "codex-mcp-client": types.Implementation(name="codex-mcp-client", version="0.169.0"),
        "copilot": types.Implementation(name="copilot\nforged", version="1.0.102"),
    }
    for info in hosts.values():
        async with stdio_gateway(box, client_info=info) as c:
            done = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
            refused = await c.call_tool("power_off_vm", {"name": "sql-paused-1"})
        assert not done.is_error, text_of(done)
        assert refused.is_error
    lines = decisions(box)
    assert {d["host"] for d in lines} == {"codex-mcp-client 0.169.0", "copilotforged 1.0.102"}
    by_host: dict[str, set[str]] = {}
    for d in lines:
        by_host.setdefault(d["host"], set()).add(d["session_id"])
    sessions = [by_host[h] for h in sorted(by_host)]
    assert all(len(s) == 1 for s in sessions), "one session per connection"
    assert sessions[0] != sessions[1]
    for d in lines:
        assert len(d["session_id"]) == 16
        for tag in d.get("tags") or []:
            assert f" s={d['session_id'][:8]} " in tag
            assert "nosessio" not in tag
    assert any(d.get("tags") for d in lines), "the confirmed calls tagged"


async def test_an_unknown_upstream_name_stops_with_the_reason(box: Sandbox, tmp_path: Path) -> None:
    """--upstream names a server the config lacks: exit 1 naming the known ones."""
    import subprocess

    gateway_config(box, tmp_path / "actions.jsonl")
    proc = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "gateway", "--stdio", "--upstream", "nope"],
        env=box.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "no upstream named 'nope'" in proc.stderr
    assert "vsphere" in proc.stderr


async def test_a_change_over_stdio_logs_its_result_line(box: Sandbox, tmp_path: Path) -> None:
    """A forwarded change's result line is in the log before its answer reaches the host
    (a host that kills the gateway at once loses none), joined to its decision line by
    session and tool-use id; a read-only call logs none."""
    actions_log = tmp_path / "actions.jsonl"
    gateway_config(box, actions_log)
    async with stdio_gateway(box) as c:
        assert not (await c.call_tool("list_vms", {})).is_error
        done = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
        assert [r["result"] for r in results(box)] == ["succeeded"]  # the session still open
    assert not done.is_error, text_of(done)
    assert [a["vm"] for a in actions(actions_log)] == ["jp-ubuntu"]
    (decision,) = decisions(box)
    (result,) = results(box)
    assert (result["vms"], result["result"]) == (["jp-ubuntu"], "succeeded")
    joined = ("tool", "session_id", "tool_use_id", "client", "host")
    assert {k: result[k] for k in joined} == {k: decision[k] for k in joined}
