"""Shared helpers for the benchmark scripts: timing, the simulator, tables, verdicts.

Every script measures its baseline in the same run as its subject and prints
the ratio it is judged by, with PASS/FAIL; ``judge`` returns the exit code.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from zerto_rewind.testing import HookRun, Sandbox

__all__ = ["HookRun", "Sandbox", "at_once", "judge", "sandbox", "table"]

POWER_OFF = "mcp__vsphere__power_off_vm"
READ_ONLY = "mcp__vsphere__get_vm"


def machine() -> str:
    """One line naming the machine: cores, CPU model, Python."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores, {model}, Python {platform.python_version()} "
        f"({sys.executable}), {platform.system()} {platform.release()}"
    )


def sandbox(root: str | None = None, **kwargs: Any) -> Sandbox:
    """A started Sandbox in a fresh temporary directory (the caller stops it)."""
    box = Sandbox(root or tempfile.mkdtemp(prefix="zr-bench-"), **kwargs)
    box.start()
    return box


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def zvm_requests(box: Sandbox) -> dict[str, int]:
    """The simulator's per-route request counters, control plane excluded."""
    counts: dict[str, int] = box.control("GET", "/_sim/stats")["requests"]
    return {k: v for k, v in counts.items() if " sim." not in k}


def token_requests(box: Sandbox) -> int:
    return int(box.control("GET", "/_sim/stats")["token_requests"]["total"])


def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def timed(argv: Sequence[str], stdin: bytes, env: dict[str, str] | None = None) -> float:
    """Wall seconds of one process, from spawn to exit; it must exit 0 with empty stdout."""
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or proc.stdout.strip():
        msg = f"{argv[0]}… exited {proc.returncode}: {proc.stdout[:200]!r} {proc.stderr[:300]!r}"
        raise RuntimeError(msg)
    return elapsed


def at_once(jobs: Sequence[Callable[[], HookRun]]) -> tuple[float, list[HookRun]]:
    """Start every job at the same moment (a barrier); wall seconds until the last ends."""
    barrier = threading.Barrier(len(jobs) + 1)
    results: list[HookRun | None] = [None] * len(jobs)

    def work(i: int) -> None:
        barrier.wait()
        results[i] = jobs[i]()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return wall, [r for r in results if r is not None]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a small aligned table."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def judge(name: str, value: float, target: float, *, unit: str = "", at_most: bool = True) -> int:
    """Print the judged figure against its target; 0 on PASS, 1 on FAIL."""
    ok = value <= target if at_most else value >= target
    sign = "≤" if at_most else "≥"
    verdict = "PASS" if ok else "FAIL"
    print(f"{verdict}: {name} = {value:.3f}{unit} (target {sign} {target:g}{unit})")
    return 0 if ok else 1


def precompile() -> None:
    """Write the package's bytecode before timing anything.

    An installed package has its .pyc files; an editable checkout gets them on first
    import, unless PYTHONDONTWRITEBYTECODE is set (some shells and agent hosts set it).
    Without them every hook process would compile its modules from source, and the
    benchmark would time the compiler instead of the hook.
    """
    import compileall

    import zerto_rewind

    compileall.compile_dir(os.path.dirname(zerto_rewind.__file__), quiet=1)


def header(title: str, command: str) -> None:
    precompile()
    print(f"== {title}")
    print(f"machine: {machine()}")
    print(f"reproduce: {command}")
    print()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds these processes used so far (Linux /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total
