"""A small, fast VM MCP server for bench_gateway.py: the upstream both paths reach.

    python _gw_upstream.py stdio
    python _gw_upstream.py http READY_FILE    # streamable HTTP on 127.0.0.1:<free port>
    python _gw_upstream.py http-json READY_FILE    # the same, answering JSON, not SSE

Tools: ``get_vm(name)`` (read-only in the sandbox catalog),
``power_off_vm(name)`` (mutating), and for bench_identity.py ``get_vm_id(name)``
(the identity check's resolver: the VM's moref) and ``get_call_counts()`` (how
often each tool ran in this process). Both answer at once: no I/O, no sleep, so
what the benchmark times is the transport and the gateway, not the tool. Over
HTTP it serves the SDK's defaults (stateful sessions, SSE answers), as the
gateway's own HTTP endpoint does, with uvicorn's access log off as there.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-vm", log_level="WARNING")
# The morefs bench_identity.py gives these VMs in the simulator's estate.
MOREFS = {"jp-ubuntu": "vm-42"}
COUNTS: dict[str, int] = {}


def _count(tool: str) -> None:
    COUNTS[tool] = COUNTS.get(tool, 0) + 1


@server.tool()
def get_vm(name: str) -> str:
    """One VM's state (read-only)."""
    _count("get_vm")
    return f"{name}: poweredOn, 2 vCPU, 4096 MB"


@server.tool()
def power_off_vm(name: str) -> str:
    """Power a VM off (mutating; this stand-in changes nothing)."""
    _count("power_off_vm")
    return f"{name} is off"


@server.tool()
def get_vm_id(name: str) -> dict[str, str | None]:
    """The VM's vCenter identity (read-only): what the identity check compares with Zerto."""
    _count("get_vm_id")
    return {"name": name, "moid": MOREFS.get(name)}


@server.tool()
def get_call_counts() -> dict[str, int]:
    """How often each tool ran in this process (read-only)."""
    return dict(COUNTS)


def serve_http(ready_file: str, *, json_response: bool = False) -> None:
    """``json_response``: a call's answer as one JSON body in both eras (the SDK's default
    answers a 2025-11-25 call with an SSE stream, about 1 ms more per call here)."""
    import anyio
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1", json_response=json_response)
    # IPPROTO_TCP, as the gateway does: asyncio then sets TCP_NODELAY (else ~40 ms stalls).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    http = uvicorn.Server(config)

    async def run() -> None:
        async with anyio.create_task_group() as tg:

            async def announce() -> None:
                for _ in range(1000):  # at most 20 s
                    if http.started:
                        break
                    await anyio.sleep(0.02)
                url = f"http://127.0.0.1:{port}/mcp"
                tmp = f"{ready_file}.tmp"
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump({"url": url, "pid": os.getpid()}, fh)
                os.replace(tmp, ready_file)

            tg.start_soon(announce)
            await http.serve(sockets=[sock])

    anyio.run(run)


if __name__ == "__main__":
    # bench_ready.py: a server that takes this long to start (a vCenter login, say).
    time.sleep(float(os.environ.get("BENCH_START_DELAY_S", "0")))
    if len(sys.argv) >= 3 and sys.argv[1] in ("http", "http-json"):
        serve_http(sys.argv[2], json_response=sys.argv[1] == "http-json")
    else:
        server.run("stdio")
