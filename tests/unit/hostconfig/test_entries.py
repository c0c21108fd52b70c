"""What a host entry is: the gateway, or a VM server (named by keys, never values)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from unit.hostconfig.host_samples import CFG, CLAUDE_PROJECT, GATEWAY_ARGS, PY, write
from zerto_rewind.hostconfig.bypass import bypass_findings
from zerto_rewind.hostconfig.entries import looks_like_vm_server, zerto_rewind_role
from zerto_rewind.hostconfig.specs import HOSTS, HostFile


def test_looks_like_vm_server_names_keys_never_values() -> None:
    reasons = looks_like_vm_server(CLAUDE_PROJECT["mcpServers"]["vsphere"])
    assert reasons == [
        "env VCENTER_HOST, VCENTER_INSECURE, VCENTER_PASSWORD, VCENTER_USER",
        "command names mcvsphere, vsphere",
    ]
    assert looks_like_vm_server({"command": "npx", "args": ["-y", "@mcp/server-git"]}) == []
    assert looks_like_vm_server({"url": "https://pve.lab/mcp", "env": {"PROXMOX_TOKEN": "x"}})


# A VMware server as its maintainers ship it: nothing from the vSphere word list.
VMWARE = {"command": "vmware-mcp", "args": ["--lab"], "env": {"VMWARE_HOST": "esx.lab"}}


def doctor_verdicts(tmp_path: Path, name: str, entry: dict[str, Any]) -> tuple[str, str]:
    """(the bypass scan's finding kind, the MCP check's status) for one server in .mcp.json."""
    from zerto_rewind.cli.doctor.mcp import mcp_server_checks
    from zerto_rewind.hostconfig.claude import read_sources

    project = tmp_path / "proj"
    path = write(project / ".mcp.json", {"mcpServers": {name: entry}})
    (finding,) = bypass_findings({}, files=[HostFile(HOSTS["claude-code"], str(path))])
    sources = read_sources({"HOME": str(tmp_path / "home")}, projects=[str(project)])
    # the catalog guards another server, so a VM server here is a finding for both
    settings = SimpleNamespace(catalog=SimpleNamespace(read_only=(), tools=("mcp__vsphere__*",)))
    (check,) = mcp_server_checks(sources, settings, matchers=None)  # type: ignore[arg-type]
    assert f"{name}: " in check.detail
    return finding.kind, check.status


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("vmware-lab", VMWARE),  # the case the two word lists once disagreed on
        ("lab", VMWARE),  # the command alone says so
        ("vmware-lab", {"command": "node", "args": ["server.js"]}),  # the name alone says so
    ],
)
def test_one_vm_server_test_for_both_doctor_checks(
    tmp_path: Path, name: str, entry: dict[str, Any]
) -> None:
    """A vmware-* server is a VM server to the bypass scan and to the MCP check alike."""
    assert looks_like_vm_server(entry, name)
    assert doctor_verdicts(tmp_path, name, entry) == ("bypass", "fail")


def test_a_harmless_server_is_no_vm_server_to_either_check(tmp_path: Path) -> None:
    """The same question gives the same no: neither check flags a git server."""
    entry = {"command": "npx", "args": ["-y", "@mcp/server-git"]}
    assert looks_like_vm_server(entry, "git") == []
    assert doctor_verdicts(tmp_path, "git", entry) == ("other", "warn")


def test_the_gateway_is_the_gateway_to_both_checks(tmp_path: Path) -> None:
    """An HTTP gateway entry named vsphere is the gateway to the scan and to the MCP check."""
    entry = {
        "type": "http",
        "url": "http://127.0.0.1:8750/mcp/vsphere",
        "headers": {"Authorization": "Bearer t"},
    }
    assert zerto_rewind_role(entry, "vsphere") == "gateway"
    assert doctor_verdicts(tmp_path, "vsphere", entry) == ("gateway", "pass")
    stdio = {"command": PY, "args": [*GATEWAY_ARGS, "--config", CFG]}
    assert zerto_rewind_role(stdio) == "gateway"
    assert zerto_rewind_role({"command": PY, "args": ["-m", "zerto_rewind", "serve"]}) == "serve"
    assert zerto_rewind_role({"command": "vmware-mcp"}) is None
