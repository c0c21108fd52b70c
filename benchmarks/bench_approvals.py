"""Speed 9: approval requests do not slow the other rows.

One gateway over HTTP (``--listen``, bearer tokens, an approvals socket), in front
of ``_gw_upstream.py``, and the same upstream's own streamable HTTP beside it. In
one run, alternating phase by phase:

* **quiet**: nothing waits for a person;
* **busy**: ``--waiting`` sessions each hold a prompt-row call (a VM unknown to
  Zerto) that waits for an approval, the gateway polling the approvals store and
  sending progress for each.

In each phase the read-only calls on the gateway and on the direct path
alternate call by call (added latency = median of per-call differences), and a
warm confirmed call is timed against its tag's own landing delay L. The targets
are the gateway's own (bench_gateway.py): added read-only latency over HTTP
≤ 3 ms and a warm confirmed call ≤ L + 0.05 s, *while approvals wait*; the
busy ÷ quiet ratios show what the waiting calls cost.

    .venv/bin/python benchmarks/bench_approvals.py [--rounds 150] [--waiting 20] [--runs 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import AsyncExitStack

import _bench
import anyio
import anyio.to_thread
from bench_gateway import (
    HTTP_ADDED_TARGET_MS,
    UPSTREAM,
    VPG,
    checked,
    http_session,
    spawn_ready,
    stop,
    tokens,
)
from mcp import Client

from zerto_rewind.gateway.http import token_digest

CONFIRMED_TARGET_S = 0.05


def configure(box: _bench.Sandbox, agents: int, tmp: str) -> None:
    upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
    box.write_config(
        upstreams={"vsphere": upstream},
        gateway={"clients": {n: token_digest(t) for n, t in tokens(agents).items()}},
        approvals={"approvers": {"users": ["nobody-approves-in-this-run"]}, "wait_s": 600},
        state_dir=box.state_dir,
        log=box.log_path,
    )


async def read_only(gateway: Client, direct: Client, rounds: int) -> tuple[list[float], float]:
    """(per-call gateway − direct, s), and the gateway's median, interleaved call by call."""
    added: list[float] = []
    gateway_times: list[float] = []
    for n in range(rounds + 10):
        pair = [(gateway, True), (direct, False)] if n % 2 else [(direct, False), (gateway, True)]
        took: dict[bool, float] = {}
        for client, is_gateway in pair:
            started = time.perf_counter()
            await checked(client, "get_vm")
            took[is_gateway] = time.perf_counter() - started
        if n >= 10:
            added.append(took[True] - took[False])
            gateway_times.append(took[True])
    return added, _bench.median(gateway_times)


async def confirmed_overhead(box: _bench.Sandbox, gateway: Client, runs: int) -> float:
    """Median (call − L) of warm confirmed calls through the gateway."""
    overheads = []
    for _ in range(runs):
        await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
        started = time.perf_counter()
        result = await checked(gateway, "power_off_vm")
        wall = time.perf_counter() - started
        if not (result.meta or {}).get("zerto-rewind/checkpoints"):
            raise RuntimeError("the confirmed call names no checkpoint")
        # the decision line, not the result line written after the call returned
        record = box.decision_records()[-1]
        lag = _bench.epoch(record["landed_at"]) - _bench.epoch(record["requested_at"])
        overheads.append(wall - lag)
    return _bench.median(overheads)


async def run(box: _bench.Sandbox, args: argparse.Namespace, tmp: str) -> int:
    token_list = list(tokens(args.waiting + 1).values())
    argv = [sys.executable, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
            "--ready-file", f"{tmp}/gw.json",
            "--approvals-socket", f"{tmp}/approvals.sock",
            "--allow-privileged-upstream"]  # fmt: skip
    gw_proc, gw_info = spawn_ready(argv, f"{tmp}/gw.json", box.env(), f"{tmp}/gw.err")
    up_proc, up_info = spawn_ready(
        [sys.executable, UPSTREAM, "http", f"{tmp}/up.json"], f"{tmp}/up.json", box.env(),
        f"{tmp}/up.err",
    )  # fmt: skip
    code = 0
    added_by: dict[str, list[float]] = {"quiet": [], "busy": []}
    median_by: dict[str, list[float]] = {"quiet": [], "busy": []}
    confirmed_by: dict[str, list[float]] = {"quiet": [], "busy": []}
    try:
        async with AsyncExitStack() as stack:
            gateway = await stack.enter_async_context(
                http_session(gw_info["mcp"]["vsphere"], token_list[0])
            )
            direct = await stack.enter_async_context(http_session(up_info["url"], None))
            waiters = [
                await stack.enter_async_context(http_session(gw_info["mcp"]["vsphere"], tok))
                for tok in token_list[1:]
            ]
            await checked(gateway, "power_off_vm")  # warm: token, caches, cadence
            for phase in ("quiet", "busy", "quiet", "busy"):
                async with anyio.create_task_group() as tg:
                    if phase == "busy":
                        for i, client in enumerate(waiters):
                            # a VM unknown to Zerto: a prompt row that waits for a person
                            ghost = {"name": f"ghost-{i}"}
                            tg.start_soon(client.call_tool, "power_off_vm", ghost)
                        await _until_waiting(box, len(waiters))
                    added, median_s = await read_only(gateway, direct, args.rounds)
                    overhead = await confirmed_overhead(box, gateway, args.runs)
                    tg.cancel_scope.cancel()
                added_by[phase] += added
                median_by[phase].append(median_s)
                confirmed_by[phase].append(overhead)
                print(f"  {phase:5}: read-only added {_bench.median(added) * 1000:.2f} ms, "
                      f"gateway median {median_s * 1000:.2f} ms, confirmed − L "
                      f"{overhead:.3f} s")  # fmt: skip
    finally:
        stop(gw_proc)
        stop(up_proc)
    busy_added = _bench.median(added_by["busy"]) * 1000
    quiet_added = _bench.median(added_by["quiet"]) * 1000
    busy_conf = _bench.median(confirmed_by["busy"])
    quiet_conf = _bench.median(confirmed_by["quiet"])
    ratio = _bench.median(median_by["busy"]) / _bench.median(median_by["quiet"])
    print()
    _bench.table(
        ["phase", "read-only added ms", "confirmed − L s"],
        [["quiet", f"{quiet_added:.2f}", f"{quiet_conf:.3f}"],
         [f"busy ({args.waiting} waiting)", f"{busy_added:.2f}", f"{busy_conf:.3f}"]],
    )  # fmt: skip
    print(f"\nread-only through the gateway, busy ÷ quiet (medians): {ratio:.2f}×\n")
    code |= _bench.judge(f"added read-only latency, HTTP, {args.waiting} approvals waiting",
                         busy_added, HTTP_ADDED_TARGET_MS, unit=" ms")  # fmt: skip
    code |= _bench.judge(f"confirmed − L, {args.waiting} approvals waiting", busy_conf,
                         CONFIRMED_TARGET_S, unit=" s")  # fmt: skip
    return code


async def _until_waiting(box: _bench.Sandbox, count: int) -> None:
    """Until ``count`` approval requests are open (each waiting call opened one)."""
    from zerto_rewind.core.approvals import FileApprovalStore

    store = FileApprovalStore(box.state_dir)
    with anyio.fail_after(60):
        while len(await anyio.to_thread.run_sync(store.pending)) < count:
            await anyio.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150, help="read-only pairs per phase")
    parser.add_argument("--waiting", type=int, default=20, help="calls waiting for approval")
    parser.add_argument("--runs", type=int, default=4, help="confirmed calls per phase")
    args = parser.parse_args()
    _bench.header(
        "approvals: read-only and confirmed rows while approval requests wait",
        "./.venv/bin/python benchmarks/bench_approvals.py",
    )
    box = _bench.sandbox(guard={"timeout_s": 20})
    try:
        with tempfile.TemporaryDirectory(prefix="zr-bench-appr-") as tmp:
            configure(box, args.waiting + 1, tmp)
            return anyio.run(run, box, args, tmp)
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
