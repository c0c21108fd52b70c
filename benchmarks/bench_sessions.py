"""Speed 17: ``session show`` and the session list over a 100,000-decision log vs 1,000.

Two decision logs of the guard's line shape (written straight to the file, not
through ``write_record``: the readers do not check the chain, and 100,000 locked,
chained appends would only slow the set-up). Both hold sessions of 10 changes
each over 500 VMs, and the same session to show (10 changes on 3 VMs, another
session changing one of them later). Measured in one run, interleaved, medians:

- ``read_timeline`` (what ``session show`` and the page's session view read), in process;
- ``list_sessions`` (``sessions`` and the page's list), in process;
- ``zerto-rewind session show ID --json`` as a whole process (start-up included).

``session show`` is measured through the log's index (:mod:`zerto_rewind.core.log_index`,
built by a first read before the timed runs, as the first ``session show`` after an
upgrade builds it) and, for comparison, reading the whole log (what it falls back to
when the index cannot be used). The index's build over each log, and its extension
by 1,000 new lines, are timed once each and printed.

Each is printed as time(100,000) ÷ time(1,000). Judged:

- the issue's target for ``session show``: it grows no faster than the session's own
  size, which is the same in both logs, so the ratio is to stay ≤ 2×;
- that the list grows no faster than the log (per-line cost at 100,000 ≤ 2× that at
  1,000; a 77 MB file does not stay in the CPU's caches as a 0.8 MB one does);
- that a person waits under a second for ``session show`` over 100,000 lines.

    .venv/bin/python benchmarks/bench_sessions.py [--runs 7]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import _bench

from zerto_rewind.core.decision import fmt_time
from zerto_rewind.core.keys import load_or_create_key
from zerto_rewind.core.record_mac import RecordMac, state_key_path
from zerto_rewind.core.sessions import list_sessions, read_timeline

SMALL, LARGE = 1_000, 100_000
TARGET = "9f1c2d3e-target-session"
SESSION_RATIO_TARGET = 2.0
PER_LINE_TARGET = 2.0
SHOW = "session show (in process)"
WHOLE = "session show, log read whole (fallback)"
LIST = "session list (in process)"
CLI = "session show (CLI process)"
SHOW_TARGET_S = 1.0


def _line(n: int, session: str, vm: str, at: float) -> str:
    record: dict[str, Any] = {
        "event_id": f"{n:032x}",
        "occurred_at": fmt_time(at),
        "principal_id": "token:agent-1",
        "event_type": "tool_call.decision",
        "tool_name": "mcp__vsphere__power_off_vm",
        "outcome": "allowed",
        "extensions": {"zerto_rewind": {"vpgs": ["vpg-x"], "checkpoint_ids": [str(n)]}},
        "time": fmt_time(at),
        "origin": "service",
        "session_id": session,
        "tool_use_id": f"toolu_{n}",
        "tool": "mcp__vsphere__power_off_vm",
        "row": "confirmed",
        "decision": "context",
        "vms": [vm],
        "vpgs": ["vpg-x"],
        "vpg_ids": ["vpg-id-x"],
        "checkpoint_ids": [str(n)],
        "tags": [f"zerto-rewind t{n}"],
        "landed_at": fmt_time(at - 0.5),
        "elapsed_ms": 900,
        "reason": "",
        "client": "token:agent-1",
        "seq": n,
        "prev": "0" * 64,
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def write_log(path: str, lines: int) -> None:
    """``lines`` decisions; the target session's 10 in the middle, then another's later."""
    start = time.time() - lines
    middle = lines // 2
    with open(path, "w", encoding="utf-8") as fh:
        for n in range(1, lines + 1):
            if middle <= n < middle + 10:
                session, vm = TARGET, f"vm-target-{n % 3}"
            elif n == middle + 20:
                session, vm = "other-session-later", "vm-target-0"
            else:
                session, vm = f"session-{n // 10:06d}", f"vm-{n % 500:03d}"
            fh.write(_line(n, session, vm, start + n))


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cli_show(path: str, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "session", "show", TARGET, "--json", "--log", path],
        check=True, capture_output=True, timeout=120, env=env,
    )  # fmt: skip


def measure(
    paths: dict[int, str], runs: int, mac: RecordMac, env: dict[str, str]
) -> dict[tuple[str, int], float]:
    subjects: dict[str, Callable[[str], Any]] = {
        SHOW: lambda p: read_timeline(p, TARGET, mac=mac),
        WHOLE: lambda p: read_timeline(p, TARGET),
        LIST: lambda p: list_sessions(p, limit=20),
        CLI: lambda p: cli_show(p, env),
    }
    times: dict[tuple[str, int], list[float]] = {}
    for run in range(runs + 1):  # the first run warms the page cache and imports
        for name, fn in subjects.items():
            for size in (SMALL, LARGE) if run % 2 else (LARGE, SMALL):
                spent = timed(lambda fn=fn, size=size: fn(paths[size]))
                if run:
                    times.setdefault((name, size), []).append(spent)
    return {key: _bench.median(values) for key, values in times.items()}


def index_costs(paths: dict[int, str], mac: RecordMac) -> None:
    """The index's one-off costs: built from nothing, then extended by 1,000 lines."""
    rows = []
    for size, path in paths.items():
        built = timed(functools.partial(read_timeline, path, TARGET, mac=mac))
        with open(path, "a", encoding="utf-8") as fh:
            start = time.time()
            for n in range(size + 1, size + 1001):
                fh.write(_line(n, f"session-late-{n // 10:06d}", f"vm-{n % 500:03d}", start))
        extended = timed(functools.partial(read_timeline, path, TARGET, mac=mac))
        index = os.path.getsize(f"{path}.index")
        rows.append((f"{size:,} lines", built * 1000, extended * 1000, index))
    _bench.table(["log", "index built ms", "+1,000 lines ms", "index bytes"], rows)
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    _bench.header(
        "session show and the session list: a 100,000-decision log vs 1,000",
        f"./.venv/bin/python benchmarks/bench_sessions.py --runs {args.runs}",
    )
    with tempfile.TemporaryDirectory(prefix="zr-bench-sessions-") as tmp:
        state = os.path.join(tmp, "state")
        mac = RecordMac(key=load_or_create_key(state_key_path(state)))
        env = dict(os.environ, ZERTO_REWIND_STATE_DIR=state, HOME=tmp)
        env.pop("ZERTO_REWIND_CONFIG", None)
        paths = {size: os.path.join(tmp, f"log-{size}.jsonl") for size in (SMALL, LARGE)}
        for size, path in paths.items():
            write_log(path, size)
        sizes = {size: os.path.getsize(path) for size, path in paths.items()}
        print(f"logs: {SMALL:,} lines ({sizes[SMALL]:,} B), {LARGE:,} lines ({sizes[LARGE]:,} B)")
        index_costs(paths, mac)
        for path in paths.values():
            timeline = read_timeline(path, TARGET, mac=mac)
            assert len(timeline.changes) == 10, "the target session was not read whole"
            assert any(e.later for e in timeline.changes), "the later change was not found"
            assert timeline.to_json() == read_timeline(path, TARGET).to_json()
        medians = measure(paths, args.runs, mac, env)
    return report(medians)


def report(medians: dict[tuple[str, int], float]) -> int:
    names = sorted({name for name, _ in medians})
    rows = []
    for name in names:
        small, large = medians[(name, SMALL)], medians[(name, LARGE)]
        rows.append((name, small * 1000, large * 1000, large / small))
    _bench.table(["what", "1,000 lines ms", "100,000 lines ms", "ratio"], rows)
    print()
    failed = 0
    show, show_small = medians[(SHOW, LARGE)], medians[(SHOW, SMALL)]
    failed |= _bench.judge(f"{SHOW}, 100,000 ÷ 1,000 (the issue's target)", show / show_small,
                           SESSION_RATIO_TARGET, unit="×")  # fmt: skip
    small, large = medians[(LIST, SMALL)], medians[(LIST, LARGE)]
    failed |= _bench.judge(f"{LIST}, per-line cost 100,000 ÷ 1,000", (large / LARGE) /
                           (small / SMALL), PER_LINE_TARGET, unit="×")  # fmt: skip
    whole = medians[(CLI, LARGE)]
    failed |= _bench.judge("session show over 100,000 lines, whole CLI", whole, SHOW_TARGET_S,
                           unit=" s")  # fmt: skip
    return failed


if __name__ == "__main__":
    sys.exit(main())
