"""Rewind 1: planning a session's rewind over a long decision log.

Logs of 1,000 and of 100,000 decisions (as the guard writes them: the audit
fields, 5,000 sessions over 3,000 VMs) hold the same session of 10 changes to 3
VMs, in two shapes:

- ``same plan``: other sessions change those 3 VMs once in either log, so both
  logs give the same plan (10 changes of its own, 1 by another session);
- ``busy VMs``: other sessions keep changing those VMs (twice in the small log,
  about 100 times in the large one), and the plan must read and name all of them,
  so the plan itself is about 9 times larger over the large log.

In one run, interleaved, each log's plan is read ``--runs`` times (the log's side
of the plan: the lines naming the session, then its VMs and VPGs, and the
selection); the figures are 100,000 ÷ 1,000 (medians). The ZVM's side of a plan
asks the same questions whatever the log's size, so it is left out.

Measured through the log's index (:mod:`zerto_rewind.core.log_index`, built by a
first plan before the timed runs, as the first plan or ``session show`` after an
upgrade builds it), which is what a plan reads when the state's MAC key exists,
and for comparison the byte search of the whole log that it falls back to
(another user, no key). The index's build is printed once per log. Judged:

- the issue's target, growth no faster than the session's own size, on the
  ``same plan`` logs, through the index: ≤ 2×;
- on the ``busy VMs`` logs, through the index, the cost per change the plan reads:
  ≤ 2× (the whole time's ratio is printed too; it follows the plan's own growth).

    .venv/bin/python benchmarks/bench_rewind.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import _bench

from zerto_rewind.core.keys import load_or_create_key
from zerto_rewind.core.log_index import index_path
from zerto_rewind.core.record_mac import RecordMac, state_key_path
from zerto_rewind.recovery.rewind_plan import Scope, plan_changes, read_changes, select

RATIO_TARGET = 2.0
SESSION = "bench-session"
SIZES = {"1,000": 1_000, "100,000": 100_000}
SAME, BUSY = "same plan", "busy VMs"
INDEXED = "through the log index"
STREAMED = "whole log searched (fallback)"
SCOPE = Scope(session_id=SESSION)

Log = tuple[str, str]  # (shape, size)


def write_log(path: str, size: int, shape: str) -> None:
    """``size`` decisions; the benchmark's session's 10 changes spread among them."""
    every = max(1, size // 10)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(size):
            session = SESSION if i % every == 0 else f"s-{i % 5000}"
            if session == SESSION:
                vm = f"vm-{i % 3:05d}"
            elif shape == BUSY:
                vm = f"vm-{i % 3000:05d}"
            else:  # the session's VMs left alone, but for one later change
                vm = "vm-00000" if i == every // 2 else f"vm-{3 + i % 2997:05d}"
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


def plan_log_side(path: str, mac: RecordMac | None) -> float:
    """Seconds to read and select one session's plan from the log at ``path``."""
    start = time.perf_counter()
    selection = select(plan_changes(path, SCOPE, mac=mac), SCOPE)
    elapsed = time.perf_counter() - start
    assert len(selection.wanted) == 3, selection
    return elapsed


def measure(paths: dict[Log, str], runs: int, mac: RecordMac) -> dict[tuple[str, Log], float]:
    readers: dict[str, Callable[[str], float]] = {
        INDEXED: lambda p: plan_log_side(p, mac),
        STREAMED: lambda p: plan_log_side(p, None),
    }
    times: dict[tuple[str, Log], list[float]] = {}
    for run in range(runs):  # interleaved, so all see the same machine
        for name, fn in readers.items():
            for log in paths if run % 2 else reversed(paths):
                times.setdefault((name, log), []).append(fn(paths[log]))
    return {key: statistics.median(values) for key, values in times.items()}


def build_index(paths: dict[Log, str], mac: RecordMac) -> dict[Log, int]:
    """Builds each log's index (timed); the lines each plan reads, checked equal both ways."""
    rows, read = [], {}
    for log, path in paths.items():
        start = time.perf_counter()
        indexed = plan_changes(path, SCOPE, mac=mac)
        built = time.perf_counter() - start
        assert os.path.isfile(index_path(path)), "the index was not built"
        assert indexed == plan_changes(path, SCOPE), "the index read another plan"
        read[log] = len(indexed)
        rows.append((*log, built * 1e3, os.path.getsize(index_path(path)), len(indexed)))
    _bench.table(("shape", "log", "index built ms", "index bytes", "changes the plan reads"), rows)
    print()
    return read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    _bench.header("Rewind 1: a session's plan over 1,000 and 100,000 decisions",
                  f"./.venv/bin/python benchmarks/bench_rewind.py --runs {args.runs}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="zr-bench-rewind-") as tmp:
        mac = RecordMac(key=load_or_create_key(state_key_path(os.path.join(tmp, "state"))))
        paths = {(shape, size): os.path.join(tmp, f"{shape}-{n}.jsonl".replace(" ", "-"))
                 for shape in (SAME, BUSY) for size, n in SIZES.items()}  # fmt: skip
        for (shape, size), path in paths.items():
            write_log(path, SIZES[size], shape)
        print(f"logs: 1,000 lines {os.path.getsize(paths[SAME, '1,000']) / 1e6:.1f} MB, "
              f"100,000 lines {os.path.getsize(paths[SAME, '100,000']) / 1e6:.1f} MB")  # fmt: skip
        read = build_index(paths, mac)
        medians = measure(paths, args.runs, mac)
        start = time.perf_counter()
        read_changes(paths[BUSY, "100,000"])
        parsed = (time.perf_counter() - start) * 1e3
    return report(medians, read, parsed)


def report(medians: dict[tuple[str, Log], float], read: dict[Log, int], parsed: float) -> int:
    rows: list[tuple[object, ...]] = []
    for shape in (SAME, BUSY):
        for name in (INDEXED, STREAMED):
            small, large = medians[name, (shape, "1,000")], medians[name, (shape, "100,000")]
            rows.append((shape, name, small * 1e3, large * 1e3, large / small))
    rows.append(("", "every line of the 100,000 parsed (scale)", "", parsed, ""))
    _bench.table(("shape", "plan, log side", "1,000 ms", "100,000 ms", "ratio"), rows)
    print()
    same = medians[INDEXED, (SAME, "100,000")] / medians[INDEXED, (SAME, "1,000")]
    failed = _bench.judge(f"{SAME}, {INDEXED}, 100,000 ÷ 1,000 (the issue's target)", same,
                          RATIO_TARGET, unit="×")  # fmt: skip
    busy = medians[INDEXED, (BUSY, "100,000")] / medians[INDEXED, (BUSY, "1,000")]
    grown = read[BUSY, "100,000"] / read[BUSY, "1,000"]
    print(f"{BUSY}, {INDEXED}: 100,000 ÷ 1,000 = {busy:.3f}× for a plan {grown:.1f}× larger")
    failed |= _bench.judge(f"{BUSY}, {INDEXED}, per change the plan reads", busy / grown,
                           RATIO_TARGET, unit="×")  # fmt: skip
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
