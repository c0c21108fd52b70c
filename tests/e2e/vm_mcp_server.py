"""A stand-in VM-changing MCP server (stdio) for end-to-end tests: ``vsphere``.

Tools as Claude Code names them: ``mcp__vsphere__<tool>``.

- read-only: ``list_vms()``, ``get_vm(name)``
- mutating: ``power_off_vm(name)``, ``reconfigure_vm(vm={name, cpus})`` (VM at ``vm.name``),
  ``snapshot_vms(vms=[...])``, ``run_command(command)`` (VM = the host of an ssh command,
  e.g. ``ssh admin@jp-ubuntu.lab.local 'sudo reboot'``)
- unlisted: ``mystery_tool(name)``

Every mutating call (and the unlisted one) records that it *happened*, so a test can tell a
call that reached the server from one the hook stopped:

- a JSON line ``{"vm", "action", "tool", "arguments", "pid"}`` appended to the file named by
  ``E2E_VM_ACTIONS_LOG`` (always, when set);
- ``POST {E2E_SIM_URL}/_sim/vm-actions`` with ``{"vm", "action", "tool"}`` (when
  ``E2E_SIM_URL`` is set), verifying TLS with the CA bundle at ``E2E_SIM_CA``.

Claude Code starts this with the ``env`` block of the MCP config; see ``harness.mcp_config``.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

SERVER_NAME = "vsphere"
READ_ONLY_TOOLS = ("list_vms", "get_vm")
MUTATING_TOOLS = ("power_off_vm", "reconfigure_vm", "snapshot_vms", "run_command")
UNLISTED_TOOLS = ("mystery_tool",)

VMS: dict[str, dict[str, Any]] = {
    "jp-ubuntu": {"name": "jp-ubuntu", "power": "on", "cpus": 2, "host": "jp-ubuntu.lab.local"},
    "web-01": {"name": "web-01", "power": "on", "cpus": 4, "host": "web-01.lab.local"},
    "db-01": {"name": "db-01", "power": "on", "cpus": 8, "host": "db-01.lab.local"},
}

_SSH_OPTS_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")


def ssh_host(command: str) -> str | None:
    """The host of the first ``ssh [opts] [user@]host ...`` in a command string."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] != "ssh":
            continue
        rest = iter(words[i + 1 :])
        for arg in rest:
            if arg.startswith("-") and len(arg) > 1:
                if len(arg) == 2 and arg[1] in _SSH_OPTS_WITH_ARG:
                    next(rest, None)
                continue
            return arg.rsplit("@", 1)[-1]
    return None


def record(vm: str | None, tool: str, arguments: dict[str, Any]) -> None:
    entry = {"vm": vm, "action": tool, "tool": tool, "arguments": arguments, "pid": os.getpid()}
    log = os.environ.get("E2E_VM_ACTIONS_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
    sim = os.environ.get("E2E_SIM_URL")
    if sim:
        import ssl

        import httpx

        ca = os.environ.get("E2E_SIM_CA")
        resp = httpx.post(
            sim.rstrip("/") + "/_sim/vm-actions",
            json={"vm": vm, "action": tool, "tool": tool},
            verify=ssl.create_default_context(cafile=ca) if ca else True,
            timeout=10,
        )
        resp.raise_for_status()


server = MCPServer(SERVER_NAME, instructions="Stand-in vSphere for zerto-rewind e2e tests.")


@server.tool()
def list_vms() -> list[dict[str, Any]]:
    """List the VMs (read-only)."""
    return list(VMS.values())


@server.tool()
def get_vm(name: str) -> dict[str, Any]:
    """Show one VM (read-only)."""
    return VMS.get(name, {"name": name, "error": "no such VM"})


@server.tool()
def power_off_vm(name: str) -> str:
    """Power a VM off (mutating)."""
    record(name, "power_off_vm", {"name": name})
    return f"{name} powered off"


@server.tool()
def reconfigure_vm(vm: dict[str, Any]) -> str:
    """Change a VM's configuration; ``vm`` is ``{"name": ..., "cpus": ...}`` (mutating)."""
    record(vm.get("name"), "reconfigure_vm", {"vm": vm})
    return f"{vm.get('name')} reconfigured: cpus={vm.get('cpus')}"


@server.tool()
def snapshot_vms(vms: list[str]) -> str:
    """Snapshot several VMs (mutating; one record per VM)."""
    for name in vms:
        record(name, "snapshot_vms", {"vms": vms})
    return f"snapshotted {', '.join(vms)}"


@server.tool()
def run_command(command: str) -> str:
    """Run a shell command; the VM is the ssh host in it (mutating)."""
    record(ssh_host(command), "run_command", {"command": command})
    return f"ran: {command}"


@server.tool()
def mystery_tool(name: str) -> str:
    """A tool no catalog lists."""
    record(name, "mystery_tool", {"name": name})
    return f"did something mysterious to {name}"


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
