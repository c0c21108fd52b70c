"""The upstream's protocol era: a handshake-era server is probed with server/discover once.

mcvsphere (FastMCP before 2026-07-28) logs a screenful of validation warnings for every
``server/discover``, and the SDK's client probes one on every connection. The gateway
remembers that a server answered the handshake instead (``<state_dir>/upstreams/NAME.era``)
and skips the probe on later connections: the stand-in here (legacy_server.py) counts the
probes it gets and warns about each in its own log, as mcvsphere does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import (
    gateway_config,
    legacy_upstream,
    stdio_gateway,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

WARNING = "server/discover is not a request"


async def test_a_handshake_era_upstream_gets_one_discover_over_many_sessions(
    box: Sandbox, tmp_path: Path
) -> None:
    """Three host sessions, three gateway processes, one discover: the first session's."""
    discovers = tmp_path / "discovers"
    upstream = legacy_upstream(box, tmp_path / "actions.jsonl", LEGACY_DISCOVERS=str(discovers))
    gateway_config(box, upstream=upstream)
    for _ in range(3):
        async with stdio_gateway(box) as c:
            listed = await c.call_tool("list_vms", {})
            assert not listed.is_error, text_of(listed)
    assert len(discovers.read_text().splitlines()) == 1
    upstream_log = Path(box.state_dir, "upstreams", "vsphere.log").read_text()
    assert upstream_log.count(WARNING) == 1
    era = Path(box.state_dir, "upstreams", "vsphere.era")
    assert era.read_text() == "handshake\n"
    assert era.stat().st_mode & 0o777 == 0o600


async def test_a_dual_era_upstream_is_not_remembered_as_handshake_only(
    box: Sandbox, tmp_path: Path
) -> None:
    """The plain stand-in (SDK 2.x) answers discover: the 2026-07-28 era, nothing remembered."""
    gateway_config(box, tmp_path / "actions.jsonl")
    async with stdio_gateway(box) as c:
        assert not (await c.call_tool("list_vms", {})).is_error
    assert not Path(box.state_dir, "upstreams", "vsphere.era").exists()
