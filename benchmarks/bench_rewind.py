"""Rewind 1: planning a session's rewind over a long decision log.

Two logs, of 1,000 and of 100,000 decisions (as the guard writes them: the audit
fields, 5,000 sessions over 3,000 VMs), hold the same session of 10 changes. In
one run, each log's plan is read ``--runs`` times (the log's side of the plan: the
lines that name the session, its VMs or its VPGs, found by a byte search and then
parsed, and the selection); the figure is 100,000 ÷ 1,000 (medians). The ZVM's
side of a plan asks the same questions whatever the log's size, so it is left out.

Target: the issue's, growth no faster than the session's own size, which is the same
in both logs (≤ 2×). The search still reads every byte of the log (two passes), so
the figure grows with the log's size in bytes and this FAILS today; printed beside
it, for scale, is a parse of every line of the large log (what the search saves).
Meeting the target needs an index of the log by session and VM, kept by its writer.

    .venv/bin/python benchmarks/bench_rewind.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import _bench

from zerto_rewind.recovery.rewind_plan import Scope, read_changes, scope_needles, select

RATIO_TARGET = 2.0
SESSION = "bench-session"


def write_log(path: str, size: int) -> None:
    """``size`` decisions; the benchmark's session's 10 changes spread among them."""
    every = max(1, size // 10)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(size):
            session = SESSION if i % every == 0 else f"s-{i % 5000}"
            vm = f"vm-{i % 3:05d}" if session == SESSION else f"vm-{i % 3000:05d}"
            record = {
                "event_id": f"{i:032x}", "occurred_at": "2026-12-03T10:00:00.000Z",
                "principal_id": "unix:agent", "event_type": "tool_call.decision",
                "tool_name": "vm_reconfigure", "outcome": "allowed",
                "extensions": {"zerto_rewind": {"vpgs": [f"vpg-{vm}"]}},
                "time": "2026-12-03T10:00:00.000Z", "origin": "gateway", "session_id": session,
                "tool": "vm_reconfigure", "row": "mutating", "decision": "context", "vms": [vm],
                "vpgs": [f"vpg-{vm}"], "vpg_ids": [f"id-{vm}"], "checkpoint_ids": [str(i)],
                "tags": [f"zr {i}"], "reason": "checkpoint taken", "seq": i + 1, "prev": "0" * 64,
            }  # fmt: skip
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def plan_log_side(path: str) -> float:
    """Seconds to read and select one session's plan from the log at ``path``."""
    scope = Scope(session_id=SESSION)
    start = time.perf_counter()
    selection = select(read_changes(path, scope_needles(path, scope)), scope)
    elapsed = time.perf_counter() - start
    assert len(selection.wanted) == 3, selection
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    _bench.header("Rewind 1: a session's plan over 1,000 and 100,000 decisions",
                  "benchmarks/bench_rewind.py")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="zr-bench-rewind-") as tmp:
        small, large = os.path.join(tmp, "small.jsonl"), os.path.join(tmp, "large.jsonl")
        write_log(small, 1_000)
        write_log(large, 100_000)
        times: dict[str, list[float]] = {small: [], large: []}
        for _ in range(args.runs):  # alternated, so both see the same machine
            for path in (small, large):
                times[path].append(plan_log_side(path))
        rows = [
            (name, f"{os.path.getsize(path) / 1e6:.1f} MB", statistics.median(times[path]) * 1e3)
            for name, path in (("1,000", small), ("100,000", large))
        ]
        start = time.perf_counter()
        read_changes(large)
        rows.append(("100,000, every line parsed", "", (time.perf_counter() - start) * 1e3))
    _bench.table(("decisions", "log", "median ms"), rows)
    ratio = statistics.median(times[large]) / statistics.median(times[small])
    return _bench.judge("plan 100,000 ÷ 1,000", ratio, RATIO_TARGET, unit="×")


if __name__ == "__main__":
    raise SystemExit(main())
