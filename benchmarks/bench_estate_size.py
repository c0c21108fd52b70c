"""Speed 4: a decision on a 10,000-VM estate costs no more than on a 10-VM one (ratio ≤ 1.1).

Two simulators run side by side (``--vms 10`` and ``--vms 10000``); decisions on
``vm-00005`` alternate between them, each right after its VPG's journal
checkpoint. The VM → VPG cache is emptied before every decision, so each one
looks the VM up (``GET /v1/vms?vmName=``: one filtered request, never a listing
of the estate).

    .venv/bin/python benchmarks/bench_estate_size.py [--runs 5]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import _bench

from zerto_rewind.testing import fast_sim_config

TARGET = 1.1
VM, VPG = "vm-00005", "vpg-00005"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    command = "./.venv/bin/python benchmarks/bench_estate_size.py"
    _bench.header("estate size: 10 vs 10,000 VMs", command)
    boxes = {
        size: _bench.sandbox(sim_config=fast_sim_config(vms=size), guard={"timeout_s": 20})
        for size in (10, 10_000)
    }
    try:
        return measure(boxes, args.runs)
    finally:
        for box in boxes.values():
            box.stop()


def measure(boxes: dict[int, _bench.Sandbox], runs: int) -> int:
    times: dict[int, list[float]] = {size: [] for size in boxes}
    overheads: dict[int, list[float]] = {size: [] for size in boxes}
    lookups: dict[int, int] = dict.fromkeys(boxes, 0)
    for n in range(runs + 1):  # round 0 fills the token and entity-type caches
        for size, box in boxes.items():
            for path in glob.glob(os.path.join(box.state_dir, "cache", "vms-*.json")):
                os.unlink(path)
            box.wait_past_boundary(VPG)
            before = _bench.zvm_requests(box)
            run = box.run_hook(_bench.POWER_OFF, {"name": VM}, tool_use_id=f"toolu_{n}")
            if run.decision != "context":
                raise RuntimeError(f"{size} VMs: expected a confirmed decision, got {run.decision}")
            used = _bench.diff(_bench.zvm_requests(box), before)
            record = box.decision_records()[-1]
            lag = _bench.epoch(record["landed_at"]) - _bench.epoch(record["requested_at"])
            if n > 0:
                times[size].append(run.elapsed_s)
                overheads[size].append(run.elapsed_s - lag)
                lookups[size] = max(lookups[size], used.get("GET vms.list", 0))
    rows = [
        [f"{size:,} VMs", _bench.median(times[size]), _bench.median(overheads[size]), lookups[size]]
        for size in boxes
    ]
    _bench.table(["estate", "median decision s", "median (decision - L) s", "VM lookups"], rows)
    small, large = (_bench.median(times[size]) for size in boxes)
    over_small, over_large = (_bench.median(overheads[size]) for size in boxes)
    print(f"\n(decision - L) ratio, for information: {over_large / over_small:.3f}")
    return _bench.judge("decision time ratio 10,000 / 10 VMs", large / small, TARGET, unit="×")


if __name__ == "__main__":
    sys.exit(main())
