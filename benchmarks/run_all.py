"""Run every benchmark script in turn; print a summary; exit non-zero if any target is missed.

    .venv/bin/python benchmarks/run_all.py [--quick]

``--quick`` passes smaller repetition counts (a smoke run, not the figures of record).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = {
    "bench_readonly.py": ["--rounds", "20"],
    "bench_confirmed.py": ["--runs", "2"],
    "bench_refusal.py": ["--runs", "5"],
    "bench_estate_size.py": ["--runs", "2"],
    "bench_estate.py": ["--runs", "2"],
    "bench_concurrency.py": [],
    "bench_tokens.py": [],
    "bench_gateway.py": ["--rounds", "50", "--blocks", "2", "--runs", "2"],
    "bench_identity.py": ["--runs", "3"],
    "bench_service.py": ["--rounds", "20", "--runs", "2"],
    "bench_approvals.py": ["--rounds", "40", "--waiting", "10", "--runs", "2"],
    "bench_mac.py": ["--rounds", "60", "--runs", "2"],
    "bench_ready.py": ["--rounds", "2"],
    "bench_abuse.py": ["--calls", "100", "--abuse-s", "15"],
    "bench_tracing.py": ["--blocks", "2"],
    "bench_sessions.py": ["--runs", "3"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    results = []
    for script, quick in SCRIPTS.items():
        started = time.perf_counter()
        cmd = [sys.executable, os.path.join(HERE, script), *(quick if args.quick else [])]
        code = subprocess.run(cmd, check=False).returncode
        results.append((script, code, time.perf_counter() - started))
        print(flush=True)
    print("== summary")
    for script, code, seconds in results:
        print(f"{'PASS' if code == 0 else 'FAIL'}  {script:<24} {seconds:6.1f} s")
    return 1 if any(code for _s, code, _t in results) else 0


if __name__ == "__main__":
    sys.exit(main())
