"""Moving a VM server behind the gateway: what is refused, the endpoint it gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unit.hostconfig.host_samples import (
    CLAUDE_PROJECT,
    GATEWAY,
    PASSWORD,
    claude_config,
    http,
    stdio,
)
from zerto_rewind.errors import UsageError
from zerto_rewind.hostconfig.files import locate_server
from zerto_rewind.hostconfig.move import gateway_endpoint, move_to_gateway

# ------------------------------------------------------------------ refusals


def test_refuses_a_server_that_does_not_exist(tmp_path: Path) -> None:
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    with pytest.raises(
        UsageError, match=r"no MCP server named 'vcenter' \(servers: github, vsphere"
    ):
        move_to_gateway(config, "vcenter", GATEWAY, via=stdio())
    with pytest.raises(UsageError, match="no MCP server named 'vcenter' in"):
        locate_server([config.file], "vcenter")


def test_refuses_an_entry_that_is_already_the_gateway(tmp_path: Path) -> None:
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    with pytest.raises(UsageError, match="already reaches the zerto-rewind gateway"):
        move_to_gateway(moved, "vsphere", gateway, via=stdio())


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            {"command": "mcvsphere", "env": {"VCENTER_PASSWORD": "${VC_PASS}"}},
            "env.VCENTER_PASSWORD",
        ),
        ({"command": "node", "args": ["${workspaceFolder}/vs.js"]}, r"args\[0\]"),
        ({"command": "mcvsphere", "envFile": "/home/a/.vc.env"}, "envFile"),
        ({"command": "mcvsphere", "cwd": "/srv"}, "working directory"),
        ({"type": "sse", "url": "https://vc/sse"}, "type 'sse'"),
        ({"args": ["x"]}, "neither command nor url"),
    ],
)
def test_refuses_what_the_gateway_cannot_carry(
    tmp_path: Path, entry: dict[str, Any], reason: str
) -> None:
    config = claude_config(tmp_path, {"vsphere": entry})
    with pytest.raises(UsageError, match=reason) as caught:
        move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert PASSWORD not in str(caught.value)


def test_refuses_name_and_client_clashes(tmp_path: Path) -> None:
    config = claude_config(tmp_path, {"proxmox": {"command": "other-proxmox-mcp"}})
    with pytest.raises(UsageError, match="already has a different upstream 'proxmox'"):
        move_to_gateway(config, "proxmox", GATEWAY, via=stdio())
    dotted = claude_config(tmp_path, {"vc.prod": {"command": "mcvsphere"}})
    with pytest.raises(UsageError, match="cannot be a gateway upstream"):
        move_to_gateway(dotted, "vc.prod", GATEWAY, via=stdio())
    taken = {**GATEWAY, "gateway": {"clients": {"alice-cursor": "0" * 64}}}
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    with pytest.raises(UsageError, match="already has a token for client 'alice-cursor'"):
        move_to_gateway(config, "vsphere", taken, via=http())


def test_the_same_move_twice_into_the_gateway_is_idempotent(tmp_path: Path) -> None:
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    _, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    _, again = move_to_gateway(config, "vsphere", gateway, via=stdio())
    assert again == gateway


def test_gateway_endpoint() -> None:
    assert gateway_endpoint("http://127.0.0.1:8750", "vsphere") == (
        "http://127.0.0.1:8750/mcp/vsphere"
    )
    assert gateway_endpoint("https://gw.lab:443/mcp/", "vs") == "https://gw.lab:443/mcp/vs"
    assert gateway_endpoint("https://gw.lab/mcp/vs", "vs") == "https://gw.lab/mcp/vs"
    with pytest.raises(UsageError, match="clear text"):
        gateway_endpoint("http://gw.lab.local:8750", "vsphere")
    with pytest.raises(UsageError, match="http"):
        gateway_endpoint("ftp://127.0.0.1", "vsphere")
