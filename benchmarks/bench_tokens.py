"""Speed 6: 100 sequential decisions within one token lifetime make one token request.

Each decision is a separate hook process that needs the ZVM (refusals on the
paused VPG and unknown-VM prompts, which answer fast); the token comes from the
cache shared between processes.

    .venv/bin/python benchmarks/bench_tokens.py [--decisions 100]
"""

from __future__ import annotations

import argparse
import sys
import time

import _bench

TARGET = 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100)
    args = parser.parse_args()
    _bench.header(
        "token reuse across hook processes", "./.venv/bin/python benchmarks/bench_tokens.py"
    )
    box = _bench.sandbox(guard={"timeout_s": 20})
    try:
        before, requests_before = _bench.token_requests(box), _bench.zvm_requests(box)
        started = time.perf_counter()
        rows: dict[str, int] = {}
        for n in range(args.decisions):
            vm = "sql-paused-1" if n % 2 == 0 else f"ghost-vm-{n}"
            run = box.run_hook(_bench.POWER_OFF, {"name": vm}, tool_use_id=f"toolu_{n}")
            rows[run.decision] = rows.get(run.decision, 0) + 1
        wall = time.perf_counter() - started
        tokens = _bench.token_requests(box) - before
        used = _bench.diff(_bench.zvm_requests(box), requests_before)
        _bench.table(
            ["decisions", "answers", "wall s", "ZVM requests", "token requests"],
            [[args.decisions, rows, wall, sum(used.values()), tokens]],
        )
        print()
        return _bench.judge("token requests", tokens, TARGET)
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
