"""A vCenter held in memory: the embedded stand-in for ``--vcenter``, for the demo.

:class:`MemoryVcenter` is a :class:`~zerto_rewind.sim.vmstate.VcenterLink` whose VMs are
plain :class:`~zerto_rewind.sim.vmstate.VmState` values. The simulator links to it as to
a real vCenter (``SimConfig.vcenter_link``): its VMs take their identity from it, their
state is kept at each checkpoint, and a journal restore's commit applies the steps back
to it. Whoever plays the VM server (the demo) changes a VM with :meth:`MemoryVcenter.put`,
as the VM server's tool would have.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace

from zerto_rewind.sim.vmstate import POWERED_OFF, POWERED_ON, SUSPENDED, Step, VmRef, VmState

__all__ = ["MemoryVcenter"]

_POWER = {"power_off": POWERED_OFF, "power_on": POWERED_ON, "suspend": SUSPENDED}


class MemoryVcenter:
    """VMs by name, each with a moref (``vm-1001``…) and an instance UUID, in memory.

    Thread-safe: the simulator's replica worker reads and restores VMs while the demo
    changes them."""

    def __init__(self, vms: dict[str, VmState]) -> None:
        self._server = str(uuid.uuid5(uuid.NAMESPACE_URL, "zerto-rewind:memory-vcenter"))
        self._refs = {
            name: VmRef(name, f"vm-{1001 + i}", str(uuid.uuid5(uuid.NAMESPACE_URL, name)))
            for i, name in enumerate(vms)
        }
        self._states = dict(vms)
        self._lock = threading.Lock()

    @property
    def server_id(self) -> str:
        return self._server

    def find(self, name: str | None, moref: str | None) -> list[VmRef]:
        """The VMs with this moref (when given), else with this exact name."""
        return [
            ref
            for ref in self._refs.values()
            if (ref.moref == moref if moref is not None else ref.name == name)
        ]

    def snapshot(self, vm: VmRef) -> VmState:
        with self._lock:
            return self._states[vm.name]

    def state(self, name: str) -> VmState:
        """The VM's state now, by name."""
        with self._lock:
            return self._states[name]

    def put(self, name: str, state: VmState) -> None:
        """The VM is now ``state`` (a change made outside the simulator: the VM server's)."""
        with self._lock:
            if name not in self._states:
                msg = f"no VM named {name!r} in the in-memory vCenter"
                raise KeyError(msg)
            self._states[name] = state

    def apply(self, vm: VmRef, steps: list[Step]) -> None:
        """Carry out ``steps`` in order, as vCenter would."""
        with self._lock:
            state = self._states[vm.name]
            for step in steps:
                state = apply_step(state, step)
            self._states[vm.name] = state

    def close(self) -> None:
        """Nothing to log out of."""


def apply_step(state: VmState, step: Step) -> VmState:
    """The VM's state after one step of a restore."""
    if step.action in _POWER:
        return replace(state, power_state=_POWER[step.action])
    if step.action == "reconfigure":
        return VmState(
            state.power_state,
            state.num_cpu if step.num_cpu is None else step.num_cpu,
            state.memory_mb if step.memory_mb is None else step.memory_mb,
            state.annotation if step.annotation is None else step.annotation,
            state.disks,
            state.nics,
        )
    if step.nic is not None:
        nics = tuple(n for n in state.nics if n != step.nic)
        return replace(state, nics=(*nics, step.nic) if step.action == "add_nic" else nics)
    if step.disk is None:
        msg = f"a restore step the in-memory vCenter does not know: {step.action}"
        raise ValueError(msg)
    disks = tuple(d for d in state.disks if d != step.disk)
    return replace(state, disks=(*disks, step.disk) if step.action == "add_disk" else disks)
