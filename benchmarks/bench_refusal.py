"""Speed 3: a VPG that cannot take a tag is refused in well under a second, warm caches.

.venv/bin/python benchmarks/bench_refusal.py [--runs 15]
"""

from __future__ import annotations

import argparse
import sys

import _bench

TARGET_S = 1.0
# paused-vpg: replication paused by a user; syncing-vpg: still in initial sync.
CASES = [("sql-paused-1", "paused-vpg"), ("new-vm-1", "syncing-vpg")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    _bench.header(
        "refusal: VPG cannot take a tag", "./.venv/bin/python benchmarks/bench_refusal.py"
    )
    box = _bench.sandbox(guard={"timeout_s": 20})
    try:
        rows, warm = [], []
        for vm, vpg in CASES:
            times = []
            for n in range(args.runs + 1):  # the first run fills the caches
                before = _bench.zvm_requests(box)
                run = box.run_hook(_bench.POWER_OFF, {"name": vm}, tool_use_id=f"toolu_{n}")
                used = sum(_bench.diff(_bench.zvm_requests(box), before).values())
                if run.decision != "deny" or box.decision_records()[-1]["row"] != "failed":
                    raise RuntimeError(f"{vm}: expected a refusal, got {run.decision}")
                if n == 0:
                    rows.append([vpg, "cold", run.elapsed_s, used, box.tag_requests(vpg)])
                else:
                    times.append(run.elapsed_s)
            warm += times
            rows.append([vpg, f"warm, median of {len(times)}", _bench.median(times), used,
                         box.tag_requests(vpg)])  # fmt: skip
        _bench.table(["VPG", "caches", "hook s", "ZVM requests (last)", "tags requested"], rows)
        print()
        return _bench.judge("median warm refusal", _bench.median(warm), TARGET_S, unit=" s")
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
