"""The gateway's CPU per call with OpenTelemetry traces on ÷ off, in one run.

Two ``zerto-rewind gateway --listen`` processes in front of the same kind of
upstream (``_gw_upstream.py`` over stdio): one with no ``OTEL_*`` variable
(tracing off: nothing of the OpenTelemetry SDK is loaded), one with
``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at an OTLP/HTTP sink on loopback, so
every call makes its SERVER and CLIENT spans and the batch exporter really
encodes and POSTs them. Blocks of concurrent sessions alternate between the two,
and the CPU each gateway process spent (``/proc``, the exporter's thread
included) from the first block to the exporter's last flush is divided by the
calls it served. Calls are read-only ``get_vm``:
they take the whole traced path (span, forward span, ``_meta``) without waiting
for a checkpoint, so the ratio is the tracing's own cost at its largest share.

    .venv/bin/python benchmarks/bench_tracing.py [--blocks 6] [--calls 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import _bench
import anyio
from bench_gateway import block, configure, cpu_seconds, http_session, spawn_ready, stop, tokens

SESSIONS = 10
# The batch exporter's schedule: short, so its exports fall inside the measured window.
EXPORT_DELAY_MS = 500
RATIO_TARGET = 1.5


@contextmanager
def otlp_sink() -> Iterator[tuple[str, list[int]]]:
    """An OTLP/HTTP endpoint on loopback that takes every export (200) and counts bytes."""
    received: list[int] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(len(self.rfile.read(int(self.headers.get("Content-Length", "0")))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


async def measure(
    urls: dict[str, str], token_list: list[str], pids: dict[str, int], args: Any
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Alternating blocks on each gateway: calls per second per block, and the CPU ms
    per call of each gateway process over the whole window (its last export included)."""
    rates: dict[str, list[float]] = {name: [] for name in urls}
    async with AsyncExitStack() as stack:
        sessions = {
            name: [
                await stack.enter_async_context(http_session(url, token_list[i]))
                for i in range(SESSIONS)
            ]
            for name, url in urls.items()
        }
        for group in sessions.values():  # warm: connections, caches, the exporter's first POST
            await block(group, 3)
        before = {name: cpu_seconds([pid]) for name, pid in pids.items()}
        names = list(urls)
        for n in range(args.blocks):
            for name in names if n % 2 == 0 else names[::-1]:
                rates[name].append(await block(sessions[name], args.calls))
        await anyio.sleep(3 * EXPORT_DELAY_MS / 1000)  # the exporter's last batch is sent
        calls = args.blocks * SESSIONS * args.calls
        spent = {
            name: (cpu_seconds([pid]) - before[name]) / calls * 1000 for name, pid in pids.items()
        }
    return rates, spent


async def run(box: _bench.Sandbox, args: argparse.Namespace, tmp: str) -> int:
    token_list = list(tokens(SESSIONS).values())
    argv = [sys.executable, "-m", "zerto_rewind", "gateway", "--allow-privileged-upstream"]
    argv += ["--listen", "127.0.0.1:0", "--ready-file"]
    with otlp_sink() as (endpoint, received):
        traced_env = box.env(
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_SERVICE_NAME="zr-bench-gateway",
            OTEL_BSP_SCHEDULE_DELAY=str(EXPORT_DELAY_MS),
        )
        off, off_info = spawn_ready([*argv, f"{tmp}/off.json"], f"{tmp}/off.json", box.env(),
                                    f"{tmp}/off.err")  # fmt: skip
        on, on_info = spawn_ready([*argv, f"{tmp}/on.json"], f"{tmp}/on.json", traced_env,
                                  f"{tmp}/on.err")  # fmt: skip
        try:
            urls = {"tracing off": off_info["mcp"]["vsphere"],
                    "tracing on": on_info["mcp"]["vsphere"]}  # fmt: skip
            pids = {"tracing off": off.pid, "tracing on": on.pid}
            rates, spent = await measure(urls, token_list, pids, args)
        finally:
            stop(off)
            stop(on)
    _bench.table(
        ["gateway", "calls/s per block", "median calls/s", "gateway CPU ms/call"],
        [[name, ", ".join(f"{r:.0f}" for r in rates[name]), _bench.median(rates[name]),
          f"{spent[name]:.2f}"] for name in urls],
    )  # fmt: skip
    print(f"\n{args.blocks} alternating blocks per gateway, {SESSIONS} sessions × {args.calls} "
          f"read-only calls each; the traced gateway's sink took {len(received)} exports, "
          f"{sum(received) / 1024:.0f} KiB\n")  # fmt: skip
    if not received:
        print("FAIL: the traced gateway exported nothing")
        return 1
    ratio = spent["tracing on"] / spent["tracing off"]
    return _bench.judge("gateway CPU per call, tracing on ÷ off", ratio, RATIO_TARGET, unit="×")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6, help="blocks per gateway")
    parser.add_argument("--calls", type=int, default=20, help="calls per session per block")
    args = parser.parse_args()
    _bench.header(
        "gateway: CPU per call with OpenTelemetry traces on ÷ off",
        "./.venv/bin/python benchmarks/bench_tracing.py",
    )
    box = _bench.sandbox(guard={"timeout_s": 20})
    configure(box, SESSIONS)
    try:
        with tempfile.TemporaryDirectory(prefix="zr-bench-otel-") as tmp:
            return anyio.run(run, box, args, tmp)
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
