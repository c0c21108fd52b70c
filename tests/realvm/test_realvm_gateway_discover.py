"""mcvsphere behind the gateway: its log shows the server/discover probe once, not per session.

mcvsphere is FastMCP on an SDK from before 2026-07-28: every ``server/discover`` the SDK
client probes with makes it log a screenful of pydantic validation warnings. The gateway
probes a server once and remembers that it speaks the handshake
(``<state_dir>/upstreams/NAME.era``), so a second and third host session (each its own
stdio gateway process) leave no new warning in mcvsphere's own log (the gateway's
upstream log, gateway/upstream_log.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import gateway_config, stdio_gateway
from support.realvm import VCenter, mcvsphere_command
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

# How pydantic's validation warnings name the method mcvsphere did not know.
DISCOVER = "server/discover"


async def test_mcvsphere_logs_the_discover_probe_for_the_first_session_only(
    vcenter: VCenter, tmp_path: Path
) -> None:
    with Sandbox(str(tmp_path / "box")) as box:
        upstream = {"command": mcvsphere_command(), "env": vcenter.mcvsphere_env(),
                    "timeout_s": 60}  # fmt: skip
        gateway_config(box, upstream=upstream)
        log = Path(box.state_dir, "upstreams", "vsphere.log")
        seen = []
        for _ in range(3):
            async with stdio_gateway(box) as c:
                tools = {t.name for t in (await c.list_tools()).tools}
            assert "power_off" in tools or "power_off_vm" in tools, sorted(tools)
            seen.append(log.read_text().count(DISCOVER) if log.exists() else 0)
    assert seen[0] > 0, "the first session probed, and mcvsphere logged it"
    assert seen[1] == seen[0] == seen[2], f"later sessions probed again: {seen}"
    assert Path(box.state_dir, "upstreams", "vsphere.era").read_text() == "handshake\n"
