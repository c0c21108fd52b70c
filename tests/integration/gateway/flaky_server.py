"""A stdio MCP server that misbehaves on request: the gateway's upstream faults.

Tools: ``list_vms`` (read-only), ``power_off_vm(name)`` (mutating). Before each
call it reads ``FLAKY_CONTROL`` (a file): ``crash`` exits the process mid-call,
``hang`` never answers, anything else answers normally. Each call that runs
appends a line to ``FLAKY_ACTIONS``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")


def _misbehave() -> None:
    control = Path(os.environ["FLAKY_CONTROL"])
    mode = control.read_text().strip() if control.exists() else ""
    if mode == "crash":
        os._exit(17)
    if mode == "hang":
        time.sleep(3600)


def _record(tool: str, name: str | None) -> None:
    with open(os.environ["FLAKY_ACTIONS"], "a") as fh:
        fh.write(json.dumps({"tool": tool, "vm": name, "pid": os.getpid()}) + "\n")


@server.tool()
def list_vms() -> str:
    """Every VM (read-only)."""
    _misbehave()
    return "jp-ubuntu"


@server.tool()
def power_off_vm(name: str) -> str:
    """Power a VM off (mutating)."""
    _misbehave()
    _record("power_off_vm", name)
    return f"{name} is off"


if __name__ == "__main__":
    server.run("stdio")
