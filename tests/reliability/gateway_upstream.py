"""The VM MCP server behind the gateway in the gateway fault matrix.

Tools: ``get_vm(name)`` (read-only in the sandbox catalog), ``power_off_vm(name)``
(mutating) and ``delete_datastore(datastore)`` (not in the catalog). Every call
that reaches it is appended to ``GW_UPSTREAM_ACTIONS`` on arrival, before
anything else, so the matrix counts what was forwarded even when the server
then misbehaves: ``GW_UPSTREAM_CONTROL`` (a file) holding ``crash`` exits the
process mid-call, ``hang`` never answers.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("gateway-matrix-upstream", log_level="WARNING")


def _arrived(tool: str, argument: str) -> None:
    with open(os.environ["GW_UPSTREAM_ACTIONS"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"tool": tool, "arg": argument, "pid": os.getpid()}) + "\n")
    control = Path(os.environ["GW_UPSTREAM_CONTROL"])
    mode = control.read_text().strip() if control.exists() else ""
    if mode == "crash":
        os._exit(17)
    if mode == "hang":
        time.sleep(3600)


@server.tool()
def get_vm(name: str) -> str:
    """One VM's state (read-only)."""
    _arrived("get_vm", name)
    return f"{name}: poweredOn"


@server.tool()
def power_off_vm(name: str) -> str:
    """Power a VM off (mutating)."""
    _arrived("power_off_vm", name)
    return f"{name} is off"


@server.tool()
def delete_datastore(datastore: str) -> str:
    """Delete a datastore (not in the catalog: unlisted)."""
    _arrived("delete_datastore", datastore)
    return f"{datastore} deleted"


if __name__ == "__main__":
    server.run("stdio")
