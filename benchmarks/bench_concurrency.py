"""Speed 5: 20 hooks at once — on one VPG (one tag, ≤ 1.5× one decision) and on 20 VPGs (≤ 2×).

"One decision" is measured in the same run: a single hook on the same VPG,
started right after a journal checkpoint, like each batch. The simulator has
20 extra VPGs (``--vms 20``: ``vm-00001``… in ``vpg-00001``…).

    .venv/bin/python benchmarks/bench_concurrency.py [--hooks 20]
"""

from __future__ import annotations

import argparse
import functools
import sys

import _bench

from zerto_rewind.testing import fast_sim_config

ONE_VPG_TARGET = 1.5
MANY_VPG_TARGET = 2.0
SINGLES = 3
BATCHES = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hooks", type=int, default=20)
    args = parser.parse_args()
    _bench.header(
        "concurrency: hooks started at once", "./.venv/bin/python benchmarks/bench_concurrency.py"
    )
    # vSphere's real 5 s cadence, not the 2 s the other benchmarks shorten it to:
    # twenty interpreters starting on two cores take over a second, and with a
    # 2 s journal that alone can push the tag request past the next boundary,
    # measuring the simulator's phase rather than the guard.
    sim_config = fast_sim_config(vms=args.hooks, cadences={"vcenter": 5.0})
    box = _bench.sandbox(sim_config=sim_config, guard={"timeout_s": 20})
    try:
        return measure(box, args.hooks)
    finally:
        box.stop()


def _hook(box: _bench.Sandbox, vm: str, n: int) -> _bench.HookRun:
    return box.run_hook(_bench.POWER_OFF, {"name": vm}, tool_use_id=f"toolu_{vm}_{n}")


def measure(box: _bench.Sandbox, hooks: int) -> int:
    vms = [f"vm-{i:05d}" for i in range(1, hooks + 1)]
    # Warm the token, entity-type and VM caches and learn each VPG's cadence.
    _bench.at_once([functools.partial(_hook, box, vm, 0) for vm in vms])
    singles = []
    for n in range(SINGLES):
        box.wait_past_boundary("vpg-00001")
        singles.append(_hook(box, "vm-00001", 100 + n).elapsed_s)
    one = _bench.median(singles)

    same_walls, spread_walls = [], []
    same_tags = spread_tags = 0
    same_ok = spread_ok = 0
    for batch in range(BATCHES):
        box.wait_past_boundary("vpg-00001")
        tags_before = box.tag_requests("vpg-00001")
        wall, runs = _bench.at_once(
            [functools.partial(_hook, box, "vm-00001", 1000 * batch + n) for n in range(hooks)]
        )
        same_walls.append(wall)
        same_tags = max(same_tags, box.tag_requests("vpg-00001") - tags_before)
        same_ok = min(same_ok or hooks, sum(r.decision == "context" for r in runs))

        box.wait_past_boundary("vpg-00001")
        tags_before = box.tag_requests()
        wall, runs = _bench.at_once(
            [functools.partial(_hook, box, vm, 1000 * batch + 500) for vm in vms]
        )
        spread_walls.append(wall)
        spread_tags = max(spread_tags, box.tag_requests() - tags_before)
        spread_ok = min(spread_ok or hooks, sum(r.decision == "context" for r in runs))
    same_wall, spread_wall = _bench.median(same_walls), _bench.median(spread_walls)
    print(f"batch walls, one VPG: {', '.join(f'{w:.2f}' for w in same_walls)} s")
    print(f"batch walls, {hooks} VPGs: {', '.join(f'{w:.2f}' for w in spread_walls)} s\n")

    _bench.table(
        ["case", "wall s", "× one decision", "allowed", "tag requests"],
        [
            [f"one decision (median of {SINGLES})", one, 1.0, "-", "-"],
            [f"{hooks} hooks, one VPG (median of {BATCHES})", same_wall, same_wall / one,
             f"{same_ok}/{hooks}", same_tags],
            [f"{hooks} hooks, {hooks} VPGs (median of {BATCHES})", spread_wall, spread_wall / one,
             f"{spread_ok}/{hooks}", spread_tags],
        ],
    )  # fmt: skip
    print()
    code = _bench.judge(
        f"{hooks} hooks on one VPG, × one decision", same_wall / one, ONE_VPG_TARGET
    )
    code |= _bench.judge("most tag requests for one VPG in a batch", same_tags, 1)
    code |= _bench.judge("fewest hooks allowed in a batch, one VPG", same_ok, hooks, at_most=False)
    code |= _bench.judge(
        f"{hooks} hooks on {hooks} VPGs, × one decision", spread_wall / one, MANY_VPG_TARGET
    )
    code |= _bench.judge(
        "fewest hooks allowed in a batch, many VPGs", spread_ok, hooks, at_most=False
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
