"""The stand-in vSphere server (tests/e2e/vm_mcp_server.py) with faults *after* a call ran.

Each ``tools/call`` runs first (a mutating tool records itself in the stand-in's action
log), then the file named by ``STALL_CONTROL`` says what the gateway hears back:

* ``stall``: nothing, ever (the call reached the server and ran; its answer is lost);
* ``error``: an ``isError`` result (the server ran it and says it failed);
* anything else, or no file: the tool's own answer.

Over stdio, like the stand-in.
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult

STAND_IN = Path(__file__).resolve().parents[2] / "e2e" / "vm_mcp_server.py"


def _mode() -> str:
    control = Path(os.environ["STALL_CONTROL"])
    return control.read_text().strip() if control.exists() else ""


async def fault_after_the_call(ctx: Any, call_next: CallNext) -> HandlerResult:
    result = await call_next(ctx)
    if ctx.method != "tools/call":
        return result
    mode = _mode()
    if mode == "stall":
        await anyio.sleep(3600)
    if mode == "error":
        text = types.TextContent(type="text", text="vCenter refused the task")
        return types.CallToolResult(content=[text], is_error=True)
    return result


def main() -> None:
    server = runpy.run_path(str(STAND_IN))["server"]
    server._lowlevel_server.middleware.append(fault_after_the_call)
    server.run("stdio")


if __name__ == "__main__":
    main()
