"""A stand-in VM MCP server (stdio) that records the trace context each call carries.

Tools: ``list_vms()`` (read-only), ``power_off_vm(name)`` (mutating),
``mystery_tool(name)`` (unlisted). Each call that reaches it appends a JSON line
``{"tool", "vm", "meta"}`` to the file named by ``TRACED_ACTIONS``; ``meta`` holds
the ``traceparent`` and ``tracestate`` of the request's ``params._meta``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("vsphere", instructions="Stand-in that records the trace context it is sent.")


def _record(tool: str, vm: str | None, ctx: Context) -> None:
    meta: Any = ctx.request_context.meta or {}
    keys = ("traceparent", "tracestate")
    entry = {"tool": tool, "vm": vm, "meta": {k: meta.get(k) for k in keys if k in meta}}
    with open(os.environ["TRACED_ACTIONS"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


@server.tool()
def list_vms(ctx: Context) -> str:
    """Every VM (read-only)."""
    _record("list_vms", None, ctx)
    return "jp-ubuntu"


@server.tool()
def power_off_vm(name: str, ctx: Context) -> str:
    """Power a VM off (mutating)."""
    _record("power_off_vm", name, ctx)
    return f"{name} powered off"


@server.tool()
def mystery_tool(name: str, ctx: Context) -> str:
    """A tool no catalog lists."""
    _record("mystery_tool", name, ctx)
    return f"did something mysterious to {name}"


if __name__ == "__main__":
    server.run("stdio")
