"""Speed 10: the MACs on the state's records do not slow the other rows.

Two gateways over HTTP in front of the same stand-in upstream and simulator, each
with its own state directory, both started through ``_gw_no_mac.py``: one as
shipped (every approval request, tag record and cached lookup sealed and checked
with HMAC-SHA256), and one whose MAC the launcher replaces with a pass-through in
its own process (the product has no switch to turn MACs off). In one run, read-only calls
alternate call by call between the two, and warm confirmed calls alternate run by
run; the figures are with ÷ without (medians), target ≤ 1.05×. Also printed: the
in-process cost of sealing and checking one VPG record.

    .venv/bin/python benchmarks/bench_mac.py [--rounds 200] [--runs 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import asdict
from pathlib import Path

import _bench
import anyio
import anyio.to_thread
from bench_gateway import VPG, checked, http_session, spawn_ready, stop, tokens
from mcp import Client

from zerto_rewind.core.record_mac import RecordMac
from zerto_rewind.core.state import TagRecord, VpgRecord
from zerto_rewind.gateway.http import token_digest

RATIO_TARGET = 1.05
NO_MAC = str(Path(__file__).resolve().with_name("_gw_no_mac.py"))
UPSTREAM = str(Path(__file__).resolve().with_name("_gw_upstream.py"))


def configure(box: _bench.Sandbox) -> None:
    upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
    box.write_config(
        upstreams={"vsphere": upstream},
        gateway={"clients": {n: token_digest(t) for n, t in tokens(1).items()}},
        state_dir=box.state_dir,
        log=box.log_path,
    )


async def read_only(gateways: dict[str, Client], rounds: int) -> dict[str, float]:
    """Median read-only call time per gateway, interleaved call by call (order alternating)."""
    times: dict[str, list[float]] = {name: [] for name in gateways}
    names = list(gateways)
    for n in range(rounds + 10):
        for name in names if n % 2 else reversed(names):
            started = time.perf_counter()
            await checked(gateways[name], "get_vm")
            if n >= 10:
                times[name].append(time.perf_counter() - started)
    return {name: _bench.median(values) for name, values in times.items()}


async def confirmed(
    box: _bench.Sandbox, gateways: dict[str, Client], runs: int
) -> dict[str, float]:
    """Median (call − L) of warm confirmed calls per gateway, alternating run by run."""
    overheads: dict[str, list[float]] = {name: [] for name in gateways}
    names = list(gateways)
    for n in range(runs):
        for name in names if n % 2 else reversed(names):
            await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
            started = time.perf_counter()
            result = await checked(gateways[name], "power_off_vm")
            wall = time.perf_counter() - started
            if not (result.meta or {}).get("zerto-rewind/checkpoints"):
                raise RuntimeError(f"{name}: the confirmed call names no checkpoint")
            # the decision line, not the result line written after the call returned
            record = box.decision_records()[-1]
            lag = _bench.epoch(record["landed_at"]) - _bench.epoch(record["requested_at"])
            overheads[name].append(wall - lag)
    return {name: _bench.median(values) for name, values in overheads.items()}


def seal_and_open_us(count: int = 20_000) -> float:
    """Microseconds to seal and check one VPG record with a landed tag and a full history."""
    mac = RecordMac(os.urandom(32))
    record = VpgRecord("vpg-1", "jp-local", TagRecord("zerto-rewind t", 1.0, 2.0, 3.0))
    record.history = [{"name": f"t{i}", "state": "landed", "landed_at": 1.5 * i} for i in range(20)]
    raw = asdict(record)
    started = time.perf_counter()
    for _ in range(count):
        if mac.open("vpg", "vpg-1", mac.seal("vpg", "vpg-1", raw)) is None:
            raise RuntimeError("a sealed record did not verify")
    return (time.perf_counter() - started) / count * 1e6


async def run(box: _bench.Sandbox, args: argparse.Namespace, tmp: str) -> int:
    token = next(iter(tokens(1).values()))
    procs = []
    urls: dict[str, str] = {}
    for name, launcher in (("with MACs", [NO_MAC, "with"]), ("without", [NO_MAC, "without"])):
        ready = f"{tmp}/{len(urls)}.json"
        env = {**box.env(), "ZERTO_REWIND_STATE_DIR": f"{tmp}/state-{len(urls)}"}
        argv = [sys.executable, *launcher, "gateway", "--listen", "127.0.0.1:0",
                "--ready-file", ready, "--allow-privileged-upstream"]  # fmt: skip
        proc, info = spawn_ready(argv, ready, env, f"{tmp}/{len(urls)}.err")
        procs.append(proc)
        urls[name] = info["mcp"]["vsphere"]
    try:
        async with AsyncExitStack() as stack:
            gateways = {
                name: await stack.enter_async_context(http_session(url, token))
                for name, url in urls.items()
            }
            for client in gateways.values():  # warm: token, VM and entity caches, cadence
                await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
                await checked(client, "power_off_vm")
            read = await read_only(gateways, args.rounds)
            conf = await confirmed(box, gateways, args.runs)
    finally:
        for proc in procs:
            stop(proc)
    _bench.table(
        ["gateway", "read-only median ms", "confirmed − L s"],
        [[name, f"{read[name] * 1000:.2f}", f"{conf[name]:.3f}"] for name in urls],
    )
    read_ratio = read["with MACs"] / read["without"]
    conf_ratio = conf["with MACs"] / conf["without"]
    print(f"\nseal + check of one VPG record, in process: {seal_and_open_us():.1f} µs\n")
    code = _bench.judge("read-only through the gateway, with ÷ without MACs", read_ratio,
                        RATIO_TARGET, unit="×")  # fmt: skip
    code |= _bench.judge("confirmed − L, with ÷ without MACs", conf_ratio, RATIO_TARGET,
                         unit="×")  # fmt: skip
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="read-only calls per gateway")
    parser.add_argument("--runs", type=int, default=6, help="confirmed calls per gateway")
    args = parser.parse_args()
    _bench.header(
        "MACs: read-only and confirmed rows with and without the state's record MACs",
        "./.venv/bin/python benchmarks/bench_mac.py",
    )
    # No tag bound: each gateway makes a tag per confirmed run, faster than 6 a minute.
    box = _bench.sandbox(guard={"timeout_s": 20, "max_tags_per_minute": None})
    try:
        with tempfile.TemporaryDirectory(prefix="zr-bench-mac-") as tmp:
            configure(box)
            return anyio.run(run, box, args, tmp)
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
