"""The real VM chain works: mcvsphere from PyPI, over stdio, against govmomi's vCenter simulator.

What happened to a VM is read back from the vCenter, not taken from the tool's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.realvm import DEFAULT_VMS, VCenter, mcvsphere_session, power_states, tool_text, vm_info

pytestmark = pytest.mark.anyio

MCVSPHERE_TOOLS = 94
TARGET = "DC0_H0_VM0"


async def test_mcvsphere_powers_off_a_vm_on_the_simulator(vcenter: VCenter, tmp_path: Path) -> None:
    assert power_states(vcenter) == dict.fromkeys(DEFAULT_VMS, "poweredOn")

    async with mcvsphere_session(vcenter, tmp_path / "mcvsphere") as client:
        listed = await client.list_tools()
        assert listed.next_cursor is None
        tools = {tool.name: tool for tool in listed.tools}
        assert len(tools) == MCVSPHERE_TOOLS
        power_off = tools["power_off"]
        assert power_off.input_schema["required"] == ["name"]
        assert power_off.annotations is not None
        assert power_off.annotations.destructive_hint is True

        listing = await client.call_tool("list_vms", {})
        assert not listing.is_error, tool_text(listing.content)
        assert {vm["name"] for vm in json.loads(tool_text(listing.content))} == set(DEFAULT_VMS)

        result = await client.call_tool("power_off", {"name": TARGET})
        assert not result.is_error, tool_text(result.content)

    # Read back from the vCenter: a pyVmomi session of its own, and mcvsphere's own view.
    after = power_states(vcenter)
    assert after[TARGET] == "poweredOff"
    assert all(after[vm] == "poweredOn" for vm in DEFAULT_VMS if vm != TARGET)
    info = await vm_info(vcenter, TARGET, tmp_path / "read-back")
    assert info["power_state"] == "poweredOff"
