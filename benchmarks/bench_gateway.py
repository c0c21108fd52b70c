"""Speed 7: the gateway — added latency, throughput, a warm confirmed decision, 50 agents → 1 tag.

One upstream, ``_gw_upstream.py`` (two instant tools, ``get_vm`` read-only and
``power_off_vm`` mutating), reached four ways in the same run:

* direct stdio: the SDK client spawns the upstream itself;
* gateway stdio: the SDK client spawns ``zerto-rewind gateway --stdio``, which
  spawns the upstream (stdio);
* direct HTTP: the upstream serving its own streamable HTTP (SDK defaults, but a call
  answered as one JSON body in both eras, as the gateway's fast lane answers it: the
  SDK's default SSE answer to a 2025-11-25 call costs about 1 ms more, which an SSE
  baseline would credit to the gateway as negative added latency);
* gateway HTTP: ``zerto-rewind gateway --listen`` (bearer token) in front of
  the same upstream over stdio.

Part 5 (``_side_by_side.py``) adds a second gateway process with ``gateway.fast_lane:
false``, so the read-only fast lane is measured on and off in the same run.

Read-only calls alternate between the four paths call by call (the order
rotates each round), so load on the machine falls on all of them alike; the
added latency is the median of the per-round differences (gateway − direct).
Throughput alternates blocks of 20 concurrent sessions on each HTTP path; the
CPU each process spent per call in those blocks (client, gateway, upstream; from
/proc) shows where the time goes, whatever else the machine is running.
The confirmed decision goes through a warm gateway (its first call paid the
token and caches); L is the tag's own landing delay from the decision log
(``landed_at`` − ``requested_at``), as in bench_confirmed.py.

    .venv/bin/python benchmarks/bench_gateway.py [--rounds 200] [--runs 6] [--agents 50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import _bench
import _side_by_side
import anyio
import anyio.to_thread
import httpx2
from _bench import cpu_seconds
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from zerto_rewind.gateway.http import token_digest

UPSTREAM = str(Path(__file__).resolve().with_name("_gw_upstream.py"))
VM, VPG = "jp-ubuntu", "jp-local"  # vCenter, 2 s journal cadence in the fast simulator
STDIO_ADDED_TARGET_MS = 2.0
HTTP_ADDED_TARGET_MS = 3.0
THROUGHPUT_TARGET = 0.8
# The read-only fast lane's targets, in both eras, side by side with the peers (part 5).
LANE_CPU_MS, LANE_ADDED_MS, LANE_THROUGHPUT = 0.5, 1.0, 0.85
CONFIRMED_TARGET_S = 0.05
SESSIONS = 20
START_TIMEOUT_S = 60.0

Call = Callable[[], Awaitable[Any]]


def tokens(n: int) -> dict[str, str]:
    return {f"agent-{i:02d}": f"bench-token-{i:02d}-0123456789" for i in range(n)}


def configure(box: _bench.Sandbox, agents: int) -> None:
    upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
    box.write_config(
        upstreams={"vsphere": upstream},
        gateway={"clients": {n: token_digest(t) for n, t in tokens(agents).items()}},
        state_dir=box.state_dir,
        log=box.log_path,
    )


def lane_off_config(box: _bench.Sandbox, tmp: str) -> str:
    """A copy of the box's config with ``gateway.fast_lane: false`` (mode 0600): a second
    gateway, every call on the full path, measured beside the first in part 5."""
    with open(box.config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    config["gateway"]["fast_lane"] = False
    path = os.path.join(tmp, "lane-off.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(config, fh)
    return path


def spawn_ready(argv: list[str], ready: str, env: dict[str, str], err: str) -> Any:
    """A child that writes a JSON ready file; (process, its JSON) once it is there."""
    with open(err, "wb") as fh:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=fh)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{argv[1]} did not start: {Path(err).read_text()[-800:]}")
        time.sleep(0.05)
    with open(ready, encoding="utf-8") as fh:
        return proc, json.load(fh)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


def stdio_params(argv: list[str], env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env)


async def checked(client: Client, tool: str) -> Any:
    result = await client.call_tool(tool, {"name": VM})
    if result.is_error:
        text = " ".join(getattr(b, "text", "") for b in result.content)
        raise RuntimeError(f"{tool} failed: {text[:300]}")
    return result


# ---------------------------------------------------------------------- 1. added latency


async def latency(paths: dict[str, Client], rounds: int) -> dict[str, list[float]]:
    """Seconds per read-only call on each path, interleaved call by call."""
    names = list(paths)
    times: dict[str, list[float]] = {n: [] for n in names}
    for n in range(rounds + 20):  # the first 20 rounds warm every path up
        order = names[n % len(names) :] + names[: n % len(names)]
        for name in order:
            started = time.perf_counter()
            await checked(paths[name], "get_vm")
            if n >= 20:
                times[name].append(time.perf_counter() - started)
    return times


def added_ms(times: dict[str, list[float]], gw: str, direct: str) -> tuple[float, float]:
    """Median of per-round differences, and difference of medians, in ms."""
    paired = [g - d for g, d in zip(times[gw], times[direct], strict=True)]
    return (
        _bench.median(paired) * 1000,
        (_bench.median(times[gw]) - _bench.median(times[direct])) * 1000,
    )


# ---------------------------------------------------------------------- 2. throughput


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


class CpuPerCall:
    """CPU per call, by process role, summed over the blocks of one path."""

    def __init__(self, roles: dict[str, list[int]]) -> None:
        self.roles = roles
        self.spent = dict.fromkeys(["client", *roles], 0.0)
        self.calls = 0

    async def timed(self, sessions: list[Client], calls_each: int) -> float:
        before = {role: cpu_seconds(pids) for role, pids in self.roles.items()}
        client_before = time.process_time()
        rate = await block(sessions, calls_each)
        self.spent["client"] += time.process_time() - client_before
        for role, pids in self.roles.items():
            self.spent[role] += cpu_seconds(pids) - before[role]
        self.calls += len(sessions) * calls_each
        return rate

    def ms(self, role: str) -> str:
        if role not in self.spent or not self.calls:
            return "-"
        return f"{self.spent[role] / self.calls * 1000:.2f}"


async def block(sessions: list[Client], calls_each: int) -> float:
    """Calls per second with every session calling at once, ``calls_each`` calls each."""

    async def work(client: Client) -> None:
        for _ in range(calls_each):
            await checked(client, "get_vm")

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for client in sessions:
            tg.start_soon(work, client)
    return len(sessions) * calls_each / (time.perf_counter() - started)


async def throughput(
    direct_url: str,
    gw_url: str,
    token_list: list[str],
    blocks: int,
    calls_each: int,
    cpu: dict[str, CpuPerCall],
) -> tuple[list[float], list[float]]:
    async with AsyncExitStack() as stack:
        direct = [
            await stack.enter_async_context(http_session(direct_url, None)) for _ in range(SESSIONS)
        ]
        gateway = [
            await stack.enter_async_context(http_session(gw_url, token_list[i % len(token_list)]))
            for i in range(SESSIONS)
        ]
        await block(direct, 2)
        await block(gateway, 2)
        d_rates, g_rates = [], []
        for n in range(blocks):
            first, second = (direct, gateway) if n % 2 == 0 else (gateway, direct)
            a = await cpu["direct" if n % 2 == 0 else "gateway"].timed(first, calls_each)
            b = await cpu["gateway" if n % 2 == 0 else "direct"].timed(second, calls_each)
            d, g = (a, b) if n % 2 == 0 else (b, a)
            d_rates.append(d)
            g_rates.append(g)
    return d_rates, g_rates


# ---------------------------------------------------------------------- 3. confirmed


async def confirmed(
    box: _bench.Sandbox, gateways: dict[str, Client], runs: int
) -> tuple[list[list[object]], list[float]]:
    rows: list[list[object]] = []
    overheads: list[float] = []
    for client in gateways.values():  # warm: token, VM and entity caches, cadence
        await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
        await checked(client, "power_off_vm")
    for n in range(runs):
        for name, client in gateways.items():
            await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
            before = _bench.zvm_requests(box)
            sent = time.time()
            started = time.perf_counter()
            result = await checked(client, "power_off_vm")
            wall = time.perf_counter() - started
            used = sum(_bench.diff(_bench.zvm_requests(box), before).values())
            if not (result.meta or {}).get("zerto-rewind/checkpoints"):
                raise RuntimeError(f"{name}: the result names no checkpoint")
            # the decision line, not the result line written after the call returned
            record = box.decision_records()[-1]
            if record["row"] != "confirmed":
                raise RuntimeError(f"{name}: expected confirmed, logged {record['row']}")
            requested = _bench.epoch(record["requested_at"])
            landed = _bench.epoch(record["landed_at"])
            lag = landed - requested
            overheads.append(wall - lag)
            rows.append([name, n + 1, lag, wall, wall - lag, requested - sent,
                         sent + wall - landed, used])  # fmt: skip
    return rows, overheads


# ---------------------------------------------------------------------- 4. 50 agents


async def agents_at_once(
    box: _bench.Sandbox, gw_url: str, token_list: list[str], agents: int
) -> tuple[int, int, float]:
    """``agents`` sessions (one token each) call power_off_vm on one VPG at once."""
    results: list[bool] = []
    async with AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(http_session(gw_url, token_list[i % len(token_list)]))
            for i in range(agents)
        ]
        await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
        tags_before = await anyio.to_thread.run_sync(box.tag_requests, VPG)
        go = anyio.Event()

        async def agent(client: Client) -> None:
            await go.wait()
            result = await client.call_tool("power_off_vm", {"name": VM})
            results.append(not result.is_error)

        started = time.perf_counter()
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for client in sessions:
                    tg.start_soon(agent, client)
                await anyio.sleep(0.1)
                started = time.perf_counter()
                go.set()
        wall = time.perf_counter() - started
        tags = await anyio.to_thread.run_sync(box.tag_requests, VPG) - tags_before
    return tags, sum(results), wall


# ---------------------------------------------------------------------- main


async def run(box: _bench.Sandbox, args: argparse.Namespace, tmp: str) -> int:
    token_map = tokens(args.agents)
    token_list = list(token_map.values())
    env = box.env()
    gw_argv = [sys.executable, "-m", "zerto_rewind", "gateway", "--allow-privileged-upstream"]
    gw_http, gw_info = spawn_ready(
        [*gw_argv, "--listen", "127.0.0.1:0", "--ready-file", f"{tmp}/gw.json"],
        f"{tmp}/gw.json", env, f"{tmp}/gw.err",
    )  # fmt: skip
    up_http, up_info = spawn_ready(
        [sys.executable, UPSTREAM, "http-json", f"{tmp}/up.json"], f"{tmp}/up.json", env,
        f"{tmp}/up.err",
    )  # fmt: skip
    gw_off, off_info = spawn_ready(
        [*gw_argv, "--config", lane_off_config(box, tmp), "--listen", "127.0.0.1:0",
         "--ready-file", f"{tmp}/off.json"], f"{tmp}/off.json", env, f"{tmp}/off.err",
    )  # fmt: skip
    gw_url, direct_url = gw_info["mcp"]["vsphere"], up_info["url"]
    code = 0
    try:
        async with AsyncExitStack() as stack:
            enter = stack.enter_async_context
            paths = {
                "direct stdio": await enter(
                    Client(stdio_params([sys.executable, UPSTREAM, "stdio"]), cache=None)
                ),
                "gateway stdio": await enter(
                    Client(
                        stdio_params([*gw_argv, "--stdio", "--upstream", "vsphere"], env),
                        cache=None,
                    )
                ),
                "direct HTTP": await enter(http_session(direct_url, None)),
                "gateway HTTP": await enter(http_session(gw_url, token_list[0])),
            }
            print(f"direct HTTP: the upstream's own streamable HTTP at {direct_url}")
            print(f"gateway HTTP: {gw_url} (bearer token) → the upstream over stdio\n")

            times = await latency(paths, args.rounds)
            _bench.table(
                ["path", "median ms", "p90 ms", "min ms"],
                [[name, f"{_bench.median(v) * 1000:.2f}",
                  f"{sorted(v)[int(len(v) * 0.9)] * 1000:.2f}", f"{min(v) * 1000:.2f}"]
                 for name, v in times.items()],
            )  # fmt: skip
            stdio_added, stdio_diff = added_ms(times, "gateway stdio", "direct stdio")
            http_added, http_diff = added_ms(times, "gateway HTTP", "direct HTTP")
            print(f"\n{args.rounds} interleaved rounds; added = median of per-round "
                  "(gateway − direct); difference of medians for comparison:")  # fmt: skip
            print(f"  stdio: {stdio_added:.2f} ms (medians differ by {stdio_diff:.2f} ms)")
            print(f"  HTTP:  {http_added:.2f} ms (medians differ by {http_diff:.2f} ms)\n")

            cpu = {
                "direct": CpuPerCall({"upstream": [up_http.pid]}),
                "gateway": CpuPerCall(
                    {"gateway": [gw_http.pid], "upstream": children(gw_http.pid)}
                ),
            }
            d_rates, g_rates = await throughput(
                direct_url, gw_url, token_list, args.blocks, args.calls, cpu
            )
            ratio = _bench.median(g_rates) / _bench.median(d_rates)
            _bench.table(
                ["path (HTTP)", f"calls/s, {SESSIONS} sessions (per block)", "median",
                 "CPU ms/call: client", "gateway", "upstream"],
                [[name, ", ".join(f"{r:.0f}" for r in rates), _bench.median(rates),
                  cpu[name].ms("client"), cpu[name].ms("gateway"), cpu[name].ms("upstream")]
                 for name, rates in (("direct", d_rates), ("gateway", g_rates))],
            )  # fmt: skip
            print(f"\n{args.blocks} alternating blocks per path, {SESSIONS} sessions × "
                  f"{args.calls} read-only calls each; the gateway reaches the upstream over "
                  "stdio\n")  # fmt: skip

            gateways = {
                "gateway stdio": paths["gateway stdio"],
                "gateway HTTP": paths["gateway HTTP"],
            }
            rows, overheads = await confirmed(box, gateways, args.runs)
            _bench.table(
                ["path", "run", "L s", "call s", "call - L s", "sent→request s",
                 "landed→answer s", "ZVM requests"],
                rows,
            )  # fmt: skip
            print()

            tags, allowed, wall = await agents_at_once(box, gw_url, token_list, args.agents)
            print(f"{args.agents} sessions ({args.agents} tokens) over HTTP, power_off_vm on "
                  f"{VM} at once: {tags} tag request(s) on {VPG}, {allowed}/{args.agents} "
                  f"allowed, {wall:.2f} s wall\n")  # fmt: skip

            off_url = off_info["mcp"]["vsphere"]
            ours = [("this gateway", gw_url, token_list[0], gw_http.pid),
                    ("lane off", off_url, token_list[0], gw_off.pid)]  # fmt: skip
            code |= await side_by_side(args, direct_url, up_http.pid, ours, tmp)
            code |= _bench.judge("added latency, stdio (median)", stdio_added,
                                 STDIO_ADDED_TARGET_MS, unit=" ms")  # fmt: skip
            code |= _bench.judge("added latency, HTTP (median)", http_added,
                                 HTTP_ADDED_TARGET_MS, unit=" ms")  # fmt: skip
            code |= _bench.judge(f"throughput, {SESSIONS} sessions, gateway ÷ direct (HTTP)",
                                 ratio, THROUGHPUT_TARGET, unit="×", at_most=False)  # fmt: skip
            overhead = _bench.median(overheads)
            code |= _bench.judge("confirmed through a warm gateway: median (call − L)",
                                 overhead, CONFIRMED_TARGET_S, unit=" s")  # fmt: skip
            code |= _bench.judge(f"tag requests, {args.agents} agents on one VPG (at most)",
                                 tags, 1)  # fmt: skip
            code |= _bench.judge(f"tag requests, {args.agents} agents on one VPG (at least)",
                                 tags, 1, at_most=False)  # fmt: skip
    finally:
        stop(gw_http)
        stop(gw_off)
        stop(up_http)
    return code


async def side_by_side(
    args: argparse.Namespace, direct_url: str, direct_pid: int,
    gateways: list[tuple[str, str, str, int]], tmp: str,
) -> int:  # fmt: skip
    """Part 5: this gateway (the read-only fast lane, on and off) and its peers, in both
    eras. The targets are the lane's; the lane-off rows are shown beside it, not judged."""
    paths, directs = await _side_by_side.run(
        direct_url, direct_pid, gateways, [sys.executable, UPSTREAM, "stdio"], tmp,
        rounds=args.rounds, blocks=args.blocks, calls_each=args.calls,
    )  # fmt: skip
    ours, off, peers = paths[:2], paths[2:4], paths[4:]
    for on, full in zip(ours, off, strict=True):
        # throughput as each path's ratio to the direct blocks beside it: the load moves
        print(f"{on.label}, lane on ÷ off: CPU per call "
              f"{on.cpu_s / on.calls / (full.cpu_s / full.calls):.2f}×, throughput ÷ direct "
              f"{_side_by_side.ratio(on) / _side_by_side.ratio(full):.2f}×")  # fmt: skip
    print()
    code = 0
    for p in ours:
        added = _side_by_side.added_ms(p, directs[p.era])
        cpu = p.cpu_s / p.calls * 1000
        ratio = _side_by_side.ratio(p)
        code |= _bench.judge(f"{p.label}: CPU per read-only call", cpu, LANE_CPU_MS, unit=" ms")
        code |= _bench.judge(f"{p.label}: added latency", added, LANE_ADDED_MS, unit=" ms")
        code |= _bench.judge(f"{p.label}: throughput ÷ direct", ratio, LANE_THROUGHPUT,
                             unit="×", at_most=False)  # fmt: skip
        for peer in peers:
            peer_added = _side_by_side.added_ms(peer, directs[peer.era])
            code |= _bench.judge(f"{p.label}: added ms ÷ {peer.label}'s", added / peer_added,
                                 1.0, unit="×")  # fmt: skip
            code |= _bench.judge(f"{p.label}: CPU ÷ {peer.label}'s",
                                 cpu / (peer.cpu_s / peer.calls * 1000), 1.0, unit="×")  # fmt: skip
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="read-only rounds (4 calls each)")
    parser.add_argument("--blocks", type=int, default=5, help="throughput blocks per path")
    parser.add_argument("--calls", type=int, default=20, help="calls per session per block")
    parser.add_argument("--runs", type=int, default=6, help="warm confirmed calls per transport")
    parser.add_argument("--agents", type=int, default=50)
    args = parser.parse_args()
    _bench.header(
        "gateway: added latency, throughput, warm confirmed decision, many agents",
        "./.venv/bin/python benchmarks/bench_gateway.py",
    )
    # The confirmed-call rounds tag one VPG many times a minute on purpose: they measure
    # the decision, not the flood bound (guard.max_tags_per_minute), so it is off here.
    box = _bench.sandbox(guard={"timeout_s": 20, "max_tags_per_minute": None})
    configure(box, args.agents)
    try:
        with tempfile.TemporaryDirectory(prefix="zr-bench-gw-") as tmp:
            return anyio.run(run, box, args, tmp)
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
