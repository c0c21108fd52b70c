"""Speed 12: a whole estate, one ZVM per site, costs what one ZVM costs.

One simulator runs three ZVMs over TLS (``THREE_ZVMS``: hq, dr, azure). The same hook
decides ``web-01`` (protected from hq, recovering to dr) under two configs that share one
state directory: ``zvms`` with the three sites, and ``zvms`` with hq alone. Judged, in
one run:

* a warm decision (tokens, site identities, entity types and VM lookups cached), three
  ZVMs ÷ one ZVM, medians of interleaved runs, each right after the VPG's journal
  checkpoint: ≤ 1.1;
* azure hangs (every route): a decision on ``web-01`` (its VM cache emptied each time, so
  every ZVM is asked) is ``site_unknown`` (azure may hold a twin of the name: the hook
  asks, naming azure, and nothing is tagged). It costs azure's own timeout (1 s
  connect + 1 s read) once, on the first call, and then none: azure is marked down
  (``guard.site_down_s``, 60 s here, so the mark spans the phase) and not asked again;
  the following decisions take no longer than a prompt that asked every ZVM before the
  fault (``ghost-01``, unknown to Zerto; ≤ 1.1 ×, since neither waits for a tag), and a
  VM of azure (``crm-01``) is denied at once, naming it;
* token requests: one per ZVM per token lifetime, counted by each ZVM's ``/_sim/stats``:
  over the warm runs, then again after every token was expired (two lifetimes).

    .venv/bin/python benchmarks/bench_estate.py [--runs 5]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any

import _bench

from zerto_rewind.testing import THREE_ZVMS, fast_sim_config

TARGET = 1.1
VM, VPG = "web-01", "hq-web-dr"
AZURE_VM = "crm-01"
GHOST_VM = "ghost-01"  # no ZVM knows it: a prompt after asking every ZVM
SITE_TIMEOUTS = {"connect_timeout_s": 1, "read_timeout_s": 1}
HANG_COST_S = sum(SITE_TIMEOUTS.values())
# A "site down" mark of 60 s (the default is 10 s) spans the whole hanging phase, so the
# hanging site is asked exactly once; no tag bound, as every round tags web-01's VPG.
SITE_DOWN_S = 60
GUARD = {"timeout_s": 20, "site_down_s": SITE_DOWN_S, "max_tags_per_minute": None}
# estate.py gives a worker past its site's deadline this long to come back.
JOIN_GRACE_S = 0.25


class Estate:
    """The three-ZVM sandbox and a second config naming hq alone, one state directory."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        config = fast_sim_config(cadences={"vcenter": 2.0, "azure": 2.0})
        self.box = _bench.sandbox(
            sim_config=config, estate=THREE_ZVMS, guard=GUARD, zvm=SITE_TIMEOUTS
        )
        one = self.box.config()
        one["zvms"] = {"hq": one["zvms"]["hq"]}
        self.one_zvm_config = os.path.join(self.box.root, "one-zvm.json")
        fd = os.open(self.one_zvm_config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(one, fh)
        self.configs = {"3 ZVMs": self.box.config_path, "1 ZVM": self.one_zvm_config}
        self.decisions = 0

    def decide(self, label: str, vm: str = VM, *, cold_lookup: bool = False) -> _bench.HookRun:
        """One decision on ``vm`` right after its VPG's checkpoint, under ``label``'s config."""
        if cold_lookup:
            for path in glob.glob(os.path.join(self.box.state_dir, "cache", "vms-*.json")):
                os.unlink(path)
        if vm == VM:
            self.box.wait_past_boundary(VPG)
        env = self.box.env(ZERTO_REWIND_CONFIG=self.configs[label])
        self.decisions += 1
        return self.box.run_hook(
            _bench.POWER_OFF, {"name": vm}, env=env, tool_use_id=f"toolu_{self.decisions}"
        )

    def landing(self) -> float:
        """The last decision's L: from its tag request to the checkpoint landing."""
        record = self.box.decision_records()[-1]
        return _bench.epoch(record["landed_at"]) - _bench.epoch(record["requested_at"])

    def confirmed(self, label: str, **kwargs: Any) -> tuple[float, float]:
        """A confirmed decision's wall time and wall − L."""
        run = self.decide(label, **kwargs)
        if run.decision != "context":
            raise RuntimeError(f"{label}: expected a confirmed decision, got {run.reason}")
        return run.elapsed_s, run.elapsed_s - self.landing()

    def prompted(self, label: str, **kwargs: Any) -> tuple[float, float]:
        """A site_unknown decision's wall time, twice (no tag, so no L to take off)."""
        run = self.decide(label, **kwargs)
        row = self.box.decision_records()[-1].get("row")
        if run.decision != "ask" or row != "site_unknown" or "site azure" not in run.reason:
            raise RuntimeError(f"{label}: expected site_unknown naming azure, got {run.reason}")
        return run.elapsed_s, run.elapsed_s

    def requests(self, site: str, route: str) -> int:
        counts: dict[str, int] = self.box.control("GET", "/_sim/stats", site=site)["requests"]
        return counts.get(route, 0)

    def tokens(self) -> dict[str, int]:
        return {
            site: int(self.box.control("GET", "/_sim/stats", site=site)["token_requests"]["total"])
            for site in self.box.sites
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    _bench.header(
        "several ZVMs: 3 vs 1, one hanging", "./.venv/bin/python benchmarks/bench_estate.py"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    estate = Estate(args.runs)
    try:
        failures = warm_ratio(estate)
        failures += token_reuse(estate)
        failures += hanging_site(estate)
    finally:
        estate.box.stop()
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failures else 0


def warm_ratio(estate: Estate) -> int:
    """A warm decision, three ZVMs ÷ one ZVM."""
    times: dict[str, list[float]] = {label: [] for label in estate.configs}
    overheads: dict[str, list[float]] = {label: [] for label in estate.configs}
    for n in range(estate.runs + 1):  # round 0 fills the tokens and every cache
        for label in estate.configs:
            wall, overhead = estate.confirmed(label)
            if n > 0:
                times[label].append(wall)
                overheads[label].append(overhead)
    print("-- warm decision on web-01 (hq), 3 ZVMs vs 1 ZVM")
    rows = [
        [label, _bench.median(times[label]), _bench.median(overheads[label])] for label in times
    ]
    _bench.table(["config", "median decision s", "median (decision - L) s"], rows)
    three, one = _bench.median(times["3 ZVMs"]), _bench.median(times["1 ZVM"])
    over_three, over_one = _bench.median(overheads["3 ZVMs"]), _bench.median(overheads["1 ZVM"])
    print(f"(decision - L) ratio, for information: {over_three / over_one:.3f}")
    return _bench.judge("warm decision 3 ZVMs / 1 ZVM", three / one, TARGET, unit="×")


def hanging_site(estate: Estate) -> int:
    """azure hangs: its timeout once, then the mark; the others decided in their normal time."""
    normal = [estate.confirmed("3 ZVMs", cold_lookup=True) for _ in range(estate.runs)]
    asking = [estate.decide("3 ZVMs", GHOST_VM, cold_lookup=True) for _ in range(estate.runs)]
    if any(run.decision != "ask" for run in asking):
        raise RuntimeError(f"{GHOST_VM}: expected a prompt, got {asking[0].reason}")
    prompt_wall = _bench.median([run.elapsed_s for run in asking])
    estate.box.control("POST", "/_sim/faults", {"route": "*", "kind": "hang"}, site="azure")
    try:
        asked = [estate.requests("azure", "GET vms.list")]
        during = [estate.prompted("3 ZVMs", cold_lookup=True)]
        asked.append(estate.requests("azure", "GET vms.list"))
        during += [estate.prompted("3 ZVMs", cold_lookup=True) for _ in range(estate.runs)]
        azure_vm = estate.decide("3 ZVMs", AZURE_VM, cold_lookup=True)
        asked.append(estate.requests("azure", "GET vms.list"))
    finally:
        estate.box.control("DELETE", "/_sim/faults", site="azure")
    print(f"\n-- azure hangs (its timeout: {HANG_COST_S:g} s): web-01 with every ZVM asked")
    rows: list[list[object]] = [["before the fault (median)", *_medians(normal)]]
    rows.append([f"{GHOST_VM} (vm_unknown) before the fault (median)", prompt_wall, prompt_wall])
    rows.append(["first decision during the hang", *during[0]])
    rows += [[f"decision {n + 2} during the hang", *d] for n, d in enumerate(during[1:])]
    _bench.table(["decision", "decision s", "(decision - L) s"], rows)
    first_asks, later_asks = asked[1] - asked[0], asked[2] - asked[1]
    print(
        f"VM lookups azure received: {first_asks} in the first decision (a GET and its retry,"
        f" both within the site's {HANG_COST_S:g} s), {later_asks} in the {estate.runs + 1}"
        " decisions after it (the mark answers)"
    )
    mark = "site azure" in azure_vm.reason
    said = f"{azure_vm.decision} in {azure_vm.elapsed_s:.3f} s, names azure: {mark}"
    print(f"crm-01 (azure's VM): {said}")
    following_wall, _ = _medians(during[1:])
    cost = during[0][0] - prompt_wall
    failures = _bench.judge(
        f"hanging site's cost on the first decision (over {GHOST_VM}'s before the fault)",
        cost,
        HANG_COST_S + JOIN_GRACE_S,
        unit=" s",
    )
    failures += _bench.judge(
        f"following decisions during the hang (site_unknown) / {GHOST_VM}'s before it",
        following_wall / prompt_wall,
        TARGET,
        unit="×",
    )
    failures += _bench.judge(
        "VM lookups of the hanging site after the first decision", later_asks, 0
    )
    ok = azure_vm.decision == "deny" and mark and azure_vm.elapsed_s < HANG_COST_S
    print(f"{'PASS' if ok else 'FAIL'}: azure's VM denied at once, naming the site")
    return failures + (0 if ok else 1)


def token_reuse(estate: Estate) -> int:
    """One token per ZVM per lifetime: the warm runs so far, then again after expiry."""
    first = estate.tokens()
    decided = estate.decisions
    for site in estate.box.sites:
        estate.box.control("POST", "/_sim/tokens/expire", site=site)
    for _ in range(estate.runs):
        estate.confirmed("3 ZVMs", cold_lookup=True)
    estate.confirmed("3 ZVMs", vm=AZURE_VM, cold_lookup=True)
    second = estate.tokens()
    print(f"\n-- token requests per ZVM ({decided} hook processes, then every token expired, "
          f"then {estate.decisions - decided} more)")  # fmt: skip
    rows = [[site, first[site], second[site] - first[site]] for site in estate.box.sites]
    _bench.table(["ZVM", "first lifetime", "second lifetime"], rows)
    worst = max(max(first.values()), max(second[s] - first[s] for s in second))
    return _bench.judge("token requests per ZVM per token lifetime (worst)", worst, 1)


def _medians(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return _bench.median([p[0] for p in pairs]), _bench.median([p[1] for p in pairs])


if __name__ == "__main__":
    sys.exit(main())
