"""A stand-in VM MCP server (stdio) with one tool that writes its own host's files.

``download_from_datastore(datastore, path, save_to=None)`` is marked read-only, as
mcvsphere marks it; with ``save_to`` it writes the "downloaded" bytes to that local
path, with the server's rights. ``set_guest_recovery`` takes two values its input
schema marks secret (``writeOnly``, ``format: password``) under names that do not look
like secrets. Each call that reaches it is recorded as a JSON line in the file named
by ``E2E_VM_ACTIONS_LOG``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

server = MCPServer("vsphere", instructions="Stand-in with a tool that writes local files.")


@server.tool(
    description="Download a file from datastore. Returns content for small files, streams to "
    "disk for large files.",
    annotations=ToolAnnotations(readOnlyHint=True),
)
def download_from_datastore(datastore: str, path: str, save_to: str | None = None) -> Any:
    record("download_from_datastore", {"save_to": save_to})
    content = f"contents of [{datastore}] {path}\n"
    if save_to:
        Path(save_to).write_text(content, encoding="utf-8")
        return {"saved_to": save_to}
    return {"content": content}


@server.tool(description="Set a guest's recovery phrase and unlock code.")
def set_guest_recovery(
    vm_name: str,
    recovery_phrase: Annotated[str, Field(json_schema_extra={"writeOnly": True})],
    unlock_code: Annotated[str, Field(json_schema_extra={"format": "password"})],
) -> str:
    record("set_guest_recovery", {"vm_name": vm_name})
    return f"recovery set on {vm_name}"


def record(tool: str, arguments: dict[str, Any]) -> None:
    log = os.environ.get("E2E_VM_ACTIONS_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


if __name__ == "__main__":
    server.run("stdio")
