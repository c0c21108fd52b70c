"""The identity check's cost: a confirmed decision through the gateway, with and without.

One gateway (HTTP, bearer token) with two upstreams, both ``_gw_upstream.py`` over
stdio: ``vsphere`` has ``catalog.resolvers`` (its read-only ``get_vm_id`` answers
the moref the simulator's estate gives ``jp-ubuntu``), ``plain`` has none. The two
alternate call by call on the same VM and VPG, each after the journal's next
checkpoint, so both wait for their tag alike. Measured in the same run:

* resolver calls per confirmed decision, counted by the upstream itself (target: at most 1);
* the median call time with ÷ without (the confirmed decision as the agent sees it;
  target: at most 1.05);
* the median of (call − L), L the tag's own landing delay from the decision log, with
  and without, and the median per-pair difference (what the check adds, within noise);
* a whole read-only ``get_vm_id`` call through the gateway, median of 50: an upper bound
  on the resolver's own round trip (gateway → upstream → gateway is part of it).

    .venv/bin/python benchmarks/bench_identity.py [--runs 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import _bench
import anyio
import anyio.to_thread
from bench_gateway import UPSTREAM, http_session, spawn_ready, stop
from mcp import Client

from zerto_rewind.gateway.http import token_digest
from zerto_rewind.sim.models import stable_guid
from zerto_rewind.testing import DEMO_CATALOG, fast_sim_config

VM, VPG = "jp-ubuntu", "jp-local"
TOKEN = "bench-identity-token-0123456789"  # noqa: S105  # a loopback test token
RESOLVER_CALLS_TARGET = 1.0
WALL_RATIO_TARGET = 1.05
ESTATE = {"vpgs": [{"name": VPG, "site_kind": "vcenter",
                    "vms": [{"name": VM, "vcenter_id": "vm-42"}]}]}  # fmt: skip


def catalog() -> dict[str, Any]:
    kept = json.loads(json.dumps(DEMO_CATALOG))
    kept["read_only_tools"] = [*kept["read_only_tools"], "mcp__plain__get_*"]
    kept["tools"]["mcp__plain__power_off_vm"] = {"vm_arg": "name"}
    kept["catalog"] = {
        # The simulator's VmIdentifier is <site identifier>.<moref>: its site is the vCenter.
        "resolvers": {
            "vsphere": {
                "tool": "get_vm_id",
                "arg": "name",
                "id_path": "moid",
                "vcenter": stable_guid("site", "zvm-local"),
            }
        }
    }
    return kept


async def counts(client: Client) -> dict[str, int]:
    result = await client.call_tool("get_call_counts", {})
    if result.is_error:
        raise RuntimeError(f"get_call_counts failed: {result.content}")
    found = result.structured_content or json.loads(result.content[0].text)
    return dict(found.get("result", found))


async def one(box: _bench.Sandbox, client: Client) -> tuple[float, float]:
    """(call s, L s) of one confirmed power_off_vm on a fresh tag."""
    await anyio.to_thread.run_sync(box.wait_past_boundary, VPG)
    started = time.perf_counter()
    result = await client.call_tool("power_off_vm", {"name": VM})
    wall = time.perf_counter() - started
    if result.is_error or not (result.meta or {}).get("zerto-rewind/checkpoints"):
        raise RuntimeError(f"expected a confirmed call, got {result.content}")
    record = box.decision_records()[-1]
    if record["row"] != "confirmed":
        raise RuntimeError(f"expected confirmed, logged {record['row']}")
    return wall, _bench.epoch(record["landed_at"]) - _bench.epoch(record["requested_at"])


async def run(box: _bench.Sandbox, runs: int, tmp: str) -> int:
    env = box.env()
    gw, info = spawn_ready(
        [sys.executable, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
         "--ready-file", f"{tmp}/gw.json", "--allow-privileged-upstream"],
        f"{tmp}/gw.json", env, f"{tmp}/gw.err",
    )  # fmt: skip
    try:
        async with AsyncExitStack() as stack:
            paths = {
                name: await stack.enter_async_context(http_session(info["mcp"][name], TOKEN))
                for name in ("vsphere", "plain")
            }
            for client in paths.values():  # warm: token, VM and entity caches, cadence
                await one(box, client)
            before = await counts(paths["vsphere"])
            rows: list[list[object]] = []
            over: dict[str, list[float]] = {"vsphere": [], "plain": []}
            walls: dict[str, list[float]] = {"vsphere": [], "plain": []}
            for n in range(runs):
                order = ("vsphere", "plain") if n % 2 == 0 else ("plain", "vsphere")
                for name in order:
                    wall, lag = await one(box, paths[name])
                    over[name].append(wall - lag)
                    walls[name].append(wall)
                    rows.append([name, n + 1, lag, wall, wall - lag])
            after = await counts(paths["vsphere"])
            read_only = []
            for _ in range(50):
                started = time.perf_counter()
                await paths["vsphere"].call_tool("get_vm_id", {"name": VM})
                read_only.append(time.perf_counter() - started)
            plain = await counts(paths["plain"])
    finally:
        stop(gw)
    _bench.table(["upstream", "run", "L s", "call s", "call - L s"], rows)
    resolver_calls = (after.get("get_vm_id", 0) - before.get("get_vm_id", 0)) / runs
    with_m, without_m = _bench.median(over["vsphere"]), _bench.median(over["plain"])
    added_ms = _bench.median([a - b for a, b in zip(over["vsphere"], over["plain"], strict=True)])
    added_ms *= 1000
    print(f"\nresolver calls: {resolver_calls:.2f} per confirmed decision with the check, "
          f"{plain.get('get_vm_id', 0)} without")  # fmt: skip
    wall_ratio = _bench.median(walls["vsphere"]) / _bench.median(walls["plain"])
    print(f"confirmed decision, median call time: with ÷ without = {wall_ratio:.3f}×")
    print(f"median (call − L): with {with_m * 1000:.1f} ms, without {without_m * 1000:.1f} ms; "
          f"median per-pair difference {added_ms:.1f} ms")  # fmt: skip
    read_ms = _bench.median(read_only) * 1000
    print(f"a whole read-only get_vm_id through the gateway: median {read_ms:.2f} ms "
          "(bounds the resolver's round trip)\n")  # fmt: skip
    code = _bench.judge("resolver calls per confirmed decision (at most)", resolver_calls,
                        RESOLVER_CALLS_TARGET)  # fmt: skip
    code |= _bench.judge("confirmed decision, median call time with ÷ without", wall_ratio,
                         WALL_RATIO_TARGET, unit="×")  # fmt: skip
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="confirmed calls per upstream")
    args = parser.parse_args()
    _bench.header(
        "identity check: confirmed decision with the resolver ÷ without",
        "./.venv/bin/python benchmarks/bench_identity.py",
    )
    with tempfile.TemporaryDirectory(prefix="zr-bench-id-") as tmp:
        estate = Path(tmp) / "estate.json"
        estate.write_text(json.dumps(ESTATE), encoding="utf-8")
        box = _bench.sandbox(
            guard={"timeout_s": 20},
            catalog=catalog(),
            sim_config=fast_sim_config(estate_file=estate),
        )
        try:
            upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
            box.write_config(
                upstreams={"vsphere": upstream, "plain": upstream},
                gateway={"clients": {"bench": token_digest(TOKEN)}},
                state_dir=box.state_dir,
                log=box.log_path,
            )
            return anyio.run(run, box, args.runs, tmp)
        finally:
            box.stop()


if __name__ == "__main__":
    sys.exit(main())
