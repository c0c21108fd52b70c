"""Ready at initialize: how long a host waits for the tools of a slow-to-start VM server.

A host (Codex) that goes on as soon as ``initialize`` is answered loses every tool
listed later. Each round spawns a stdio gateway in front of ``_gw_upstream.py``
started with ``BENCH_START_DELAY_S`` (a server that takes a while to log in), with
the SDK client in handshake mode as Codex, and times from the spawn:

* ``initialize`` answered, then the ``tools/list`` sent right after it answered;
* the *gap* between the two: the window in which a hasty host goes on without tools.

Three paths, alternated round by round in the same run: the VM server itself
(direct), the gateway as it is (ready: the opening waits for the upstream's tools),
and the gateway with that wait switched off in its own process (before: the
behaviour before this change, initialize at once, the tools later). Judged:

* the ready gateway's median gap ÷ the before gateway's (target: at most 0.05);
* the ready gateway's median time to the first tools/list ÷ the before gateway's
  (target: at most 1.10: waiting at initialize costs the host nothing overall).

    .venv/bin/python benchmarks/bench_ready.py [--rounds 5] [--delay 1.0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _bench
import anyio
from bench_gateway import UPSTREAM, stdio_params
from mcp import Client
from mcp.client.stdio import stdio_client

GAP_RATIO_TARGET = 0.05
FIRST_LIST_RATIO_TARGET = 1.10
GATEWAY = ["gateway", "--stdio", "--upstream", "vsphere", "--allow-privileged-upstream"]
# The gateway before this change: the same process with the opening's wait switched off.
BEFORE = (
    "import sys, zerto_rewind.gateway.proxy as p\n"
    "async def go_on(self, ctx, call_next):\n"
    "    return await call_next(ctx)\n"
    "p.ReadyFirst.__call__ = go_on\n"
    "from zerto_rewind.cli import main\n"
    "sys.exit(main())\n"
)


def argv(path: str) -> list[str]:
    if path == "direct":
        return [sys.executable, UPSTREAM, "stdio"]
    if path == "before":
        return [sys.executable, "-c", BEFORE, *GATEWAY]
    return [sys.executable, "-m", "zerto_rewind", *GATEWAY]


async def one_round(path: str, env: dict[str, str]) -> tuple[float, float, int]:
    """Seconds from spawn to initialize answered and to the first tools/list; tools seen."""
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:  # the gateway's start-up warnings are not the figure
        transport = stdio_client(stdio_params(argv(path), env), errlog=quiet)
        async with Client(transport, cache=None, mode="legacy") as client:
            opened = time.perf_counter() - started
            tools = (await client.list_tools()).tools
            listed = time.perf_counter() - started
    return opened, listed, len(tools)


async def run(box: _bench.Sandbox, args: argparse.Namespace) -> int:
    env = box.env()
    env["BENCH_START_DELAY_S"] = f"{args.delay:g}"
    paths = ("direct", "before", "ready")
    seen: dict[str, list[tuple[float, float, int]]] = {p: [] for p in paths}
    for _ in range(args.rounds):
        for path in paths:
            seen[path].append(await one_round(path, env))
    rows = []
    medians: dict[str, tuple[float, float, float]] = {}
    for path in paths:
        opened = _bench.median([r[0] for r in seen[path]])
        listed = _bench.median([r[1] for r in seen[path]])
        gap = _bench.median([r[1] - r[0] for r in seen[path]])
        tools = {r[2] for r in seen[path]}
        medians[path] = (opened, listed, gap)
        rows.append((path, opened, listed, gap * 1000, ",".join(map(str, sorted(tools)))))
    print(f"upstream start delay {args.delay:g} s, {args.rounds} rounds per path, medians:")
    _bench.table(["path", "initialize s", "first tools/list s", "gap ms", "tools"], rows)
    print()
    gap_ratio = medians["ready"][2] / medians["before"][2]
    list_ratio = medians["ready"][1] / medians["before"][1]
    code = _bench.judge("gap initialize → tools/list, ready ÷ before", gap_ratio,
                        GAP_RATIO_TARGET, unit="×")  # fmt: skip
    code |= _bench.judge("time to the first tools/list, ready ÷ before", list_ratio,
                         FIRST_LIST_RATIO_TARGET, unit="×")  # fmt: skip
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="spawns per path")
    parser.add_argument("--delay", type=float, default=1.0, help="the upstream's start delay, s")
    args = parser.parse_args()
    _bench.header(
        "ready at initialize: time to the first tools/list of a slow VM server",
        "./.venv/bin/python benchmarks/bench_ready.py",
    )
    box = _bench.sandbox()
    try:
        delay = {"BENCH_START_DELAY_S": f"{args.delay:g}"}  # the gateway passes its env on
        upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "env": delay, "timeout_s": 10}
        box.write_config(upstreams={"vsphere": upstream}, state_dir=box.state_dir,
                         log=box.log_path)  # fmt: skip
        return anyio.run(run, box, args)
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
