"""The proxy server's own pieces (gateway/proxy.py): the host label it logs.

The host label comes from the MCP client's ``clientInfo``, which the agent's side
writes: it is shown and logged, capped and stripped, and never decides anything.
The socket-level behaviour is in tests/integration/gateway/test_gateway_stdio.py.
"""

from __future__ import annotations

from zerto_rewind.gateway.proxy import HOST_MAX, host_label


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
