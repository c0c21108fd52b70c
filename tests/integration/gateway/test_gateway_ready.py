"""Ready at initialize: a host that lists tools right after the handshake gets them all.

Codex sends its first model request as soon as ``initialize`` is answered; a server
whose tools come a second later is missing from the model's tools. The gateway answers
a connection's opening (``initialize``, or ``server/discover`` for a 2026-07-28 client)
only once its upstream is connected and its tools are listed. The upstream here is
deliberately slow to start (it sleeps before it serves); an upstream that never starts
fails the opening with the reason.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from integration.gateway.gateway_helpers import (
    TOKENS,
    client,
    gateway_config,
    gateway_process,
    legacy_upstream,
    stdio_gateway,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

STAND_IN_TOOLS = {
    "list_vms",
    "get_vm",
    "power_off_vm",
    "reconfigure_vm",
    "snapshot_vms",
    "run_command",
    "mystery_tool",
}
SLOW_START_S = 2.0
# What a hasty host gives tools/list after the handshake: well under the slow start,
# far above a list answered from the gateway's cache.
HASTY_S = 1.0


def slow_upstream(box: Sandbox, tmp_path: Path) -> dict[str, Any]:
    delay = str(SLOW_START_S)
    return legacy_upstream(box, tmp_path / "actions.jsonl", LEGACY_START_DELAY_S=delay)


async def hasty_list(c: Client) -> set[str]:
    """tools/list right after the handshake, with a hasty host's patience."""
    with anyio.fail_after(HASTY_S):
        return {t.name for t in (await c.list_tools()).tools}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stdio_a_hasty_host_gets_every_tool_of_a_slow_upstream(
    box: Sandbox, tmp_path: Path, mode: str
) -> None:
    """initialize (legacy, as Codex) or server/discover (auto) waits for the slow upstream;
    the tools/list sent at once then has every tool."""
    gateway_config(box, upstream=slow_upstream(box, tmp_path))
    started = time.monotonic()
    async with stdio_gateway(box, mode=mode) as c:
        opened = time.monotonic() - started
        names = await hasty_list(c)
    assert names == STAND_IN_TOOLS
    assert opened >= SLOW_START_S, "the opening waited for the upstream"


async def test_http_a_hasty_session_gets_every_tool_of_a_slow_upstream(
    box: Sandbox, tmp_path: Path
) -> None:
    """Over HTTP the listener is up before the upstream; a session's initialize waits."""
    gateway_config(box, upstream=slow_upstream(box, tmp_path))
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"], mode="legacy") as c:
            names = await hasty_list(c)
    assert names == STAND_IN_TOOLS


async def test_an_upstream_that_does_not_start_fails_the_opening_with_the_reason(
    box: Sandbox, tmp_path: Path
) -> None:
    """Within the upstream's timeout (2 s here) the host gets an initialize error that names
    the server and what failed; no tool is offered."""
    upstream = slow_upstream(box, tmp_path)
    upstream.update(command=[sys.executable, "-c", "import sys; sys.exit(3)"], timeout_s=2)
    gateway_config(box, upstream=upstream)
    started = time.monotonic()
    with pytest.raises(BaseException) as refused:  # noqa: PT011 (the SDK wraps it in a group)
        async with stdio_gateway(box, mode="legacy"):
            pytest.fail("the handshake must not succeed")
    waited = time.monotonic() - started
    message = str(the_error(refused.value))
    assert "'vsphere' did not start within 2 s" in message
    assert "none of its tools are offered" in message
    assert "zerto-rewind doctor --server vsphere" in message
    assert waited < 15, "refused within the budget, not the host's own timeout"


def the_error(exc: BaseException) -> MCPError:
    """The MCPError the SDK client raised, out of the task groups around it."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError), repr(exc)
    return exc
