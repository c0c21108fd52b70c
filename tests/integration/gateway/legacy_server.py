"""The stand-in vSphere server (tests/e2e/vm_mcp_server.py) acting as an older-era server.

Like mcvsphere (FastMCP on an SDK from before 2026-07-28), it does not know
``server/discover``: it serves the handshake only, and each discover is refused after a
warning on stderr (where mcvsphere logs its validation warnings) and a line appended to
the file named by ``LEGACY_DISCOVERS``, so a test can count them. With
``LEGACY_START_DELAY_S`` it sleeps that long before it serves, as a server that logs in
to vCenter first.

Its tools, and what each mutating call records, are the stand-in's.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

STAND_IN = Path(__file__).resolve().parents[2] / "e2e" / "vm_mcp_server.py"


async def count_discover(ctx: Any, call_next: CallNext) -> HandlerResult:
    """Every server/discover is counted and warned about; the handshake-only loop refuses it."""
    if ctx.method == "server/discover":
        counter = os.environ.get("LEGACY_DISCOVERS")
        if counter:
            with open(counter, "a") as fh:
                fh.write(f"{os.getpid()}\n")
        sys.stderr.write("WARNING Failed to validate request: server/discover is not a request\n")
        sys.stderr.flush()
    return await call_next(ctx)


async def serve() -> None:
    server = runpy.run_path(str(STAND_IN))["server"]._lowlevel_server
    server.middleware.append(count_discover)
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        # Handshake only, as a server from before 2026-07-28: no modern era to lock into.
        await serve_loop(
            server,
            read,
            write,
            lifespan_state=state,
            init_options=server.create_initialization_options(),
        )


def main() -> None:
    time.sleep(float(os.environ.get("LEGACY_START_DELAY_S", "0")))
    anyio.run(serve)


if __name__ == "__main__":
    main()
