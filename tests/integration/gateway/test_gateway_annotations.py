"""catalog.from_annotations: the gateway classifies unlisted tools from the live tool list."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    StartGateway,
    actions,
    client,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


async def test_unlisted_tools_are_classified_by_the_scan_rules(
    box: Sandbox, start_gateway: StartGateway, actions_log: Path
) -> None:
    """No catalog entries: list_vms is read-only by its verb, power_off_vm is guarded on `name`."""
    gw = start_gateway(read_only_tools=[], tools={}, catalog={"from_annotations": True})
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        await c.list_tools()
        listed = await c.call_tool("list_vms", {})
        changed = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert not listed.is_error
    assert not changed.is_error, text_of(changed)
    assert (changed.meta or {})["zerto-rewind/checkpoints"][0]["vpg"] == "jp-local"
    assert box.tag_requests("jp-local") == 1
    assert [a["tool"] for a in actions(actions_log)] == ["power_off_vm"]


async def test_an_explicit_entry_wins_over_the_annotations(
    start_gateway: StartGateway, actions_log: Path
) -> None:
    """A catalog entry that calls list_vms mutating (with a VM path it lacks) is obeyed."""
    gw = start_gateway(
        read_only_tools=[],
        tools={"mcp__vsphere__list_vms": {"vm_arg": "name"}},
        catalog={"from_annotations": True},
    )
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        await c.list_tools()
        listed = await c.call_tool("list_vms", {})
    assert listed.is_error
    assert "no approver configured" in text_of(listed)
    assert actions(actions_log) == []


async def test_without_the_switch_unlisted_tools_stay_unlisted(
    start_gateway: StartGateway, actions_log: Path
) -> None:
    """from_annotations off (the default): a tool the catalog lacks is the unlisted row."""
    gw = start_gateway(read_only_tools=[], tools={})
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        await c.list_tools()
        result = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert result.is_error
    assert "not in the zerto-rewind catalog" in text_of(result)
    assert actions(actions_log) == []
