"""What a host entry is: the gateway, or a VM server (named by keys, never values)."""

from __future__ import annotations

from host_samples import CLAUDE_PROJECT

from zerto_rewind.hostconfig.entries import looks_like_vm_server


def test_looks_like_vm_server_names_keys_never_values() -> None:
    reasons = looks_like_vm_server(CLAUDE_PROJECT["mcpServers"]["vsphere"])
    assert reasons == [
        "env VCENTER_HOST, VCENTER_INSECURE, VCENTER_PASSWORD, VCENTER_USER",
        "command names mcvsphere, vsphere",
    ]
    assert looks_like_vm_server({"command": "npx", "args": ["-y", "@mcp/server-git"]}) == []
    assert looks_like_vm_server({"url": "https://pve.lab/mcp", "env": {"PROXMOX_TOKEN": "x"}})
