"""The proxy server's own pieces (gateway/proxy.py): the host label it logs, and the
middleware that answers a connection's opening only once the upstream's tools are listed.

The host label comes from the MCP client's ``clientInfo``, which the agent's side
writes: it is shown and logged, capped and stripped, and never decides anything.
The socket-level behaviour is in tests/integration/gateway/test_gateway_stdio.py and
test_gateway_ready.py.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from zerto_rewind.gateway.proxy import HOST_MAX, START_BUDGET_S, ReadyFirst, host_label
from zerto_rewind.gateway.upstream import UpstreamError

TOOL = types.Tool(name="power_off_vm", input_schema={"type": "object"})


def test_the_host_is_name_and_version() -> None:
    assert host_label("codex-mcp-client", "0.169.0") == "codex-mcp-client 0.169.0"


def test_a_host_without_a_version_is_its_name() -> None:
    assert host_label("gemini-cli-mcp-client", None) == "gemini-cli-mcp-client"
    assert host_label("gemini-cli-mcp-client", "") == "gemini-cli-mcp-client"


def test_no_name_is_no_host() -> None:
    """A missing, empty or non-text name: no host field at all, whatever the version."""
    for name in (None, "", 42, "\n\t\x1b"):
        assert host_label(name, "1.0") is None


def test_control_and_format_characters_are_dropped() -> None:
    """A newline cannot start a forged log line; an escape or a bidi override cannot
    repaint a terminal; the words themselves stay."""
    label = host_label("evil\nhost\x1b[31m\u202e", "1.0\r\n\u2028x")
    assert label == "evilhost[31m 1.0x"
    assert all(ch.isprintable() for ch in label)


def test_the_host_is_capped() -> None:
    label = host_label("n" * 500, "v" * 500)
    assert label is not None
    assert len(label) == HOST_MAX
    assert label == "n" * HOST_MAX


# ---------------------------------------------------------------- ready at initialize


class FakeUpstream:
    """list_tools answers TOOL, raises ``error``, or sleeps ``hang_s`` first."""

    name = "vsphere"

    def __init__(
        self,
        *,
        error: str | None = None,
        hang_s: float = 0.0,
        timeout_s: float = 60.0,
        last_error: str | None = None,
    ) -> None:
        self.settings = SimpleNamespace(timeout_s=timeout_s)
        self.error = error
        self.hang_s = hang_s
        self.last_error = last_error
        self.asked: list[float] = []

    async def list_tools(self, timeout_s: float) -> list[types.Tool]:
        self.asked.append(timeout_s)
        await anyio.sleep(self.hang_s)
        if self.error is not None:
            raise UpstreamError(self.error)
        return [TOOL]


class FakeGateway:
    def __init__(self) -> None:
        self.learned: list[tuple[str, list[types.Tool]]] = []
        self.errors: list[tuple[str, str]] = []
        self.metrics = SimpleNamespace(upstream_error=lambda u, k: self.errors.append((u, k)))

    def learn_tools(self, upstream: str, tools: list[types.Tool]) -> None:
        self.learned.append((upstream, tools))


def through(
    gateway: FakeGateway, upstream: FakeUpstream, method: str
) -> tuple[list[str], BaseException | None]:
    """One request through the middleware; which methods reached the SDK, and any error."""
    reached: list[str] = []

    async def call_next(ctx: Any) -> dict[str, Any]:
        reached.append(ctx.method)
        return {}

    async def go() -> None:
        middleware = ReadyFirst(gateway, upstream)  # type: ignore[arg-type]
        await middleware(SimpleNamespace(method=method), call_next)  # type: ignore[arg-type]

    try:
        anyio.run(go)
    except MCPError as exc:
        return reached, exc
    return reached, None


@pytest.mark.parametrize("method", ["initialize", "server/discover"])
def test_an_opening_waits_for_the_upstreams_tools(method: str) -> None:
    gateway, upstream = FakeGateway(), FakeUpstream()
    reached, error = through(gateway, upstream, method)
    assert (reached, error) == ([method], None)
    assert upstream.asked == [START_BUDGET_S]
    assert gateway.learned == [("vsphere", [TOOL])]


def test_other_requests_do_not_wait() -> None:
    """tools/list, tools/call and ping go straight on: the list has its own wait."""
    for method in ("tools/list", "tools/call", "ping"):
        upstream = FakeUpstream()
        reached, error = through(FakeGateway(), upstream, method)
        assert (reached, error, upstream.asked) == ([method], None, [])


def test_an_upstream_that_does_not_start_fails_the_opening_with_its_last_error() -> None:
    """The SDK never sees the initialize, so the connection stays unopened; the message
    names the server, the budget, the last error, and what an operator can do."""
    gateway = FakeGateway()
    upstream = FakeUpstream(
        error="not connected", timeout_s=3, last_error="FileNotFoundError: mcvsphere"
    )
    reached, error = through(gateway, upstream, "initialize")
    assert reached == []
    assert isinstance(error, MCPError)
    assert error.error.code == types.INTERNAL_ERROR
    text = error.error.message
    assert "'vsphere' did not start within 3 s" in text
    assert "last error: FileNotFoundError: mcvsphere" in text
    assert "none of its tools are offered" in text
    assert "zerto-rewind doctor --server vsphere" in text
    assert gateway.errors == [("vsphere", "start")]


def test_a_connected_upstream_whose_list_fails_says_so() -> None:
    upstream = FakeUpstream(error="the VM MCP server 'vsphere' did not list its tools: X")
    _, error = through(FakeGateway(), upstream, "initialize")
    assert isinstance(error, MCPError)
    assert "did not list its tools" in error.error.message


def test_a_hung_upstream_is_cut_at_the_budget() -> None:
    """An upstream whose own wait never ends is cut one second past the budget."""
    upstream = FakeUpstream(hang_s=30.0, timeout_s=0.2)
    begin = time.monotonic()
    reached, error = through(FakeGateway(), upstream, "initialize")
    assert reached == []
    assert isinstance(error, MCPError)
    assert "did not start within 0.2 s (it did not answer)" in error.error.message
    assert time.monotonic() - begin < 5
