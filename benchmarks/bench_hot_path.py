"""Rewind 2: planning leaves the guard's hot path alone.

The hook's read-only decision and its confirmed decision (a tag asked for and
seen landing in the simulator's journal), each timed as the host runs the hook,
with no decision log and with a 100,000-line log that a rewind plan has been read
from (so its index lies beside it, as after ``rewind --dry-run``). Interleaved in
one run, one simulator and one state directory for both; medians.

A decision must not read the log: the read-only one writes nothing, the confirmed
one appends one line after reading the last (its chain). So each ratio (with the
100,000-line log ÷ without) is to stay about 1, judged ≤ 1.25× (the spread of
process start-up on a busy machine). For the confirmed decision the judged figure
is the hook's time less L, the tag's landing after it was asked (the log's
``landed_at`` - ``requested_at``), which is the simulator's journal cadence and
not the guard's work; the whole wall time's ratio is printed beside it.

    .venv/bin/python benchmarks/bench_hot_path.py [--runs 6]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import _bench
from bench_rewind import BUSY, SCOPE, write_log

from zerto_rewind.core.keys import load_or_create_key
from zerto_rewind.core.log_index import index_path
from zerto_rewind.core.record_mac import RecordMac, state_key_path
from zerto_rewind.recovery.rewind_plan import plan_changes
from zerto_rewind.testing.sandbox import FAST_CADENCES, fast_sim_config

RATIO_TARGET = 1.25
LINES = 100_000
VM, VPG = "jp-ubuntu", "jp-local"
NONE, LARGE = "no log", f"{LINES:,}-line log, indexed"
READ_ONLY, CONFIRMED = "read-only", "confirmed (hook - L)"
WALL = "confirmed (hook wall)"


def read_only(box: _bench.Sandbox, env: dict[str, str]) -> float:
    run = box.run_hook(_bench.READ_ONLY, {"name": VM}, env=env)
    if run.decision != "none":
        raise RuntimeError(
            f"read-only: expected no decision, got {run.decision}: {run.reason} {run.stderr}"
        )
    return run.elapsed_s


def confirmed(box: _bench.Sandbox, env: dict[str, str], log: str, n: int) -> tuple[float, float]:
    """(hook wall seconds, L) of one confirmed decision."""
    box.wait_past_boundary(VPG)
    run = box.run_hook(_bench.POWER_OFF, {"name": VM}, env=env, tool_use_id=f"toolu_{n}")
    if run.decision != "context":
        raise RuntimeError(
            f"confirmed: expected a rewind point, got {run.decision}: {run.reason} {run.stderr}"
        )
    with open(log, "rb") as fh:
        fh.seek(max(0, os.path.getsize(log) - 65536))
        record: dict[str, Any] = json.loads(fh.read().splitlines()[-1])
    lag = _bench.epoch(record["landed_at"]) - _bench.epoch(record["requested_at"])
    return run.elapsed_s, lag


def prepare(box: _bench.Sandbox) -> dict[str, str]:
    """The two logs' paths: none yet, and 100,000 lines with the index a plan left."""
    large = os.path.join(box.root, "large.jsonl")
    write_log(large, LINES, BUSY)
    mac = RecordMac(key=load_or_create_key(state_key_path(box.state_dir)))
    assert plan_changes(large, SCOPE, mac=mac), "the plan read nothing"
    assert os.path.isfile(index_path(large)), "the plan left no index"
    return {NONE: os.path.join(box.root, "none.jsonl"), LARGE: large}


def measure(box: _bench.Sandbox, runs: int) -> dict[tuple[str, str], list[float]]:
    logs = prepare(box)
    times: dict[tuple[str, str], list[float]] = {}
    for n in range(runs + 1):  # the first round fills the caches (token, page cache)
        for name in logs if n % 2 else reversed(logs):
            path = logs[name]
            if name == NONE and os.path.exists(path):
                os.unlink(path)  # without a log, every time
            env = box.env(ZERTO_HOOK_LOG=path)
            seen = {READ_ONLY: read_only(box, env)}
            wall, lag = confirmed(box, env, path, n)
            seen.update({CONFIRMED: wall - lag, WALL: wall})
            if n:
                for what, value in seen.items():
                    times.setdefault((what, name), []).append(value)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    _bench.header(
        "Rewind 2: decisions with and without a 100,000-line, indexed log",
        f"./.venv/bin/python benchmarks/bench_hot_path.py --runs {args.runs}",
    )
    config = fast_sim_config(cadences=dict(FAST_CADENCES), tag_lag_s=0.05)
    box = _bench.sandbox(sim_config=config, guard={"timeout_s": 20, "max_tags_per_minute": 600})
    try:
        times = measure(box, args.runs)
    finally:
        box.stop()
    rows, failed = [], 0
    for what in (READ_ONLY, CONFIRMED, WALL):
        without, with_log = _bench.median(times[what, NONE]), _bench.median(times[what, LARGE])
        rows.append((what, without * 1e3, with_log * 1e3, with_log / without))
    _bench.table(("decision", f"{NONE} ms", f"{LARGE} ms", "ratio"), rows)
    print(f"\nruns: {args.runs} of each, after one to warm up")
    for what, _without, _with, ratio in rows[:2]:
        failed |= _bench.judge(f"{what}, {LARGE} ÷ {NONE}", ratio, RATIO_TARGET, unit="×")
    return failed


if __name__ == "__main__":
    sys.exit(main())
