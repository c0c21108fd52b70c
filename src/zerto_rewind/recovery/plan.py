"""Which Zerto operations bring a VM back to a checkpoint: the read-only recovery plan.

The plan names each operation (failover test, live failover, journal VM
restore), what it touches, whether it can run now and the exact tool calls,
including the ``confirm`` value the live ones want. Nothing here changes the
ZVM; the operations themselves are in :mod:`~zerto_rewind.recovery.failover` (the
failover test) and :mod:`~zerto_rewind.recovery.live`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..core.guard import entity_type_names
from .failover import (
    RecoveryStep,
    Target,
    confirm_token,
    failover_finish_steps,
    recovery_site,
    restore_finish_steps,
    step,
)
from .protection import CheckpointInfo

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from ..zvm.models import Vpg

__all__ = ["IN_PLACE_NOTE", "RecoveryOption", "RecoveryPlan", "recovery_plan"]

IN_PLACE_NOTE = (
    "Zerto never rolls the production VM back in place: every recovery creates VMs from the "
    "replica at the recovery site. To end up with the VM at the checkpoint in production, fail "
    "over to the checkpoint, commit with reverse protection, then move the VPG back."
)
# Substatuses 14-20 and 29: a failover, move or rollback holds the VPG.
_BUSY_SUBSTATUS = frozenset((14, 15, 16, 17, 18, 19, 20, 29))
_FAILOVER_OPS = ("Failover", "FailoverCommit", "FailoverRollback")
_RESTORE_OPS = ("Restore", "RestoreCommit", "RestoreRollback")


class RecoveryOption(BaseModel):
    """One Zerto operation that brings the VM's data back to the checkpoint."""

    operation: str = Field(description="failover_test, live_failover or journal_vm_restore")
    zerto_api: list[str] = Field(description="the ZVM REST calls involved")
    disruptive: bool = Field(description="true if production is affected")
    affects: str = Field(description="what it touches: test VMs, production downtime, ...")
    what_happens: str
    available: bool = Field(description="whether the tools for it can run now")
    unavailable_reason: str | None = None
    steps: list[RecoveryStep]


class RecoveryPlan(BaseModel):
    """How to bring a VM back to a checkpoint, read-only."""

    vm: str
    vm_id: str
    vpg: str
    vpg_id: str
    site_kind: str
    protected_site: str | None
    recovery_site: str | None
    checkpoint: CheckpointInfo
    vpg_status: str
    vpg_sub_status: str
    failover_test_running: bool
    in_place_rewind: str = Field(description="why there is no in-place rollback, and the way round")
    live_recovery_allowed: bool = Field(description="config recovery.allow_live")
    confirm: str = Field(description="the confirm value the live tools need for this VM/checkpoint")
    options: list[RecoveryOption]
    inspect: list[RecoveryStep] = Field(description="read-only ways to look before acting")
    zvm_site: str | None = Field(
        default=None, description="the estate's site whose ZVM was read (several ZVMs only)"
    )
    zvm_url: str | None = Field(default=None, description="the ZVM the plan was read from")
    operations_zvm: str | None = Field(
        default=None,
        description=(
            "several ZVMs: the ZVM the recovery tools would run on (config recovery.via), "
            "or why none can"
        ),
    )


# ---------------------------------------------------------------- the plan


def recovery_plan(
    zvms: Guard | ZvmClient,
    settings: Settings,
    vm: str,
    checkpoint: str,
    *,
    vpg: str | None = None,
    deadline: float | None = None,
) -> RecoveryPlan:
    """Which Zerto operations bring ``vm`` back to ``checkpoint``; read-only."""
    from ..zvm.models import site_kind

    target = Target(zvms, vm, vpg, deadline, purpose="read", settings=settings)
    v = target.vpg
    found = target.checkpoint(checkpoint)
    names = entity_type_names(target.client, deadline=deadline)
    token = confirm_token(vm, checkpoint)
    operations, no_zvm = _operations_zvm(zvms, settings, target, deadline)
    live_blocked = no_zvm or _live_blocked(settings, v)
    return RecoveryPlan(
        vm=vm,
        vm_id=target.ref.vm_id,
        vpg=v.name,
        vpg_id=v.vpg_id,
        site_kind=site_kind(v.protected_entity, names, settings.guard.site_types),
        protected_site=v.protected_site_name,
        recovery_site=v.recovery_site_name,
        checkpoint=CheckpointInfo.of(found),
        vpg_status=v.status_text,
        vpg_sub_status=v.sub_status_text,
        failover_test_running=v.failover_test_running,
        in_place_rewind=IN_PLACE_NOTE,
        live_recovery_allowed=settings.allow_live_recovery,
        confirm=token,
        options=[
            _test_option(target, checkpoint, no_zvm),
            _failover_option(target, checkpoint, token, live_blocked),
            _restore_option(target, checkpoint, token, live_blocked),
        ],
        zvm_site=target.site,
        zvm_url=target.zvm_url,
        operations_zvm=operations,
        inspect=[
            step(
                "zerto_protection_status",
                {"vm": vm},
                "VPG health, RPO and cadence before acting",
                cli=f"zerto-rewind status {vm}",
            ),
            step(
                "zerto_list_checkpoints",
                {"vm": vm, "tagged_only": True, "since": "1d"},
                "the tagged checkpoints to choose from",
                cli=f"zerto-rewind checkpoints {vm} --tagged --since 1d",
            ),
        ],
    )


def _operations_zvm(
    zvms: Guard | ZvmClient,
    settings: Settings,
    target: Target,
    deadline: float | None,
) -> tuple[str | None, str | None]:
    """(where the recovery tools would run, why they cannot run anywhere): several ZVMs only."""
    from ..errors import ZertoRewindError
    from .sites import locate

    if target.site is None:
        return None, None
    via = f"recovery.via: {settings.recovery_via}; which ZVM Zerto takes it from is UNCONFIRMED"
    try:
        located = locate(zvms, target.vm, deadline=deadline, purpose="recover", settings=settings)
    except ZertoRewindError as exc:
        return f"none: {exc} ({via})", f"no ZVM can run it: {exc}"
    place = next((p for p in located.places if p.ref.vpg_id == target.ref.vpg_id), None)
    if place is None:
        why = "; ".join(located.notes()) or f"no ZVM lists VPG {target.vpg.name!r}"
        return f"none: {why} ({via})", f"no ZVM can run it: {why}"
    return f"the ZVM of site {place.site} ({place.url}) ({via})", None


def _busy(v: Vpg) -> str | None:
    if v.sub_status in _BUSY_SUBSTATUS:
        return f"VPG {v.name!r} is busy ({v.sub_status_text}); commit or roll that back first"
    return None


def _live_blocked(settings: Settings, v: Vpg) -> str | None:
    if not settings.allow_live_recovery:
        return 'disabled by config: an operator must set "recovery": {"allow_live": true}'
    return _busy(v)


def _test_option(target: Target, checkpoint: str, no_zvm: str | None) -> RecoveryOption:
    v = target.vpg
    running = f"a failover test is already running on VPG {v.name!r}; stop it first"
    blocked = no_zvm or _busy(v) or (running if v.failover_test_running else None)
    return RecoveryOption(
        operation="failover_test",
        zerto_api=[f"POST /v1/vpgs/{v.vpg_id}/{op}" for op in ("FailoverTest", "FailoverTestStop")],
        disruptive=False,
        affects=(
            f"creates test VMs at {recovery_site(v)} on the test network; production keeps "
            "running and replication continues"
        ),
        what_happens=(
            "Zerto boots copies of the VPG's VMs from the checkpoint so you can check that it "
            "is good. Stopping the test deletes the test VMs and records the result."
        ),
        available=blocked is None,
        unavailable_reason=blocked,
        steps=[
            step("zerto_start_failover_test", target.args(checkpoint=checkpoint),
                 "start the test from the checkpoint"),
            step("zerto_stop_failover_test",
                 target.args(success=True, summary="checkpoint verified"),
                 "stop it (success=false if the checkpoint was bad); deletes the test VMs"),
        ],
    )  # fmt: skip


def _failover_option(
    target: Target, checkpoint: str, token: str, blocked: str | None
) -> RecoveryOption:
    v = target.vpg
    return RecoveryOption(
        operation="live_failover",
        zerto_api=[f"POST /v1/vpgs/{v.vpg_id}/{op}" for op in _FAILOVER_OPS],
        disruptive=True,
        affects=(
            "production downtime: the protected VMs are shut down and every VM of the VPG "
            f"comes up at {recovery_site(v)} from the checkpoint; data written after the "
            "checkpoint is not in the recovered VMs; commit with reverse_protection=true to "
            "replicate back, which allows a later move back"
        ),
        what_happens=(
            "The VPG waits before commit: check the recovered VMs, then commit (keep them) or "
            "roll back (delete them and return to the state before the failover)."
        ),
        available=blocked is None,
        unavailable_reason=blocked,
        steps=[
            step("zerto_failover",
                 target.args(checkpoint=checkpoint, confirm=token, commit_policy="none"),
                 "fail over to the checkpoint and wait for an explicit commit"),
            *failover_finish_steps(target, token),
        ],
    )  # fmt: skip


def _restore_option(
    target: Target, checkpoint: str, token: str, blocked: str | None
) -> RecoveryOption:
    v, vm_id = target.vpg, target.ref.vm_id
    return RecoveryOption(
        operation="journal_vm_restore",
        zerto_api=[f"POST /v1/vms/{vm_id}/{op}" for op in _RESTORE_OPS],
        disruptive=True,
        affects=(
            f"only {target.vm}: a restored VM is created from the checkpoint; until commit or "
            f"rollback the VPG {v.name!r} waits before commit and takes no new tagged checkpoints"
        ),
        what_happens=(
            "Zerto recreates this one VM from the journal at the checkpoint; commit keeps the "
            "restored VM, rollback discards it."
        ),
        available=blocked is None,
        unavailable_reason=blocked,
        steps=[
            step("zerto_restore_vm", target.args(checkpoint=checkpoint, confirm=token),
                 "restore the VM from the checkpoint"),
            *restore_finish_steps(target, token),
        ],
    )  # fmt: skip
