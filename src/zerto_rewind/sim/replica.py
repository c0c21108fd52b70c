"""The simulator's stand-in for Zerto's replica: VM states kept from a linked vCenter.

A worker thread reads every linked VM from the vCenter at the journal's cadence, at start
and as soon as a tag is asked for, and keeps a timeline of what it saw. The state of a VM
at a checkpoint is the last one seen at or before the checkpoint's time. A journal VM
restore's commit hands the worker a job: read the VM, work out the steps back to the kept
state (:func:`~zerto_rewind.sim.vmstate.restore_steps`), apply them, read the VM again and
say what vCenter did not take. The commit's task runs until the job is done.
"""

from __future__ import annotations

import bisect
import logging
import queue
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from zerto_rewind.sim.estate import Estate, EstateError, VmSpec, VpgSpec
from zerto_rewind.sim.vmstate import VcenterLink, VmRef, VmState, differences, restore_steps

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from zerto_rewind.sim.models import Vpg

log = logging.getLogger("zerto_rewind.sim")

# Read failures in a row before the worker says so in the log (once, then on recovery).
_QUIET_FAILURES = 3
_MIN_INTERVAL_S = 0.5


@dataclass
class RestoreJob:
    """One VM put back to a kept state; ``outcome`` is None until the worker is done."""

    vm_id: str
    target: VmState
    outcome: tuple[float, str | None] | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def result(self) -> tuple[float, str | None] | None:
        """(when it finished, why it failed or None); None while it runs (a task's wait)."""
        return self.outcome


@dataclass
class _Timeline:
    times: list[float] = field(default_factory=list)
    states: list[VmState] = field(default_factory=list)


class Replica:
    """Kept states of the linked VMs (by VmIdentifier) and the worker that reads and
    restores them. Without a link the simulator has none of this."""

    def __init__(
        self,
        link: VcenterLink,
        vms: dict[str, VmRef],
        clock: Callable[[], float],
        interval_s: float,
        history_s: float,
    ) -> None:
        self.link = link
        self.vms = vms
        self.clock = clock
        self.interval_s = interval_s
        self.history_s = history_s
        self._timelines: dict[str, _Timeline] = {vm_id: _Timeline() for vm_id in vms}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._jobs: queue.SimpleQueue[RestoreJob] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._failures = 0
        self.restores: list[dict[str, object]] = []

    def linked(self, vm_id: str) -> bool:
        """Whether the VM is one the vCenter shows."""
        return vm_id in self.vms

    # -- observing ----------------------------------------------------------------

    def observe(self) -> None:
        """Read every linked VM once and keep what changed; a failed read keeps nothing."""
        for vm_id, ref in self.vms.items():
            try:
                state = self.link.snapshot(ref)
            # The client's faults, ssl and socket errors alike: this round is skipped.
            except Exception as exc:
                self._read_failed(ref, exc)
                continue
            self._keep(vm_id, self.clock(), state)
            if self._failures >= _QUIET_FAILURES:
                log.warning("vCenter link: reading VMs works again")
            self._failures = 0

    def _read_failed(self, ref: VmRef, exc: BaseException) -> None:
        self._failures += 1
        if self._failures == _QUIET_FAILURES:
            log.warning("vCenter link: cannot read VM %s (%s)", ref.name, type(exc).__name__)

    def _keep(self, vm_id: str, at: float, state: VmState) -> None:
        """Add a reading stamped after it was read, so it never claims a time before it.

        Consecutive equal states are one entry; entries older than the journal's history
        go, except the last one before it (the state at the oldest checkpoint)."""
        with self._lock:
            line = self._timelines[vm_id]
            if line.states and line.states[-1] == state:
                return
            line.times.append(at)
            line.states.append(state)
            cut = bisect.bisect_left(line.times, at - self.history_s) - 1
            if cut > 0:
                del line.times[:cut], line.states[:cut]

    def state_at(self, vm_id: str, at: float) -> VmState | None:
        """The VM's state at time ``at``: the last reading at or before it (None: no reading
        that old, the checkpoint is older than the link)."""
        with self._lock:
            line = self._timelines.get(vm_id)
            if line is None:
                return None
            index = bisect.bisect_right(line.times, at) - 1
            return line.states[index] if index >= 0 else None

    def first_reading(self, vm_id: str) -> float | None:
        """When the VM was first read (None: never)."""
        with self._lock:
            line = self._timelines.get(vm_id)
            return line.times[0] if line is not None and line.times else None

    def to_json(self) -> dict[str, object]:
        """The control plane's view: each linked VM's identity, first reading and latest
        kept state, and the restores done (oldest first)."""
        vms: dict[str, object] = {}
        with self._lock:
            for vm_id, ref in self.vms.items():
                line = self._timelines[vm_id]
                vms[vm_id] = {
                    "name": ref.name,
                    "moref": ref.moref,
                    "instance_uuid": ref.instance_uuid,
                    "first_reading": line.times[0] if line.times else None,
                    "latest": line.states[-1].to_json() if line.states else None,
                }
        return {"linked": True, "vms": vms, "restores": list(self.restores)}

    def notice(self) -> None:
        """Read the VMs now (a tag was asked for): the worker wakes at once."""
        self._wake.set()

    # -- restoring ----------------------------------------------------------------

    def restore(self, vm_id: str, target: VmState) -> RestoreJob:
        """Queue putting a VM back to ``target``; the job says when it is done."""
        job = RestoreJob(vm_id, target)
        self._jobs.put(job)
        self._wake.set()
        return job

    def run_job(self, job: RestoreJob) -> None:
        """Read, apply the steps back, read again; the outcome names what failed."""
        ref = self.vms[job.vm_id]
        failure: str | None = None
        try:
            steps = restore_steps(self.link.snapshot(ref), job.target)
            self.link.apply(ref, steps)
            after = self.link.snapshot(ref)
            self._keep(job.vm_id, self.clock(), after)
            left = differences(after, job.target)
            if left:
                failure = f"vCenter did not take all of the restore of VM '{ref.name}': " + (
                    "; ".join(left)
                )
        # Whatever the client raises ends the job, as a failed task saying so.
        except Exception as exc:
            failure = f"Restoring VM '{ref.name}' in vCenter failed: {type(exc).__name__}: {exc}"
        job.outcome = (self.clock(), failure)
        job.done.set()
        self.restores.append({"vm": ref.name, "moref": ref.moref, "failure": failure})

    # -- the worker ---------------------------------------------------------------

    def start(self) -> None:
        """Read once now, then keep reading and restoring in a daemon thread."""
        self.observe()
        self._thread = threading.Thread(target=self._run, name="zerto-sim-vcenter", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            while not self._jobs.empty():
                self.run_job(self._jobs.get())
            self.observe()

    def stop(self) -> None:
        """Stop the worker and log out of vCenter."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            self.link.close()
        except Exception:  # a vCenter that is gone: nothing to log out of
            log.debug("vCenter link: logout failed")


def link_estate(estate: Estate, link: VcenterLink) -> tuple[Estate, dict[str, str]]:
    """The estate with the local site's VMs given their vCenter identity, and the names of
    the VMs linked (moref by VM name). A VM the vCenter does not show keeps a generated
    identity; one whose name matches several VMs is an error (name its ``vcenter_id``)."""
    local = estate.local
    if local.kind != "vcenter":
        msg = f"--vcenter: the local site {local.name!r} is {local.kind}, not a vCenter site"
        raise EstateError(msg)
    server = link.server_id
    linked: dict[str, str] = {}
    vpgs: list[VpgSpec] = []
    for vpg in estate.vpgs:
        protected_here = (vpg.protected_site or local.name).lower() == local.name.lower()
        if not protected_here or vpg.site_kind != "vcenter":
            vpgs.append(vpg)
            continue
        specs = tuple(_linked_spec(spec, link, server, linked) for spec in vpg.entries())
        vpgs.append(replace(vpg, vm_specs=specs))
    return replace(estate, vpgs=tuple(vpgs)), linked


def _linked_spec(spec: VmSpec, link: VcenterLink, server: str, linked: dict[str, str]) -> VmSpec:
    found = link.find(None if spec.vcenter_id else spec.name, spec.vcenter_id)
    if not found:
        return spec
    if len(found) > 1:
        msg = (
            f"--vcenter: {len(found)} VMs in vCenter are named {spec.name!r}; give the estate "
            "entry its vcenter_id"
        )
        raise EstateError(msg)
    (ref,) = found
    linked[spec.name] = ref.moref
    return VmSpec(spec.name, ref.moref, ref.instance_uuid, server_id=server)


def attach(vpgs: Iterable[Vpg], clock: Callable[[], float], link: VcenterLink) -> Replica:
    """A replica of the VPGs' VMs whose identity came from ``link`` (see
    :func:`link_estate`), reading at the fastest cadence of their VPGs."""
    prefix = f"{link.server_id}."
    vms: dict[str, VmRef] = {}
    cadences: list[float] = []
    histories: list[float] = []
    for vpg in vpgs:
        mine = [vm for vm in vpg.vms if vm.identifier.startswith(prefix)]
        for vm in mine:
            moref = vm.identifier.removeprefix(prefix)
            vms[vm.identifier] = VmRef(vm.name, moref, vm.instance_uuid)
        if mine:
            cadences.append(vpg.journal.cadence)
            histories.append(vpg.history_minutes * 60.0)
    # A journal ticking faster than this would only load the vCenter with reads.
    interval = max(_MIN_INTERVAL_S, min(cadences, default=5.0))
    return Replica(link, vms, clock, interval, max(histories, default=3600.0))
