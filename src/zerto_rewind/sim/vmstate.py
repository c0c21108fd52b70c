"""A VM's state as vCenter shows it, and the steps that put a VM back to a kept state.

This is the simulator's stand-in for Zerto's replica (docs/simulator.md, "Linked to a
vCenter"): what a journal VM restore brings back is the state kept here, not disk data.
Pure data and a pure diff: :mod:`zerto_rewind.sim.vsphere` reads and applies it against a
real vCenter, and unit tests drive it with a fake :class:`VcenterLink`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

POWERED_ON = "poweredOn"
POWERED_OFF = "poweredOff"
SUSPENDED = "suspended"


@dataclass(frozen=True)
class DiskState:
    """One virtual disk: where it sits on its controller, its file and its size. The label
    is vCenter's to choose when a disk is added back, so it is not compared."""

    label: str = field(compare=False)
    path: str
    capacity_kb: int
    controller_key: int
    unit_number: int


@dataclass(frozen=True)
class NicState:
    """One network adapter: its MAC address, its device type (``VirtualE1000``…) and the
    network it is on (a distributed port group's key with its switch, or a network's name).
    The label is vCenter's to choose when a NIC is added back, so it is not compared."""

    label: str = field(compare=False)
    mac: str = ""
    network: str = ""
    device_type: str = "VirtualE1000"
    switch_uuid: str = ""


@dataclass(frozen=True)
class VmState:
    """What the link keeps of a VM at a checkpoint."""

    power_state: str
    num_cpu: int
    memory_mb: int
    annotation: str
    disks: tuple[DiskState, ...] = ()
    nics: tuple[NicState, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The state as JSON, its fields (the control plane's ``/_sim/vcenter`` view)."""
        return asdict(self)


@dataclass(frozen=True)
class VmRef:
    """A VM as vCenter identifies it: its managed object id and instance UUID."""

    name: str
    moref: str
    instance_uuid: str | None


@dataclass(frozen=True)
class Step:
    """One change on the way back; ``action`` is what the link does."""

    # power_off | reconfigure | remove_disk | add_disk | remove_nic | add_nic | power_on |
    # suspend
    action: str
    num_cpu: int | None = None
    memory_mb: int | None = None
    annotation: str | None = None
    disk: DiskState | None = None
    nic: NicState | None = None

    def describe(self) -> str:
        """The step in words, for a failed task's CompleteReason."""
        if self.action == "reconfigure":
            parts = [
                f"{name} {value}"
                for name, value in (("CPUs", self.num_cpu), ("memory MB", self.memory_mb))
                if value is not None
            ]
            if self.annotation is not None:
                parts.append("annotation")
            return f"reconfigure ({', '.join(parts)})"
        if self.disk is not None:
            return f"{self.action.replace('_', ' ')} {self.disk.path}"
        if self.nic is not None:
            return f"{self.action.replace('_', ' ')} {self.nic.mac}"
        return self.action.replace("_", " ")


class VcenterLink(Protocol):
    """What the simulator needs of a vCenter; :class:`~zerto_rewind.sim.vsphere.PyVmomiLink`
    is the real one. Every method may raise ``OSError`` or the client's own errors; the
    callers turn them into a failed task or a refused start."""

    @property
    def server_id(self) -> str:
        """The vCenter's instance UUID: what Zerto writes before the moref in VmIdentifier."""
        ...

    def find(self, name: str | None, moref: str | None) -> list[VmRef]:
        """The VMs with this moref (when given), else with this exact name."""
        ...

    def snapshot(self, vm: VmRef) -> VmState:
        """The VM's state now."""
        ...

    def apply(self, vm: VmRef, steps: list[Step]) -> None:
        """Carry out ``steps`` in order; raise on the first that fails."""
        ...

    def close(self) -> None:
        """End the session."""
        ...


def _disk_slot(disk: DiskState) -> tuple[int, int]:
    return disk.controller_key, disk.unit_number


def restore_steps(current: VmState, target: VmState) -> list[Step]:
    """The steps that take a VM from ``current`` back to ``target``, in the order vSphere
    accepts them: power off before a hardware change, disks off before disks on, the power
    state last. Disks are matched by controller slot, NICs by MAC address."""
    hardware = _hardware_steps(current, target)
    steps: list[Step] = []
    state = current.power_state
    if state != POWERED_OFF and (hardware or target.power_state == POWERED_OFF):
        steps.append(Step("power_off"))
        state = POWERED_OFF
    steps += hardware
    if target.annotation != current.annotation:
        # The annotation changes with the VM powered on or off; no need to stop it.
        steps.append(Step("reconfigure", annotation=target.annotation))
    if target.power_state not in (state, POWERED_OFF):
        if state != POWERED_ON:  # powering on also resumes a suspended VM
            steps.append(Step("power_on"))
        if target.power_state == SUSPENDED:
            steps.append(Step("suspend"))
    return steps


def _hardware_steps(current: VmState, target: VmState) -> list[Step]:
    steps: list[Step] = []
    cpu = target.num_cpu if target.num_cpu != current.num_cpu else None
    memory = target.memory_mb if target.memory_mb != current.memory_mb else None
    if cpu is not None or memory is not None:
        steps.append(Step("reconfigure", num_cpu=cpu, memory_mb=memory))
    kept = {_disk_slot(d): d for d in target.disks}
    now = {_disk_slot(d): d for d in current.disks}
    for slot, disk in now.items():
        if kept.get(slot) != disk:
            steps.append(Step("remove_disk", disk=disk))
    for slot, disk in kept.items():
        if now.get(slot) != disk:
            steps.append(Step("add_disk", disk=disk))
    kept_nics = {n.mac: n for n in target.nics}
    now_nics = {n.mac: n for n in current.nics}
    steps += [Step("remove_nic", nic=n) for m, n in now_nics.items() if kept_nics.get(m) != n]
    steps += [Step("add_nic", nic=n) for m, n in kept_nics.items() if now_nics.get(m) != n]
    return steps


def differences(current: VmState, target: VmState) -> list[str]:
    """What still differs after a restore (what vCenter did not take), in words."""
    found = [
        name
        for name in ("power_state", "num_cpu", "memory_mb", "annotation", "disks", "nics")
        if getattr(current, name) != getattr(target, name)
    ]
    return [f"{n} is {getattr(current, n)!r}, not {getattr(target, n)!r}" for n in found]
