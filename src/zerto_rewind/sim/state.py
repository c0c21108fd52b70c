"""The in-memory ZVM backend: estate, journals, tasks, tokens and counters.

:class:`World` is the estate (sites, VMs, VPGs, journals), shared by every ZVM of a
run; :class:`Backend` is one ZVM's view of it, with its own tokens, tasks and
counters. Handlers call its domain methods under :attr:`Backend.lock` (the world's,
one for all ZVMs); the methods raise :class:`~zerto_rewind.sim.errors.SimError` with
the body the real ZVM would send.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from zerto_rewind.sim import enums
from zerto_rewind.sim.auth import Credentials, TokenStore
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.errors import bad_request, not_found
from zerto_rewind.sim.estate import (
    Estate,
    EstateError,
    VmSpec,
    VpgSpec,
    default_estate,
    generated_sites,
    generated_vpgs,
    load_estate,
)
from zerto_rewind.sim.journal import Checkpoint, Journal, JournalParams
from zerto_rewind.sim.models import Site, TagBehaviour, Vm, Vpg, stable_guid
from zerto_rewind.sim.tasks import Task, TaskBook

if TYPE_CHECKING:
    from zerto_rewind.sim.replica import Replica

MAX_TAG_LENGTH = 128
# CompleteReason of a tag task failed by the ``fail`` tag behaviour without a reason.
TAG_TASK_FAILURE = "Failed to insert tagged checkpoint: the VRA did not acknowledge the request"


@dataclass
class Stats:
    """Counters served by ``GET /_sim/stats``."""

    token_requests: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    tag_requests: Counter[str] = field(default_factory=Counter)
    checkpoints_listed: int = 0
    unauthorized: int = 0

    def to_json(self) -> dict[str, Any]:
        """The counters as JSON."""
        return {
            "token_requests": {
                "total": sum(self.token_requests.values()),
                "by_grant": dict(self.token_requests),
            },
            "requests": dict(self.requests),
            "tag_requests": dict(self.tag_requests),
            "checkpoints_listed": self.checkpoints_listed,
            "unauthorized": self.unauthorized,
        }


class World:
    """The estate every ZVM of one run shares: sites, VMs, VPGs and their journals.

    One journal per VPG, whichever ZVM shows it, so a tag taken through one site is
    in the journal seen from the other. Rebuilt in place by :meth:`build`.
    """

    def __init__(self, config: SimConfig, estate: Estate | None = None) -> None:
        self.config = config
        self.lock = threading.RLock()
        self.clock = config.clock
        self.status_names = (
            enums.STATUSES_DOCS if config.status_numbering == "docs" else enums.STATUSES_COMMUNITY
        )
        self.estate = estate or load_config_estate(config)
        self.views: list[Backend] = []
        # Kept VM states of a linked vCenter (``--vcenter``); None without a link.
        self.replica: Replica | None = None
        self.build()

    def build(self) -> None:
        """Fresh sites, VPGs and journals (same ids), and an empty VM-action record."""
        estate = self.estate
        self.rng = random.Random(self.config.seed)
        self.vm_actions: list[dict[str, Any]] = []
        self.site_list = [
            Site(stable_guid("site", s.name), s.name, s.kind) for s in (estate.local, *estate.peers)
        ]
        self.local = self.site_list[0]
        self.sites = {s.name.lower(): s for s in self.site_list}
        self.vpgs: dict[str, Vpg] = {}
        self.vpgs_by_name: dict[str, Vpg] = {}
        self.vm_rows: dict[str, list[tuple[Vm, Vpg]]] = {}
        self.vm_rows_by_id: dict[str, list[tuple[Vm, Vpg]]] = {}
        self._vms: dict[tuple[str, str], Vm] = {}
        self._morefs: Counter[str] = Counter()
        for spec in estate.vpgs:
            self._add_vpg(spec)

    def _site_for(self, name: str | None, kind: str, *, protected: Site | None) -> Site:
        if name is not None:
            return self.sites[name.lower()]
        peers = self.site_list[1:]
        if protected is None:
            if self.local.kind == kind:
                return self.local
            return next((p for p in peers if p.kind == kind), None) or self._peer(kind)
        if protected is not self.local:
            return self.local
        return next((p for p in peers if p.kind == "vcenter"), None) or self._peer("vcenter")

    def _peer(self, kind: str) -> Site:
        site = Site(stable_guid("site", f"{kind}-peer"), f"{kind}-peer", kind)
        self.site_list.append(site)
        self.sites[site.name.lower()] = site
        return site

    def _vm(self, spec: VmSpec, site: Site) -> Vm:
        if spec.vcenter_id is not None:  # the identity a test gave: one VM per moref
            key = (site.identifier, f"id:{spec.vcenter_id}")
            if key not in self._vms:
                identifier = f"{spec.server_id or site.identifier}.{spec.vcenter_id}"
                self._vms[key] = Vm(identifier, spec.name, site, spec.instance_uuid)
            elif self._vms[key].name != spec.name:
                msg = f"vcenter_id {spec.vcenter_id!r} is given to two VM names on one site"
                raise EstateError(msg)
            return self._vms[key]
        key = (site.identifier, spec.name.lower())
        if key not in self._vms:
            self._morefs[site.identifier] += 1
            moref = f"vm-{100 + self._morefs[site.identifier]}"
            self._vms[key] = Vm(f"{site.identifier}.{moref}", spec.name, site, spec.instance_uuid)
        return self._vms[key]

    def _add_vpg(self, spec: VpgSpec) -> None:
        protected = self._site_for(spec.protected_site, spec.site_kind, protected=None)
        recovery = self._site_for(spec.recovery_site, spec.site_kind, protected=protected)
        status = enums.MEETING_SLA if spec.status is None else spec.status
        sub = enums.SUB_NONE if spec.sub_status is None else spec.sub_status
        cadence = spec.cadence_s or self.config.cadence_for(protected.kind)
        history = spec.history_minutes or self.config.history_minutes
        vpg = Vpg(
            identifier=stable_guid("vpg", spec.name),
            name=spec.name,
            protected=protected,
            recovery=recovery,
            vms=[self._vm(vm, protected) for vm in spec.entries()],
            status=status,
            sub_status=sub,
            journal=self._journal(cadence, history * 60.0, status, sub),
            history_minutes=history,
            rpo_seconds=spec.rpo_seconds or max(300, int(2 * cadence)),
            priority=spec.priority,
        )
        self.vpgs[vpg.identifier] = vpg
        self.vpgs_by_name[vpg.name.lower()] = vpg
        index_rows(self.vm_rows, self.vm_rows_by_id, vpg)

    def _journal(self, cadence: float, history_s: float, status: int, sub: int) -> Journal:
        never_wrote = status == enums.INITIALIZING or sub in (1, 2, 3)
        params = JournalParams(
            cadence_s=cadence,
            history_s=history_s,
            jitter_fraction=self.config.jitter,
            jitter_cap_s=self.config.jitter_cap_s,
            seed=self.rng.getrandbits(62),
            base_id=self.rng.randrange(100_000, 900_000),
            writing=not never_wrote,
        )
        refused = enums.tag_refusal(status, sub, self.status_names) is not None
        # A paused or broken VPG keeps the history it wrote before it stopped.
        stopped_for = min(600.0, history_s / 2) if refused and not never_wrote else None
        return Journal.start(params, self.clock, stopped_for_s=stopped_for)

    def vpg_named(self, name: str) -> Vpg:
        """A VPG of the estate by name (case-insensitive), or 404."""
        return _found(self.vpgs_by_name.get(name.lower()), f"VPG named {name!r} was not found")


def _found(vpg: Vpg | None, missing: str) -> Vpg:
    """``vpg``, or a 404 that says ``missing``."""
    if vpg is None:
        raise not_found(missing)
    return vpg


def load_config_estate(config: SimConfig) -> Estate:
    """The estate a config names (file or built-in), plus its ``--vms`` generated VPGs."""
    base = load_estate(config.estate_file) if config.estate_file else default_estate()
    between = generated_sites(base)
    extra = generated_vpgs(config.vms, config.vms_per_vpg, between=between)
    return replace(base, vpgs=base.vpgs + extra)


def index_rows(
    by_name: dict[str, list[tuple[Vm, Vpg]]], by_id: dict[str, list[tuple[Vm, Vpg]]], vpg: Vpg
) -> None:
    """Add a VPG's (VM, VPG) rows to the name and identifier indexes."""
    for vm in vpg.vms:
        by_name.setdefault(vm.name.lower(), []).append((vm, vpg))
        by_id.setdefault(vm.identifier.lower(), []).append((vm, vpg))


class Backend:
    """What one simulated ZVM knows: its view of the shared :class:`World`.

    Without ``site`` it is the single ZVM of a one-ZVM estate: the estate's local
    site, seeing every VPG. With ``site`` (a multi-site estate) it is that site's
    ZVM: it shows the VPGs protected from it or recovering to it, and keeps its own
    tokens, tasks and counters. Rebuilt in place by :meth:`reset`.
    """

    def __init__(
        self,
        config: SimConfig,
        *,
        world: World | None = None,
        site: str | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.config = config
        self.world = world or World(config)
        self.lock = self.world.lock
        self.clock = config.clock
        self.status_names = self.world.status_names
        self.site_name = site
        self.tokens = TokenStore(config, credentials)
        self.world.views.append(self)
        self._refresh()

    def reset(self) -> None:
        """Fresh estate, journals, tasks, counters and VM-action record (tokens stay).

        The estate is shared, so every ZVM of the run is reset with it.
        """
        with self.lock:
            self.world.build()
            for view in self.world.views:
                view._refresh()

    @property
    def vm_actions(self) -> list[dict[str, Any]]:
        """The record of VM changes (one for the whole run)."""
        return self.world.vm_actions

    def _refresh(self) -> None:
        world = self.world
        self.stats = Stats()
        if self.site_name is None:
            self.local = world.local
            self.peers = world.site_list[1:]
            self.vpgs, self.vpgs_by_name = world.vpgs, world.vpgs_by_name
            self.vm_rows, self.vm_rows_by_id = world.vm_rows, world.vm_rows_by_id
        else:
            self._view_of(world.sites[self.site_name.lower()])
        self.tasks = TaskBook(self.local.identifier)

    def _view_of(self, local: Site) -> None:
        """Index the VPGs this site protects or recovers (a swap on failover keeps both)."""
        world = self.world
        self.local = local
        mine = [v for v in world.vpgs.values() if local in (v.protected, v.recovery)]
        self.vpgs = {v.identifier: v for v in mine}
        self.vpgs_by_name = {v.name.lower(): v for v in mine}
        self.vm_rows, self.vm_rows_by_id = {}, {}
        for vpg in mine:
            index_rows(self.vm_rows, self.vm_rows_by_id, vpg)
        declared = world.estate.site(local.name).peers
        if declared is not None:
            self.peers = [world.sites[name.lower()] for name in declared]
        else:
            paired = {s.identifier for v in mine for s in (v.protected, v.recovery)}
            self.peers = [s for s in world.site_list if s is not local and s.identifier in paired]

    def accepts(self, vpg: Vpg, what: str) -> str | None:
        """Why this ZVM refuses a tag / recovery operation on a paired VPG, or None.

        Which side real Zerto accepts these from is UNCONFIRMED; a multi-site estate
        chooses with ``tag_accepted_by`` / ``recovery_accepted_by``.
        """
        if self.site_name is None:
            return None
        estate = self.world.estate
        side = estate.tag_accepted_by if what == "tag" else estate.recovery_accepted_by
        if side == "both" or getattr(vpg, side) is self.local:
            return None
        there = vpg.protected if side == "protected" else vpg.recovery
        action = "insert a checkpoint" if what == "tag" else "run a recovery operation"
        return (
            f"Cannot {action} on VPG '{vpg.name}' from site '{self.local.name}':"
            f" use the ZVM of its {side} site '{there.name}'"
        )

    # -- lookups ------------------------------------------------------------------

    def vpg(self, identifier: str) -> Vpg:
        """A VPG by identifier, or 404."""
        found = self.vpgs.get(identifier.lower())
        return _found(found, f"VPG with identifier {identifier} was not found")

    def vpg_named(self, name: str) -> Vpg:
        """A VPG of the estate by name, whichever ZVM shows it (control plane, tests); or 404."""
        return self.world.vpg_named(name)

    def find_vms(
        self, vm_name: str | None, vpg_name: str | None, vm_id: str | None
    ) -> list[tuple[Vm, Vpg]]:
        """VM rows, one per (VM, VPG) pair, filtered case-insensitively by exact value."""
        if vm_name is not None:
            rows = self.vm_rows.get(vm_name.lower(), [])
        elif vm_id is not None:
            rows = self.vm_rows_by_id.get(vm_id.lower(), [])
        elif vpg_name is not None:
            vpg = self.vpgs_by_name.get(vpg_name.lower())
            rows = [(vm, vpg) for vm in vpg.vms] if vpg else []
        else:
            rows = [(vm, vpg) for vpg in self.vpgs.values() for vm in vpg.vms]
        return [
            (vm, vpg)
            for vm, vpg in rows
            if (vpg_name is None or vpg.name.lower() == vpg_name.lower())
            and (vm_id is None or vm.identifier.lower() == vm_id.lower())
        ]

    def vm_row(self, vm_id: str, vpg_id: str | None) -> tuple[Vm, Vpg]:
        """The row of one VM; 400 when it is in several VPGs and none is named."""
        rows = self.vm_rows_by_id.get(vm_id.lower(), [])
        if vpg_id is not None:
            rows = [row for row in rows if row[1].identifier == vpg_id.lower()]
        if not rows:
            msg = f"VM with identifier {vm_id} was not found"
            raise not_found(msg)
        if len(rows) > 1:
            msg = "the VM is in Multiple VPGs, try specifying vpgidentifier"
            raise bad_request(msg)
        return rows[0]

    def task(self, identifier: str) -> Task:
        """A task by identifier, or 404."""
        found = self.tasks.get(identifier)
        if found is None:
            msg = f"Task with identifier {identifier} was not found"
            raise not_found(msg)
        return found

    # -- VPG state ----------------------------------------------------------------

    def effective_status(self, vpg: Vpg) -> int:
        """The Status shown: a healthy VPG past its RPO reads RpoNotMeetingSLA."""
        if vpg.status != enums.MEETING_SLA or vpg.sub_status != enums.SUB_NONE:
            return vpg.status
        latest = vpg.journal.latest()
        if latest is not None and self.clock() - latest.timestamp > vpg.rpo_seconds:
            return self.status_names.index("RpoNotMeetingSLA")
        return vpg.status

    def set_state(self, vpg: Vpg, status: int, sub_status: int) -> None:
        """Move a VPG to a state; the journal writes only while tags are possible."""
        vpg.status, vpg.sub_status = status, sub_status
        vpg.journal.set_writing(self.refusal(vpg) is None)

    def refusal(self, vpg: Vpg) -> str | None:
        """Why this VPG cannot take a tagged checkpoint now, or None."""
        reason = enums.tag_refusal(vpg.status, vpg.sub_status, self.status_names)
        if reason is None:
            return None
        if vpg.sub_status in (enums.SUB_PAUSED_USER, enums.SUB_PAUSED_SYSTEM):
            what = "replication is paused"
        elif vpg.sub_status in (1, 3) or vpg.status == enums.INITIALIZING:
            what = "is in initial sync"
        else:
            what = "is not protecting"
        return f"Cannot insert a checkpoint: VPG '{vpg.name}' {what} ({reason})"

    # -- checkpoints --------------------------------------------------------------

    def checkpoints(self, vpg: Vpg, start: float | None, end: float | None) -> list[Checkpoint]:
        """Checkpoints of a VPG in ``[start, end]``, oldest first."""
        found = vpg.journal.list(start, end)
        self.stats.checkpoints_listed += len(found)
        return found

    def checkpoint(self, vpg: Vpg, identifier: str | None) -> Checkpoint:
        """A checkpoint by id, the latest when None; 400 when unknown."""
        found = vpg.journal.latest() if identifier is None else vpg.journal.find(identifier)
        if found is None:
            what = "no checkpoint" if identifier is None else f"checkpoint {identifier}"
            msg = f"VPG '{vpg.name}' has {what} in its journal"
            raise bad_request(msg)
        return found

    def tag(self, vpg: Vpg, name: object) -> Task:
        """Request a tagged checkpoint; the task fails when the VPG cannot take one."""
        if not isinstance(name, str) or not name.strip():
            msg = "checkpointName is required"
            raise bad_request(msg)
        if len(name) > MAX_TAG_LENGTH:
            msg = f"checkpointName must be at most {MAX_TAG_LENGTH} characters"
            raise bad_request(msg)
        self.stats.tag_requests[vpg.name] += 1
        refused = self.accepts(vpg, "tag")
        if refused is not None:
            raise bad_request(refused)
        now = self.clock()
        reason = self.refusal(vpg)
        if reason is None and vpg.tag_behaviour.mode == "fail":
            reason = vpg.tag_behaviour.reason or TAG_TASK_FAILURE
            self._consume(vpg)
        elif reason is None:
            self._schedule_tag(vpg, name, now)
            if self.world.replica is not None:  # keep the VMs' state from before the tag
                self.world.replica.notice()
        return self.new_task("InsertTaggedCP", vpg, reason)

    def _schedule_tag(self, vpg: Vpg, name: str, now: float) -> None:
        boundary = vpg.journal.next_boundary(now)
        behaviour = vpg.tag_behaviour
        if boundary is None or behaviour.mode == "never":
            self._consume(vpg)
            return
        extra = behaviour.extra_delay_s if behaviour.mode == "late" else 0.0
        vpg.journal.add_tag(name, boundary + self.config.tag_lag_s + extra)
        self._consume(vpg)

    @staticmethod
    def _consume(vpg: Vpg) -> None:
        behaviour = vpg.tag_behaviour
        if behaviour.mode == "normal" or behaviour.remaining is None:
            return
        behaviour.remaining -= 1
        if behaviour.remaining <= 0:
            vpg.tag_behaviour = TagBehaviour()

    def new_task(self, kind: str, vpg: Vpg, fail_reason: str | None = None) -> Task:
        """Start a task on a VPG that finishes after the configured duration."""
        return self.tasks.create(
            kind=kind,
            now=self.clock(),
            duration=self.config.task_duration_s,
            vpg_ids=(vpg.identifier,),
            fail_reason=fail_reason,
        )
