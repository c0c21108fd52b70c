"""The preview and the guard agree on every row: ``zerto-rewind check`` and
``zerto_check_tool`` plan with the guard's own table (recovery/preview_guard.py), so a
row added to core/guard.py reaches them with no change to the preview.

Each case makes one call on a simulated estate (guard_fakes: the simulator's backend, a
fake clock), first planned (nothing tagged, nothing written), then decided by the real
guard on the same state at the same moment: the two decisions must be the same in all
but what only a landed tag can tell (its checkpoint id and landing time).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.config import load_written_settings
from unit.core.guard_fakes import HOST_TOOL, TOOL, URL, EstateRig, Rig
from zerto_rewind.core.decision import Decision, Row, ToolCall
from zerto_rewind.core.guard import Guard
from zerto_rewind.errors import ZvmConnectionError
from zerto_rewind.recovery.preview import planned_decision, preview_call

DATA = Path(__file__).resolve().parents[2] / "data"
CATALOGS = sorted((DATA / "catalogs").glob("*.catalog.json"))
BUDGET_S = 20.0

AnyRig = Rig | EstateRig


def essentials(decision: Decision) -> dict[str, Any]:
    """Everything of a decision but what only a landed tag can tell (its checkpoint id and
    landing time, and the context that names them)."""
    return {
        "row": decision.row,
        "outcome": decision.outcome,
        "reason": decision.reason,
        "vms": decision.vms,
        "retry_after": decision.retry_after,
        "vpgs": [
            (o.vpg_name, o.vms, o.row, o.site_kind, o.site, o.tag, o.reason, o.expected_at)
            for o in decision.vpgs
        ],
    }


def state_files(rig: AnyRig) -> dict[str, bytes]:
    root = Path(rig.settings.state_dir)
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def tag_requests(rig: AnyRig) -> list[str]:
    zvms = rig.zvms.values() if isinstance(rig, EstateRig) else [rig.zvm]
    return [c for z in zvms for c in z.calls if c.startswith("tag ")]


def assert_agree(rig: AnyRig, guard: Guard, call: ToolCall) -> Decision:
    """Plan the call, then decide it for real: the same decision, and the plan wrote and
    tagged nothing."""
    before, tags = state_files(rig), tag_requests(rig)
    planned = planned_decision(rig.settings, guard, rig.state, call)
    assert (state_files(rig), tag_requests(rig)) == (before, tags), "the plan changed something"
    check = preview_call(rig.settings, guard, rig.state, call.tool_name, call.tool_input)
    decided = guard.decide(call)
    assert essentials(planned) == essentials(decided), call
    assert (check.row, check.outcome) == (decided.row, decided.outcome), call
    assert [v.vpg for v in check.vpgs] == [o.vpg_name for o in decided.vpgs]
    if decided.row not in (Row.CONFIRMED, Row.PENDING, Row.FAILED, Row.READ_ONLY):
        assert check.summary == decided.reason  # the guard's own words
    return decided


def call_on(rig: AnyRig, tool_input: Any, tool: str = TOOL) -> ToolCall:
    return ToolCall(tool, tool_input, session_id="s1", started_at=rig.clock.wall())


# ---------------------------------------------------------------- one ZVM


@dataclass(frozen=True)
class Case:
    """A call on the simulator's default estate, after ``before`` set the scene."""

    tool_input: Any
    row: str
    tool: str = TOOL
    before: Callable[[Rig], None] | None = None
    guard: dict[str, Any] = field(default_factory=dict)
    estate: list[dict[str, Any]] | None = None  # the simulator's VPGs instead of its default


def decided_before(*vms: str, consume: bool = True, then: float = 1.0) -> Callable[[Rig], None]:
    """A call on ``vms`` the guard decided, ``then`` seconds ago."""

    def scene(rig: Rig) -> None:
        rig.decide(*vms, consume=consume)
        rig.clock.advance(then)

    return scene


def failing_tags(vpg: str, *, mode: str, then: float, vm: str) -> Callable[[Rig], None]:
    """VPG ``vpg``'s next tag never lands or its task fails; a call on ``vm`` asked for it."""

    def scene(rig: Rig) -> None:
        rig.zvm.tag_behaviour(vpg, mode, reason="VRA on esx07 did not answer")
        rig.decide(vm)
        rig.clock.advance(then)

    return scene


def web_vpg(name: str, moref: str) -> dict[str, Any]:
    return {"name": name, "site_kind": "vcenter", "vms": [{"name": "web", "vcenter_id": moref}]}


ONE_ZVM: dict[str, Case] = {
    "read-only": Case({}, Row.READ_ONLY, tool="mcp__vsphere__list_vms"),
    "unlisted": Case({"name": "jp-ubuntu"}, Row.UNLISTED, tool="mcp__other__thing"),
    "no VM": Case({"force": True}, Row.NO_VM),
    "unknown VM": Case({"name": "ghost"}, Row.VM_UNKNOWN),
    "a case twin is unknown": Case({"name": "JP-Ubuntu"}, Row.VM_UNKNOWN),
    "vCenter: confirmed": Case({"name": "jp-ubuntu"}, Row.CONFIRMED),
    "AWS: pending, denied": Case({"name": "win2019-1"}, Row.PENDING),
    "AWS: pending, prompt": Case(
        {"name": "win2019-1"}, Row.PENDING, guard={"on_pending": "prompt"}
    ),
    "Azure: pending, defer": Case({"name": "web-az-1"}, Row.PENDING, guard={"on_pending": "defer"}),
    "paused": Case({"name": "sql-paused-1"}, Row.FAILED),
    "initial sync": Case({"name": "new-vm-1"}, Row.FAILED),
    "one VM in two VPGs": Case({"name": "multi-1"}, Row.CONFIRMED),
    "vCenter + AWS": Case({"names": ["jp-ubuntu", "win2019-1"]}, Row.PENDING),
    "healthy + paused": Case({"names": ["jp-ubuntu", "sql-paused-1"]}, Row.FAILED),
    "protected + unknown": Case({"names": ["jp-ubuntu", "ghost"]}, Row.VM_UNKNOWN),
    "ambiguous": Case(
        {"name": "web"},
        Row.VM_AMBIGUOUS,
        estate=[web_vpg("vpg-a", "vm-42"), web_vpg("vpg-b", "vm-43")],
    ),
    "a landed, unused tag is reused": Case(
        {"name": "jp-ubuntu"}, Row.CONFIRMED, before=decided_before("jp-ubuntu", consume=False)
    ),
    "a used tag: a new one": Case(
        {"name": "jp-ubuntu"}, Row.CONFIRMED, before=decided_before("jp-ubuntu")
    ),
    "a requested tag is joined, pending": Case(
        {"name": "win2019-1"}, Row.PENDING, before=decided_before("win2019-1", then=30.0)
    ),
    "a joined tag whose task failed": Case(
        {"name": "win2019-1"},
        Row.FAILED,
        before=failing_tags("CMH-AWS-1", mode="fail", then=30.0, vm="win2019-1"),
    ),
    "an overdue tag fails the call": Case(
        {"name": "jp-ubuntu"},
        Row.FAILED,
        before=failing_tags("jp-local", mode="never", then=120.0, vm="jp-ubuntu"),
    ),
    "past max_tags_per_minute": Case(
        {"name": "jp-ubuntu"},
        Row.FAILED,
        before=decided_before("jp-ubuntu", then=1.0),
        guard={"max_tags_per_minute": 1},
    ),
}


@pytest.mark.parametrize("case", ONE_ZVM.values(), ids=list(ONE_ZVM))
def test_the_preview_decides_as_the_guard_on_one_zvm(tmp_path: Path, case: Case) -> None:
    sim: dict[str, Any] = {}
    if case.estate is not None:
        sim["estate_file"] = tmp_path / "estate.json"
        sim["estate_file"].write_text(json.dumps({"vpgs": case.estate}))
    rig = Rig(tmp_path, sim=sim, **{"timeout_s": BUDGET_S, **case.guard})
    if case.before is not None:
        case.before(rig)
    decided = assert_agree(rig, rig.guard(), call_on(rig, case.tool_input, case.tool))
    assert decided.row == case.row, decided.reason


# ---------------------------------------------------------------- several ZVMs


def dark(site: str, *, known: bool = False) -> Callable[[EstateRig], None]:
    """Site ``site``'s ZVM stops answering (``known``: after the guard learned who it is)."""

    def scene(rig: EstateRig) -> None:
        if known:
            rig.guard().sites().local_id(site, rig.zvms[site], None)  # type: ignore[arg-type]
        rig.zvms[site].fault = ZvmConnectionError("connection refused")

    return scene


ESTATE: dict[str, tuple[Any, str, str, Callable[[EstateRig], None] | None]] = {
    "protected from dr": ({"name": "db-01"}, TOOL, Row.CONFIRMED, None),
    "listed by both sites": ({"name": "web-01"}, TOOL, Row.CONFIRMED, None),
    "protected from a site with no ZVM": ({"name": "app-01"}, TOOL, Row.CONFIRMED, None),
    "a VPG the catalog names": ({}, HOST_TOOL, Row.CONFIRMED, None),
    "unknown everywhere": ({"name": "ghost"}, TOOL, Row.VM_UNKNOWN, None),
    "dr dark, hq lists it": ({"name": "web-01"}, TOOL, Row.SITE_UNKNOWN, dark("dr")),
    "only a dark site may hold it": ({"name": "web-01b"}, TOOL, Row.ERROR, dark("dr")),
    "protected from a dark site": ({"name": "db-01"}, TOOL, Row.FAILED, dark("dr", known=True)),
    "a named VPG while its site is dark": ({}, HOST_TOOL, Row.FAILED, dark("dr")),
}


@pytest.mark.parametrize(("tool_input", "tool", "row", "before"), ESTATE.values(), ids=list(ESTATE))
def test_the_preview_decides_as_the_guard_over_several_zvms(
    tmp_path: Path,
    tool_input: Any,
    tool: str,
    row: str,
    before: Callable[[EstateRig], None] | None,
) -> None:
    rig = EstateRig(tmp_path, timeout_s=BUDGET_S)
    if before is not None:
        before(rig)
    decided = assert_agree(rig, rig.guard(), call_on(rig, tool_input, tool))
    assert decided.row == row, decided.reason


def test_the_cases_reach_every_row_a_zvm_decides() -> None:
    """A row the estate decides (not the classification alone, not a later step of the
    pipeline) is among the cases above; a new one needs a case here, no preview code."""
    rows = {c.row for c in ONE_ZVM.values()} | {row for _i, _t, row, _b in ESTATE.values()}
    assert rows == {
        Row.READ_ONLY, Row.UNLISTED, Row.NO_VM, Row.VM_UNKNOWN, Row.VM_AMBIGUOUS,
        Row.SITE_UNKNOWN, Row.CONFIRMED, Row.PENDING, Row.FAILED, Row.ERROR,
    }  # fmt: skip


# ---------------------------------------------------------------- the catalogs under tests/data


def catalog_rig(tmp_path: Path, path: Path) -> Rig:
    """The default estate, guarded by a real server's catalog."""
    catalog = json.loads(path.read_text())
    rig = Rig(tmp_path, timeout_s=BUDGET_S)
    config = {
        "zvm": {"url": URL, "username": "u", "password": "p"},
        "read_only_tools": catalog.get("read_only_tools", []),
        "tools": catalog.get("tools", {}),
        "guard": {"timeout_s": BUDGET_S},
        "state_dir": rig.settings.state_dir,
    }
    (tmp_path / "catalog").mkdir()
    rig.settings = load_written_settings(tmp_path / "catalog", config)
    return rig


def catalog_calls(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each tool the catalog names, with no arguments and with each VM argument it reads
    naming a protected, a cloud and an unknown VM."""
    catalog = json.loads(path.read_text())
    calls: list[tuple[str, dict[str, Any]]] = []
    for tool in [*catalog.get("read_only_tools", []), *catalog.get("tools", {})]:
        name = tool.replace("*", "x").replace("?", "x")
        spec = catalog.get("tools", {}).get(tool, {})
        vm_args = spec.get("vm_arg", "name")
        keys = [vm_args] if isinstance(vm_args, str) else list(vm_args)
        keys = [k for k in keys if k.isidentifier()] or ["name"]
        calls.append((name, {}))
        calls += [(name, {keys[0]: vm}) for vm in ("jp-ubuntu", "win2019-1", "ghost")]
    return calls


@pytest.mark.parametrize("path", CATALOGS, ids=[p.name for p in CATALOGS])
def test_the_preview_decides_as_the_guard_on_each_catalog(tmp_path: Path, path: Path) -> None:
    """One state through the whole catalog: later calls meet the tags earlier ones left."""
    rig = catalog_rig(tmp_path, path)
    rows = set()
    for tool, tool_input in catalog_calls(path):
        rows.add(assert_agree(rig, rig.guard(), call_on(rig, tool_input, tool)).row)
        rig.clock.advance(1.0)
    assert len(rows) > 1
