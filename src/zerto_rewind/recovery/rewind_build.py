"""A rewind plan: the log's selection (:mod:`.rewind_plan`) checked against the ZVM.

For each VM the plan says which Zerto operation puts it back (a journal VM
restore of that one VM from the rewind point, then a commit), what a failover of
its whole VPG would also move, what it would undo that the session did not do,
whether the checkpoint is still in the journal, and why it cannot run if it
cannot. Nothing here changes the ZVM.

The plan id is a digest of :attr:`RewindPlan.facts`: the log lines used, each
checkpoint's presence and the tagged checkpoints after it, and each VPG's state.
A run rebuilds the plan and refuses if a fact moved (:func:`changed_facts`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..core.decision import fmt_time
from ..errors import ZertoRewindError
from ..zvm.models import tag_refusal
from .plan import IN_PLACE_NOTE, _busy
from .rewind_plan import (
    Change,
    Scope,
    Unrewindable,
    Wanted,
    read_changes,
    scope_needles,
    select,
)

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from ..zvm.models import Checkpoint, Vpg
    from .sites import Place

__all__ = ["LoggedChange", "RewindPlan", "VmRewind", "build_plan", "changed_facts", "place_of"]

_LOG_FACT = "cannot be rewound"


class LoggedChange(BaseModel):
    """A change of the log, as a plan names it."""

    time: str
    session_id: str | None
    tool: str
    vms: list[str]
    decision: str
    approver: str | None = None
    why: str | None = Field(default=None, description="why it cannot be rewound")

    @classmethod
    def of(cls, change: Change, why: str | None = None) -> LoggedChange:
        return cls(
            time=change.time,
            session_id=change.session_id,
            tool=change.tool,
            vms=list(change.vms),
            decision=change.decision,
            approver=change.approver,
            why=why,
        )


class VmRewind(BaseModel):
    """One VM of the plan: its rewind point and what putting it back does."""

    vm: str
    vm_id: str | None = None
    vpg: str | None = None
    vpg_id: str | None = None
    checkpoint_id: str
    checkpoint_tag: str | None = None
    checkpoint_time: str | None = Field(default=None, description="as the journal shows it")
    in_journal: bool | None = Field(description="None: the ZVM could not be asked")
    first_change: LoggedChange
    changes: int = Field(description="the changes in scope to this VM")
    operation: str = Field(description="the Zerto operation that puts the VM back")
    zerto_api: list[str]
    failover_touches: list[str] = Field(
        description="the VPG's other VMs: a failover (--failover) moves them too"
    )
    also_undoes: list[LoggedChange] = Field(description="later changes by other sessions")
    later_checkpoints: list[str] = Field(
        description="tagged checkpoints after the rewind point that the guard did not take: "
        "changes outside the guard may lie between them"
    )
    blocked: str | None = Field(default=None, description="why it cannot run now")


class RewindPlan(BaseModel):
    """What a rewind would do; ``plan_id`` is a digest of ``facts``."""

    plan_id: str
    created_at: str
    scope: dict[str, str]
    vms: list[VmRewind]
    cannot_rewind: list[LoggedChange]
    facts: dict[str, str] = Field(description="what the plan id covers, by name")
    note: str = IN_PLACE_NOTE


def build_plan(
    zvms: Guard | ZvmClient,
    settings: Settings,
    scope: Scope,
    *,
    log_path: str | None = None,
    deadline: float | None = None,
) -> RewindPlan:
    """The plan for ``scope``, from the log and the ZVM; read-only."""
    path = log_path or settings.log_path
    changes = read_changes(path, scope_needles(path, scope))
    selection = select(changes, scope)
    guard_checkpoints = {cp for c in changes for cp in c.checkpoint_ids}
    facts: dict[str, str] = {}
    vms = [
        _vm_rewind(zvms, settings, wanted, guard_checkpoints, facts, deadline)
        for wanted in selection.wanted
    ]
    facts[_LOG_FACT] = _digests(u.change for u in selection.unrewindable)
    return RewindPlan(
        plan_id=plan_id(scope, facts),
        created_at=fmt_time(time.time()),
        scope=scope.to_json(),
        vms=vms,
        cannot_rewind=[_unrewindable(u) for u in selection.unrewindable],
        facts=facts,
    )


def plan_id(scope: Scope, facts: dict[str, str]) -> str:
    """The digest of a plan's inputs: its scope and facts."""
    blob = json.dumps({"scope": scope.to_json(), "facts": facts}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def changed_facts(before: dict[str, str], now: dict[str, str], vms: set[str]) -> list[str]:
    """What moved between two plans' facts, for the VMs in ``vms`` and the whole log."""

    def mine(key: str) -> bool:
        return key == _LOG_FACT or key.partition(": ")[0] in vms

    keys = sorted(k for k in set(before) | set(now) if mine(k))
    return [
        f"{key}: was {before.get(key, 'absent')!r}, now {now.get(key, 'absent')!r}"
        for key in keys
        if before.get(key) != now.get(key)
    ]


def place_of(
    zvms: Guard | ZvmClient, settings: Settings, vm: str, vpg_id: str, deadline: float | None
) -> Place:
    """Where ``vm``'s VPG ``vpg_id`` is handled: its ref and the ZVM to ask; ZvmError if none."""
    from ..errors import ZvmError
    from .sites import locate

    located = locate(zvms, vm, deadline=deadline, purpose="recover", settings=settings)
    found = next((p for p in located.places if p.ref.vpg_id == vpg_id), None)
    if found is None:
        listed = ", ".join(p.ref.vpg_name for p in located.places) or "none"
        msg = f"VM {vm!r} is no longer listed in the VPG the guard tagged (its VPGs: {listed})"
        raise ZvmError(msg)
    return found


def _digests(changes: Iterable[Change]) -> str:
    return ",".join(sorted(c.digest[:16] for c in changes))


def _unrewindable(item: Unrewindable) -> LoggedChange:
    return LoggedChange.of(item.change, item.why)


def _vm_rewind(
    zvms: Guard | ZvmClient,
    settings: Settings,
    wanted: Wanted,
    guard_checkpoints: set[str],
    facts: dict[str, str],
    deadline: float | None,
) -> VmRewind:
    vm = wanted.vm
    facts[f"{vm}: log"] = _digests((*wanted.own, *wanted.others))
    points = wanted.points()
    vpg_id, (checkpoint_id, tag) = next(iter(sorted(points.items())))
    rewind = VmRewind(
        vm=vm,
        vpg_id=vpg_id,
        checkpoint_id=checkpoint_id,
        checkpoint_tag=tag,
        in_journal=None,
        first_change=LoggedChange.of(wanted.first),
        changes=len(wanted.own),
        operation=f"journal VM restore of {vm} from checkpoint {checkpoint_id}, then commit",
        zerto_api=[],
        failover_touches=[],
        also_undoes=[LoggedChange.of(c) for c in wanted.others],
        later_checkpoints=[],
    )
    try:
        _ask_zvm(zvms, settings, rewind, points, guard_checkpoints, facts, deadline)
    except ZertoRewindError as exc:
        rewind.blocked = f"the ZVM could not be asked about {vm}: {exc}"
        facts[f"{vm}: ZVM"] = f"{type(exc).__name__}: {exc}"
    return rewind


def _ask_zvm(
    zvms: Guard | ZvmClient,
    settings: Settings,
    rewind: VmRewind,
    points: dict[str, tuple[str, str | None]],
    guard_checkpoints: set[str],
    facts: dict[str, str],
    deadline: float | None,
) -> None:
    """Fill in what the ZVM says about the VM, its VPG and its journal."""
    from .sites import locate

    vm = rewind.vm
    located = locate(zvms, vm, deadline=deadline, purpose="recover", settings=settings)
    place = next((p for p in located.places if p.ref.vpg_id in points), None)
    if place is None:
        listed = ", ".join(p.ref.vpg_name for p in located.places) or "none"
        rewind.blocked = f"{vm} is no longer in the VPG the guard tagged (its VPGs: {listed})"
        facts[f"{vm}: ZVM"] = f"VPGs {listed}"
        return
    client, ref = place.client, place.ref
    rewind.checkpoint_id, rewind.checkpoint_tag = points[ref.vpg_id]
    vpg = client.get_vpg(ref.vpg_id, deadline=deadline)
    rewind.vm_id, rewind.vpg, rewind.vpg_id = ref.vm_id, vpg.name, vpg.vpg_id
    facts[f"{vm}: ZVM"] = f"VM {ref.vm_id} in VPG {vpg.name} ({vpg.vpg_id})"
    rewind.zerto_api = [f"POST /v1/vms/{ref.vm_id}/{op}" for op in ("Restore", "RestoreCommit")]
    members = client.vpg_vms(vpg.name, deadline=deadline)
    rewind.failover_touches = sorted({m.vm_name for m in members} - {vm})
    facts[f"{vm}: VPG"] = _vpg_fact(vpg, [m.vm_name for m in members])
    journal = client.list_checkpoints(vpg.vpg_id, deadline=deadline)
    _journal_facts(rewind, journal, guard_checkpoints, facts)
    rewind.blocked = rewind.blocked or _busy(vpg) or _test_running(vpg)


def _vpg_fact(vpg: Vpg, members: list[str]) -> str:
    refused = tag_refusal(vpg)
    state = "protecting" if refused is None else f"{vpg.status_text}/{vpg.sub_status_text}"
    test = "a failover test running" if vpg.failover_test_running else "no failover test"
    return f"{state}; {test}; VMs {', '.join(sorted(members))}"


def _test_running(vpg: Vpg) -> str | None:
    if vpg.failover_test_running:
        return f"a failover test is running on VPG {vpg.name!r}; stop it first"
    return None


def _journal_facts(
    rewind: VmRewind,
    journal: list[Checkpoint],
    guard_checkpoints: set[str],
    facts: dict[str, str],
) -> None:
    found = next((c for c in journal if c.cp_id == rewind.checkpoint_id), None)
    rewind.in_journal = found is not None
    if found is None:
        rewind.blocked = (
            f"checkpoint {rewind.checkpoint_id} is no longer in the journal of VPG "
            f"{rewind.vpg!r} (a re-sync, or the journal's history, removed it): {rewind.vm} "
            "cannot be put back to it"
        )
        later: list[Checkpoint] = []
    else:
        rewind.checkpoint_time = fmt_time(found.timestamp.timestamp())
        later = [
            c
            for c in journal
            if c.tag and c.sort_key() > found.sort_key() and c.cp_id not in guard_checkpoints
        ]
    rewind.later_checkpoints = [
        f"{c.cp_id} tagged {c.tag!r} at {fmt_time(c.timestamp.timestamp())}" for c in later
    ]
    presence = "in the journal" if found is not None else "gone"
    outside = ", ".join(c.cp_id for c in later) or "none"
    facts[f"{rewind.vm}: journal"] = (
        f"checkpoint {rewind.checkpoint_id} {presence}; tagged outside the guard after it: "
        f"{outside}"
    )
