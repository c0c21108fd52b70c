"""A stdio VM server whose resolver misbehaves on request: the identity check's faults.

Tools: ``get_vm_id(name)`` (read-only: the resolver) and ``power_off_vm(name)``
(mutating). Before each resolver call it reads ``RESOLVER_CONTROL`` (a file):
``slow`` answers after 5 s, ``error`` fails the tool, ``missing`` answers without
a moref, ``vm-N`` answers that moref, a JSON object is the answer itself (a moref
and its vCenter); no file answers ``vm-101`` (the simulator's jp-ubuntu). Each
``power_off_vm`` that runs appends a line to ``RESOLVER_ACTIONS``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("resolver")


@server.tool()
def get_vm_id(name: str) -> dict[str, Any]:
    """The VM's vCenter identity (read-only)."""
    control = Path(os.environ["RESOLVER_CONTROL"])
    mode = control.read_text().strip() if control.exists() else "vm-101"
    if mode == "slow":
        time.sleep(5)  # bounded: past the resolver's timeout, never an orphan for long
    if mode == "error":
        raise ValueError(f"VM '{name}' not found")
    if mode == "missing":
        return {"name": name}
    if mode.startswith("{"):
        answer: dict[str, Any] = json.loads(mode)
        return {"name": name, **answer}
    return {"name": name, "moid": "vm-101" if mode == "slow" else mode}


@server.tool()
def power_off_vm(name: str) -> str:
    """Power a VM off (mutating)."""
    with open(os.environ["RESOLVER_ACTIONS"], "a") as fh:
        fh.write(json.dumps({"tool": "power_off_vm", "vm": name}) + "\n")
    return f"{name} is off"


if __name__ == "__main__":
    server.run("stdio")
