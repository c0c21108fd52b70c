"""A VM's protection as Zerto sees it, and its checkpoints: library for the MCP server and CLI.

Read-only: every function here only reads from the ZVM (and, for the guard's
own tag, peeks at the state directory without locking or writing).

Example::

    status = protection_status(guard, settings, "jp-ubuntu", deadline=time.monotonic() + 30)
    listing = checkpoint_listing(guard, "jp-ubuntu", since="30m", tagged_only=True)

``guard`` (a :class:`~zerto_rewind.core.guard.Guard`) is the estate: the VM is found
on every ZVM and each VPG read on one site's ZVM (:mod:`~zerto_rewind.recovery.sites`),
named in ``zvm_site``. A lone ``ZvmClient`` works too: one ZVM, as before the estate.

The result types are pydantic models so that the MCP server can hand them to
the model as structured content; the ZVM client (and httpx) is imported only
when a function runs, never at import time.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..core.cadence import observed_cadence, resolve_cadence
from ..core.decision import fmt_time
from ..core.guard import entity_type_names
from ..errors import AmbiguousVm, UsageError
from .sites import locate, vm_refs

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..core.state import GuardStateLike, VpgRecord
    from ..zvm.client import ZvmClient
    from ..zvm.models import Checkpoint, VmRef, Vpg

__all__ = [
    "CheckpointInfo",
    "CheckpointListing",
    "GuardTag",
    "ProtectionStatus",
    "VpgCheckpoints",
    "VpgProtection",
    "checkpoint_listing",
    "observe_cadence",
    "parse_since",
    "protection_status",
    "select_ref",
    "vm_refs",
]

# Checkpoints listed to measure a cadence: this many site-default cadences back
# (the guard's tagging module looks back the same way).
CADENCE_WINDOW_STEPS = 12
DEFAULT_SINCE = "1h"
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# ---------------------------------------------------------------- result models


class CheckpointInfo(BaseModel):
    """One journal checkpoint."""

    checkpoint_id: str = Field(description="CheckpointIdentifier; pass it to the recovery tools")
    timestamp: str = Field(description="when the checkpoint was written, ISO-8601 UTC")
    tag: str | None = Field(default=None, description="the tag text of a tagged checkpoint")

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> CheckpointInfo:
        """From the ZVM client's model."""
        return cls(
            checkpoint_id=checkpoint.cp_id,
            timestamp=fmt_time(checkpoint.timestamp.timestamp()),
            tag=checkpoint.tag,
        )


class GuardTag(BaseModel):
    """The last tag zerto-rewind's guard requested on a VPG, from its state directory."""

    name: str
    state: str = Field(description="requested (not in the journal yet), landed, or failed")
    requested_at: str
    expected_at: str = Field(description="when the guard expects it in the journal")
    landed_at: str | None = None
    checkpoint_id: str | None = None
    changes_allowed_since_landing: int = Field(
        description="mutating calls allowed on this checkpoint; 0 means it can still be reused"
    )
    reason: str | None = Field(default=None, description="why it failed, if it did")

    @classmethod
    def of(cls, record: VpgRecord) -> GuardTag | None:
        """From a VPG record; None when the guard never tagged this VPG."""
        tag = record.tag
        if tag is None:
            return None
        return cls(
            name=tag.name,
            state=tag.state,
            requested_at=fmt_time(tag.requested_at),
            expected_at=fmt_time(tag.expected_at),
            landed_at=fmt_time(tag.landed_at) if tag.landed_at else None,
            checkpoint_id=tag.checkpoint_id,
            changes_allowed_since_landing=record.allowed_since_landing,
            reason=tag.reason,
        )


class VpgProtection(BaseModel):
    """One VPG that protects the VM."""

    vpg: str = Field(description="VPG name")
    vpg_id: str
    vm_id: str
    protected_site: str | None
    recovery_site: str | None
    site_kind: str = Field(description="protected-site type: vcenter, hyperv, aws, azure, ...")
    status: str = Field(description="VPG status name, e.g. MeetingSLA")
    status_code: int = Field(description="the ZVM's VPG Status number")
    sub_status: str = Field(description="VPG substatus name, e.g. None, ReplicationPaused...")
    sub_status_code: int = Field(description="the ZVM's VPG SubStatus number")
    actual_rpo_s: int | None = Field(description="seconds since the latest recoverable checkpoint")
    configured_rpo_s: int | None = Field(description="the RPO alert threshold, not a cadence")
    history_minutes: int | None = Field(description="how far back the journal reaches")
    cadence_s: float = Field(description="seconds between journal checkpoints")
    cadence_source: str = Field(description="observed, config, or site:<kind> (a default)")
    latest_checkpoint: CheckpointInfo | None
    latest_tagged_checkpoint: CheckpointInfo | None = Field(
        description="the newest tagged checkpoint within the cadence window, if any"
    )
    can_tag: bool = Field(description="whether the VPG can take a tagged checkpoint now")
    tag_refusal: str | None = Field(description="why it cannot, and what to do")
    failover_test_running: bool
    guard_tag: GuardTag | None = Field(description="the guard's last tag on this VPG, if any")
    zvm_site: str | None = Field(
        default=None, description="the estate's site whose ZVM was read (several ZVMs only)"
    )
    zvm_url: str | None = Field(default=None, description="the ZVM this VPG was read from")


class ProtectionStatus(BaseModel):
    """Every VPG that protects a VM."""

    vm: str
    zvm_url: str = Field(description="the ZVM asked (several sites: each VPG's zvm_url)")
    vpgs: list[VpgProtection]
    notes: list[str] = Field(
        default_factory=list,
        description="sites whose ZVM did not answer, and VPGs no answering ZVM could show",
    )


class VpgCheckpoints(BaseModel):
    """The checkpoints of one of the VM's VPGs, newest first."""

    vpg: str
    vpg_id: str
    zvm_site: str | None = Field(
        default=None, description="the estate's site whose ZVM listed them (several ZVMs only)"
    )
    total: int = Field(description="checkpoints matching the filter")
    truncated: bool = Field(description="true when only the newest `limit` are listed")
    checkpoints: list[CheckpointInfo]


class CheckpointListing(BaseModel):
    """A VM's checkpoints since a time."""

    vm: str
    since: str = Field(description="the start of the listing, ISO-8601 UTC")
    tagged_only: bool
    vpgs: list[VpgCheckpoints]
    notes: list[str] = Field(
        default_factory=list,
        description="sites whose ZVM did not answer, and VPGs no answering ZVM could list",
    )


# ---------------------------------------------------------------- lookups


def select_ref(refs: list[VmRef], vm: str, vpg: str | None) -> VmRef:
    """The one (VM, VPG) pair to act on: ``vpg`` (name or id) picks it when there are several."""
    names = ", ".join(repr(r.vpg_name) for r in refs)
    if vpg:
        wanted = vpg.casefold()
        for ref in refs:
            if wanted in (ref.vpg_name.casefold(), ref.vpg_id.casefold()):
                return ref
        msg = f"VM {vm!r} is not protected by a VPG {vpg!r}; its VPGs are {names}"
        raise UsageError(msg)
    if len(refs) > 1:
        msg = f"VM {vm!r} is protected by several VPGs ({names}); pass vpg= one of them"
        raise AmbiguousVm(msg)
    return refs[0]


def observe_cadence(
    settings: Settings,
    client: ZvmClient,
    vpg: Vpg,
    kind: str,
    *,
    now: float,
    deadline: float | None,
) -> tuple[float, str, list[Checkpoint]]:
    """(cadence seconds, source, the checkpoints listed to measure it), oldest first."""
    guard = settings.guard
    window = CADENCE_WINDOW_STEPS * guard.site_cadence_s.get(kind, 630.0)
    since = datetime.fromtimestamp(now - window, UTC)
    listed = client.list_checkpoints(vpg.vpg_id, since=since, deadline=deadline)
    observed = observed_cadence([c.timestamp.timestamp() for c in listed if not c.tag])
    cadence = resolve_cadence(
        vpg.name, observed, kind, overrides=guard.cadence_s, site_defaults=guard.site_cadence_s
    )
    return cadence.seconds, cadence.source, listed


# ---------------------------------------------------------------- protection status


def protection_status(
    zvms: Guard | ZvmClient,
    settings: Settings,
    vm: str,
    *,
    state: GuardStateLike | None = None,
    deadline: float | None = None,
    now: float | None = None,
) -> ProtectionStatus:
    """Every VPG protecting ``vm``: sites, health, RPO, cadence, latest checkpoints."""
    now = time.time() if now is None else now
    located = locate(zvms, vm, deadline=deadline, settings=settings)
    names: dict[str, list[str] | None] = {}
    rows = []
    for place in located.places:
        if place.url not in names:
            names[place.url] = entity_type_names(place.client, deadline=deadline)
        row = _vpg_protection(
            place.client, settings, place.ref, names[place.url], state, now, deadline
        )
        row.zvm_site, row.zvm_url = place.site if located.several_sites else None, place.url
        rows.append(row)
    first = located.places[0]
    return ProtectionStatus(
        vm=first.ref.vm_name, zvm_url=first.url, vpgs=rows, notes=located.notes()
    )


def _vpg_protection(
    client: ZvmClient,
    settings: Settings,
    ref: VmRef,
    names: list[str] | None,
    state: GuardStateLike | None,
    now: float,
    deadline: float | None,
) -> VpgProtection:
    from ..zvm.models import site_kind, tag_refusal

    vpg = client.get_vpg(ref.vpg_id, deadline=deadline)
    kind = site_kind(vpg.protected_entity, names, settings.guard.site_types)
    cadence_s, source, listed = observe_cadence(
        settings, client, vpg, kind, now=now, deadline=deadline
    )
    latest = listed[-1] if listed else client.checkpoint_stats(vpg.vpg_id, deadline=deadline)[1]
    tagged = [c for c in listed if c.tag]
    refusal = tag_refusal(vpg)
    return VpgProtection(
        vpg=vpg.name,
        vpg_id=vpg.vpg_id,
        vm_id=ref.vm_id,
        protected_site=vpg.protected_site_name,
        recovery_site=vpg.recovery_site_name,
        site_kind=kind,
        status=vpg.status_text,
        status_code=vpg.status,
        sub_status=vpg.sub_status_text,
        sub_status_code=vpg.sub_status,
        actual_rpo_s=vpg.actual_rpo_s,
        configured_rpo_s=vpg.configured_rpo_s,
        history_minutes=vpg.history_minutes,
        cadence_s=cadence_s,
        cadence_source=source,
        latest_checkpoint=CheckpointInfo.of(latest) if latest else None,
        latest_tagged_checkpoint=CheckpointInfo.of(tagged[-1]) if tagged else None,
        can_tag=refusal is None,
        tag_refusal=refusal,
        failover_test_running=vpg.failover_test_running,
        guard_tag=GuardTag.of(state.peek_vpg(vpg.vpg_id)) if state is not None else None,
    )


# ---------------------------------------------------------------- checkpoints


def parse_since(text: str, now: float | None = None) -> datetime:
    """``90s`` / ``30m`` / ``2h`` / ``1d`` back from now, or an ISO-8601 time; UsageError else."""
    from ..zvm.models import parse_iso

    now = time.time() if now is None else now
    relative = _RELATIVE.match(text)
    if relative:
        seconds = float(relative[1]) * _UNIT_S[relative[2].lower()]
        return datetime.fromtimestamp(now, UTC) - timedelta(seconds=seconds)
    try:
        return parse_iso(text)
    except ValueError:
        msg = (
            f"since={text!r} is neither a duration back from now (90s, 30m, 2h, 1d) "
            "nor an ISO-8601 time such as 2026-01-31T09:30:00Z"
        )
        raise UsageError(msg) from None


def checkpoint_listing(
    zvms: Guard | ZvmClient,
    vm: str,
    *,
    since: str | None = None,
    tagged_only: bool = False,
    vpg: str | None = None,
    limit: int | None = 50,
    deadline: float | None = None,
    now: float | None = None,
) -> CheckpointListing:
    """The checkpoints of each of ``vm``'s VPGs (or of ``vpg``) since ``since``, newest first.

    ``limit`` caps each VPG's list (``None``: all of them).
    """
    if limit is not None and limit < 1:
        msg = f"limit must be at least 1, not {limit}"
        raise UsageError(msg)
    start = parse_since(since or DEFAULT_SINCE, now)
    located = locate(zvms, vm, deadline=deadline)
    refs = located.refs
    if vpg:
        located.require_choice(vpg)
        refs = [select_ref(refs, vm, vpg)]
    groups = []
    for ref in refs:
        place = located.place(ref.vpg_id)
        listed = place.client.list_checkpoints(ref.vpg_id, since=start, deadline=deadline)
        matching = [c for c in reversed(listed) if c.tag or not tagged_only]
        groups.append(
            VpgCheckpoints(
                vpg=ref.vpg_name,
                vpg_id=ref.vpg_id,
                zvm_site=place.site if located.several_sites else None,
                total=len(matching),
                truncated=limit is not None and len(matching) > limit,
                checkpoints=[CheckpointInfo.of(c) for c in matching[:limit]],
            )
        )
    return CheckpointListing(
        vm=refs[0].vm_name,
        since=fmt_time(start.timestamp()),
        tagged_only=tagged_only,
        vpgs=groups,
        notes=located.notes(),
    )
