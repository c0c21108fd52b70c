"""`zerto-rewind gateway --stdio --upstream vsphere`, as a host starts it, with the SDK client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from integration.gateway.gateway_helpers import actions, decisions, gateway_config, text_of
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


def stdio_gateway(box: Sandbox) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "zerto_rewind",
            "gateway",
            "--stdio",
            "--upstream",
            "vsphere",
            "--allow-privileged-upstream",
        ],
        env=box.env(),
    )
    return Client(params, cache=None)


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
