"""The simulator's vCenter link, one layer at a time, with a fake of the link interface:
the steps back to a kept state, the timeline of kept states, the restore job and its task,
identities taken into the estate, and the ``--vcenter`` URL."""

from __future__ import annotations

import json
import ssl
from dataclasses import replace
from pathlib import Path

import pytest

from zerto_rewind.sim import SimServer, recovery
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.enums import TASK_COMPLETED, TASK_FAILED, TASK_IN_PROGRESS
from zerto_rewind.sim.errors import SimError
from zerto_rewind.sim.estate import Estate, EstateError, SiteSpec, VpgSpec
from zerto_rewind.sim.replica import Replica, attach, link_estate
from zerto_rewind.sim.state import Backend, World
from zerto_rewind.sim.vcenter_memory import MemoryVcenter, apply_step
from zerto_rewind.sim.vmstate import (
    POWERED_OFF,
    POWERED_ON,
    SUSPENDED,
    DiskState,
    NicState,
    Step,
    VmRef,
    VmState,
    differences,
    restore_steps,
)
from zerto_rewind.sim.vsphere import PASSWORD_ENV, USER_ENV, parse_vcenter

SERVER = "dbed6e0c-bd88-4ef6-b594-21283e1c677f"
DISK = DiskState("disk-202-0", "[LocalDS_0] web/disk1.vmdk", 1024, 202, 0)
WEB = VmState(POWERED_ON, 2, 32, "web tier", (DISK,))


class FakeLink:
    """A vCenter of VMs by moref: steps change its states as vCenter would, except the
    fields in ``ignores`` (what a simulator does not take); ``broken`` fails every call."""

    def __init__(self, vms: dict[str, tuple[str, VmState]]) -> None:
        self.vms = dict(vms)
        self.applied: list[tuple[str, list[Step]]] = []
        self.ignores: set[str] = set()
        self.broken = False
        self.closed = False

    @property
    def server_id(self) -> str:
        return SERVER

    def find(self, name: str | None, moref: str | None) -> list[VmRef]:
        return [
            VmRef(vm_name, key, f"uuid-{key}")
            for key, (vm_name, _) in self.vms.items()
            if (key == moref if moref is not None else vm_name == name)
        ]

    def snapshot(self, vm: VmRef) -> VmState:
        if self.broken:
            raise OSError("connection refused")
        return self.vms[vm.moref][1]

    def apply(self, vm: VmRef, steps: list[Step]) -> None:
        self.applied.append((vm.moref, steps))
        name, state = self.vms[vm.moref]
        for step in steps:
            state = self._step(state, step)
        self.vms[vm.moref] = (name, state)

    def _step(self, state: VmState, step: Step) -> VmState:
        if step.action == "reconfigure":
            step = replace(step, **dict.fromkeys(self.ignores))
        return apply_step(state, step)

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- the steps back ---------------------------------------------------------------


def test_a_reconfigured_powered_off_vm_is_reconfigured_then_powered_on() -> None:
    changed = VmState(POWERED_OFF, 4, 64, "changed by agent", (DISK,))
    steps = restore_steps(changed, WEB)
    assert [s.action for s in steps] == ["reconfigure", "reconfigure", "power_on"]
    assert (steps[0].num_cpu, steps[0].memory_mb, steps[0].annotation) == (2, 32, None)
    assert steps[1].annotation == "web tier"


def test_hardware_changes_power_a_running_vm_off_first_and_on_again() -> None:
    steps = restore_steps(replace(WEB, num_cpu=4), WEB)
    assert [s.action for s in steps] == ["power_off", "reconfigure", "power_on"]
    assert steps[1].num_cpu == 2
    assert steps[1].memory_mb is None


def test_an_annotation_alone_leaves_the_vm_running() -> None:
    steps = restore_steps(replace(WEB, annotation="x"), WEB)
    assert [(s.action, s.annotation) for s in steps] == [("reconfigure", "web tier")]


def test_a_removed_disk_is_added_back_and_an_added_one_removed() -> None:
    extra = DiskState("disk-202-1", "[LocalDS_0] web/disk2.vmdk", 2048, 202, 1)
    steps = restore_steps(replace(WEB, disks=(extra,)), WEB)
    assert [(s.action, s.disk) for s in steps] == [
        ("power_off", None),
        ("remove_disk", extra),
        ("add_disk", DISK),
        ("power_on", None),
    ]


def test_nics_are_matched_by_mac_a_moved_one_is_replaced() -> None:
    nic = NicState("ethernet-0", "00:0c:29:36:63:62", "dvportgroup-13", "VirtualE1000", "fea9")
    moved = replace(nic, network="dvportgroup-11")
    added = NicState("ethernet-1", "00:50:56:00:00:01", "VM Network", "VirtualVmxnet3")
    kept = replace(WEB, nics=(nic,))
    steps = restore_steps(replace(WEB, nics=(moved, added)), kept)
    assert [(s.action, s.nic) for s in steps] == [
        ("power_off", None),
        ("remove_nic", moved),
        ("remove_nic", added),
        ("add_nic", nic),
        ("power_on", None),
    ]
    relabelled = replace(
        WEB, nics=(NicState("ethernet--7", nic.mac, nic.network, "VirtualE1000", "fea9"),)
    )
    assert restore_steps(relabelled, kept) == []
    assert Step("add_nic", nic=nic).describe() == f"add nic {nic.mac}"


@pytest.mark.parametrize(
    ("now", "kept", "actions"),
    [
        (POWERED_ON, POWERED_OFF, ["power_off"]),
        (SUSPENDED, POWERED_ON, ["power_on"]),
        (POWERED_OFF, SUSPENDED, ["power_on", "suspend"]),
        (POWERED_ON, SUSPENDED, ["suspend"]),
        (SUSPENDED, POWERED_OFF, ["power_off"]),
        (POWERED_ON, POWERED_ON, []),
    ],
)
def test_power_states(now: str, kept: str, actions: list[str]) -> None:
    steps = restore_steps(replace(WEB, power_state=now), replace(WEB, power_state=kept))
    assert [s.action for s in steps] == actions


def test_differences_name_what_vcenter_did_not_take() -> None:
    assert differences(WEB, WEB) == []
    left = differences(replace(WEB, annotation=""), WEB)
    assert left == ["annotation is '', not 'web tier'"]


def test_steps_describe_themselves() -> None:
    assert Step("reconfigure", num_cpu=2, annotation="a").describe() == (
        "reconfigure (CPUs 2, annotation)"
    )
    assert Step("add_disk", disk=DISK).describe() == f"add disk {DISK.path}"
    assert Step("power_on").describe() == "power on"


# -- the timeline and the restore job ------------------------------------------------


def _replica(link: FakeLink, clock: Clock, history_s: float = 3600.0) -> Replica:
    refs = {f"{SERVER}.{key}": VmRef(name, key, None) for key, (name, _) in link.vms.items()}
    return Replica(link, refs, clock, 1.0, history_s)


def test_the_state_at_a_time_is_the_last_reading_at_or_before_it() -> None:
    link, clock = FakeLink({"vm-1": ("web", WEB)}), Clock()
    replica = _replica(link, clock)
    vm_id = f"{SERVER}.vm-1"
    assert replica.state_at(vm_id, clock.now) is None
    replica.observe()
    first = clock.now
    clock.now += 5
    replica.observe()  # unchanged: one entry
    link.vms["vm-1"] = ("web", replace(WEB, num_cpu=4))
    clock.now += 5
    replica.observe()
    assert replica.state_at(vm_id, first - 0.001) is None
    assert replica.state_at(vm_id, first + 7) == WEB
    assert replica.state_at(vm_id, clock.now) is not None
    assert replica.state_at(vm_id, clock.now).num_cpu == 4  # type: ignore[union-attr]
    assert replica.first_reading(vm_id) == first
    assert replica.to_json()["vms"][vm_id]["latest"]["num_cpu"] == 4


def test_old_readings_go_but_the_one_before_the_history_stays() -> None:
    link, clock = FakeLink({"vm-1": ("web", WEB)}), Clock()
    replica = _replica(link, clock, history_s=10)
    vm_id = f"{SERVER}.vm-1"
    for cpus in (1, 2, 3, 4):
        link.vms["vm-1"] = ("web", replace(WEB, num_cpu=cpus))
        replica.observe()
        clock.now += 6
    oldest_kept = clock.now - 6 * 3
    assert replica.state_at(vm_id, clock.now - 10).num_cpu == 3  # type: ignore[union-attr]
    assert replica.first_reading(vm_id) == oldest_kept


def test_a_failed_read_keeps_nothing() -> None:
    link, clock = FakeLink({"vm-1": ("web", WEB)}), Clock()
    replica = _replica(link, clock)
    link.broken = True
    replica.observe()
    assert replica.first_reading(f"{SERVER}.vm-1") is None


def test_a_restore_job_applies_the_steps_and_reads_the_vm_again() -> None:
    link, clock = FakeLink({"vm-1": ("web", replace(WEB, power_state=POWERED_OFF))}), Clock()
    replica = _replica(link, clock)
    job = replica.restore(f"{SERVER}.vm-1", WEB)
    assert job.result() is None
    replica.run_job(job)
    assert job.result() == (clock.now, None)
    assert link.vms["vm-1"][1] == WEB
    assert link.applied == [("vm-1", [Step("power_on")])]
    assert replica.restores == [{"vm": "web", "moref": "vm-1", "failure": None}]


def test_what_vcenter_does_not_take_fails_the_job_saying_what() -> None:
    link, clock = FakeLink({"vm-1": ("web", replace(WEB, annotation="x"))}), Clock()
    link.ignores.add("annotation")
    replica = _replica(link, clock)
    job = replica.restore(f"{SERVER}.vm-1", WEB)
    replica.run_job(job)
    assert job.result() is not None
    _, failure = job.result()  # type: ignore[misc]
    assert failure == (
        "vCenter did not take all of the restore of VM 'web': annotation is 'x', not 'web tier'"
    )


def test_a_vcenter_that_fails_fails_the_job() -> None:
    link, clock = FakeLink({"vm-1": ("web", WEB)}), Clock()
    link.broken = True
    replica = _replica(link, clock)
    job = replica.restore(f"{SERVER}.vm-1", WEB)
    replica.run_job(job)
    assert job.outcome is not None
    assert job.outcome[1] == ("Restoring VM 'web' in vCenter failed: OSError: connection refused")


def test_the_worker_reads_and_restores_then_stops_and_logs_out() -> None:
    link, clock = FakeLink({"vm-1": ("web", replace(WEB, num_cpu=8))}), Clock()
    replica = _replica(link, clock)
    replica.start()
    try:
        job = replica.restore(f"{SERVER}.vm-1", WEB)
        assert job.done.wait(5)
        assert link.vms["vm-1"][1] == WEB
    finally:
        replica.stop()
    assert link.closed


# -- identities and the simulator's operations -------------------------------------


def _estate() -> Estate:
    return Estate(
        SiteSpec("zvm-local", "vcenter"),
        (SiteSpec("zvm-dr", "vcenter"), SiteSpec("hv", "hyperv")),
        (
            VpgSpec("web-vpg", "vcenter", ("web", "ghost")),
            VpgSpec("hv-vpg", "hyperv", ("web",), protected_site="hv"),
        ),
    )


def test_link_estate_takes_identities_from_vcenter() -> None:
    link = FakeLink({"vm-69": ("web", WEB)})
    estate, linked = link_estate(_estate(), link)
    assert linked == {"web": "vm-69"}
    web, ghost = estate.vpgs[0].entries()
    assert (web.vcenter_id, web.instance_uuid, web.server_id) == ("vm-69", "uuid-vm-69", SERVER)
    assert ghost.vcenter_id is None
    assert estate.vpgs[1].entries()[0].vcenter_id is None  # protected elsewhere


def test_a_name_vcenter_shows_twice_is_refused() -> None:
    link = FakeLink({"vm-1": ("web", WEB), "vm-2": ("web", WEB)})
    with pytest.raises(EstateError, match="2 VMs in vCenter are named 'web'"):
        link_estate(_estate(), link)


def _linked_backend(link: FakeLink, clock: Clock) -> tuple[Backend, Replica]:
    config = SimConfig(clock=clock, jitter=0.0, tag_lag_s=0.1, task_duration_s=0.2, seed=3)
    estate, _ = link_estate(_estate(), link)
    world = World(config, estate)
    world.replica = attach(world.vpgs.values(), world.clock, link)
    return Backend(config, world=world), world.replica


def test_the_vm_rows_carry_the_vcenter_identity() -> None:
    link, clock = FakeLink({"vm-69": ("web", WEB)}), Clock()
    backend, replica = _linked_backend(link, clock)
    (row,) = [vm for vm, vpg in backend.find_vms("web", "web-vpg", None)]
    assert (row.identifier, row.instance_uuid) == (f"{SERVER}.vm-69", "uuid-vm-69")
    assert list(replica.vms) == [f"{SERVER}.vm-69"]
    assert replica.interval_s == 5.0  # the vCenter cadence


def test_a_commit_puts_the_vm_back_and_its_task_waits_for_it() -> None:
    link, clock = FakeLink({"vm-69": ("web", WEB)}), Clock()
    backend, replica = _linked_backend(link, clock)
    replica.observe()
    vpg = backend.vpg_named("web-vpg")
    vm_id = f"{SERVER}.vm-69"
    clock.now += 30
    checkpoint = vpg.journal.latest()
    assert checkpoint is not None
    link.vms["vm-69"] = ("web", replace(WEB, power_state=POWERED_OFF, num_cpu=4))
    replica.observe()
    body = {"vpgidentifier": vpg.identifier, "checkpointidentifier": checkpoint.identifier}
    recovery.restore(backend, vm_id, body)
    task = recovery.restore_end(backend, vm_id, vpg.identifier, commit=True)
    clock.now += 1
    assert task.state_at(clock.now)[0] == TASK_IN_PROGRESS  # the job has not run
    replica.run_job(replica._jobs.get())
    assert link.vms["vm-69"][1] == WEB
    assert task.state_at(clock.now)[0] == TASK_COMPLETED


def test_a_failed_restore_fails_the_commit_task_with_the_reason() -> None:
    link, clock = FakeLink({"vm-69": ("web", WEB)}), Clock()
    backend, replica = _linked_backend(link, clock)
    replica.observe()
    vpg = backend.vpg_named("web-vpg")
    vm_id = f"{SERVER}.vm-69"
    clock.now += 30
    checkpoint = vpg.journal.latest()
    assert checkpoint is not None
    body = {"vpgidentifier": vpg.identifier, "checkpointidentifier": checkpoint.identifier}
    recovery.restore(backend, vm_id, body)
    task = recovery.restore_end(backend, vm_id, vpg.identifier, commit=True)
    link.broken = True
    replica.run_job(replica._jobs.get())
    clock.now += 1
    assert task.state_at(clock.now)[0] == TASK_FAILED
    assert "OSError: connection refused" in task.complete_reason(clock.now)


def test_a_rollback_changes_nothing_in_vcenter() -> None:
    link, clock = FakeLink({"vm-69": ("web", WEB)}), Clock()
    backend, replica = _linked_backend(link, clock)
    replica.observe()
    vpg = backend.vpg_named("web-vpg")
    vm_id = f"{SERVER}.vm-69"
    clock.now += 30
    checkpoint = vpg.journal.latest()
    assert checkpoint is not None
    body = {"vpgidentifier": vpg.identifier, "checkpointidentifier": checkpoint.identifier}
    recovery.restore(backend, vm_id, body)
    recovery.restore_end(backend, vm_id, vpg.identifier, commit=False)
    assert replica._jobs.empty()


def test_a_checkpoint_older_than_the_link_cannot_be_restored() -> None:
    link, clock = FakeLink({"vm-69": ("web", WEB)}), Clock()
    backend, replica = _linked_backend(link, clock)
    vpg = backend.vpg_named("web-vpg")
    old = vpg.journal.latest()
    assert old is not None
    replica.observe()  # the first reading comes after the checkpoint
    body = {"vpgidentifier": vpg.identifier, "checkpointidentifier": old.identifier}
    with pytest.raises(SimError) as refused:
        recovery.restore(backend, f"{SERVER}.vm-69", body)
    assert "kept no state that old" in refused.value.body["Message"]
    assert vpg.restores == {}


def test_a_tag_request_wakes_the_worker() -> None:
    link, clock = FakeLink({"vm-69": ("web", WEB)}), Clock()
    backend, replica = _linked_backend(link, clock)
    assert not replica._wake.is_set()
    backend.tag(backend.vpg_named("web-vpg"), "before-change")
    assert replica._wake.is_set()


# -- the --vcenter URL -------------------------------------------------------------------


def test_the_url_carries_the_login_and_the_repr_hides_the_password() -> None:
    spec = parse_vcenter("https://user:s%40cret@vc.example:8443/sdk", {})
    assert (spec.host, spec.port, spec.user, spec.password) == (
        "vc.example",
        8443,
        "user",
        "s@cret",
    )
    assert "s@cret" not in repr(spec)
    assert spec.display == "https://vc.example:8443/sdk"


def test_the_login_may_come_from_the_environment() -> None:
    spec = parse_vcenter("https://127.0.0.9/sdk", {USER_ENV: "u", PASSWORD_ENV: "p"})
    assert (spec.port, spec.user, spec.password, spec.insecure) == (443, "u", "p", False)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://u:secret-pw@vc/sdk", "expected https://USER:PASS@HOST"),
        ("https://vc/sdk", "no user or password"),
        ("https://u@vc/sdk", "no user or password"),
    ],
)
def test_a_bad_url_is_refused_without_showing_it(url: str, message: str) -> None:
    with pytest.raises(EstateError, match=message) as refused:
        parse_vcenter(url, {})
    assert "secret-pw" not in str(refused.value)


def test_verification_stays_on_unless_asked_off() -> None:
    strict = parse_vcenter("https://u:p@vc/sdk", {}).tls_context()
    assert strict.verify_mode == ssl.CERT_REQUIRED
    assert strict.check_hostname
    loose = parse_vcenter("https://u:p@vc/sdk", {}, insecure=True).tls_context()
    assert loose.verify_mode == ssl.CERT_NONE


# -- the in-memory vCenter (the demo's stand-in for --vcenter) --------------------------


def test_the_in_memory_vcenter_finds_vms_by_name_or_moref() -> None:
    vc = MemoryVcenter({"web": WEB, "db": replace(WEB, annotation="db")})
    (web,) = vc.find("web", None)
    (db,) = vc.find(None, "vm-1002")
    assert (web.moref, db.name) == ("vm-1001", "db")
    assert web.instance_uuid != db.instance_uuid
    assert vc.find("nope", None) == []
    assert vc.server_id == MemoryVcenter({}).server_id  # one vCenter, whoever makes it
    with pytest.raises(KeyError, match="no VM named 'nope'"):
        vc.put("nope", WEB)


def test_the_in_memory_vcenter_takes_the_steps_back_to_a_kept_state() -> None:
    vc = MemoryVcenter({"web": WEB})
    (ref,) = vc.find("web", None)
    changed = replace(WEB, power_state=SUSPENDED, num_cpu=8, disks=(), annotation="agent")
    vc.put("web", changed)
    assert vc.snapshot(ref) == changed
    vc.apply(ref, restore_steps(changed, WEB))
    assert vc.state("web") == WEB


def test_a_config_s_vcenter_link_is_used_instead_of_a_vcenter_url(tmp_path: Path) -> None:
    """SimConfig.vcenter_link: the VMs take their identity from it, and a journal
    restore's commit puts the VM back to the state of the restored checkpoint."""
    vc = MemoryVcenter({"web": WEB})
    estate = tmp_path / "estate.json"
    vpgs = [{"name": "web-vpg", "site_kind": "vcenter", "vms": ["web", "ghost"]}]
    estate.write_text(json.dumps({"local_site": {"name": "hq", "kind": "vcenter"}, "vpgs": vpgs}))
    clock = Clock()
    server = SimServer(SimConfig(estate_file=estate, clock=clock, seed=3, vcenter_link=vc))
    backend, replica = server.state, server.replica
    assert replica is not None
    vm_id = f"{vc.server_id}.vm-1001"
    assert list(replica.vms) == [vm_id]  # ghost is not in the vCenter: not linked
    replica.observe()
    vpg = backend.vpg_named("web-vpg")
    clock.now += 30
    checkpoint = vpg.journal.latest()
    assert checkpoint is not None
    vc.put("web", replace(WEB, power_state=POWERED_OFF))
    replica.observe()
    body = {"vpgidentifier": vpg.identifier, "checkpointidentifier": checkpoint.identifier}
    recovery.restore(backend, vm_id, body)
    recovery.restore_end(backend, vm_id, vpg.identifier, commit=True)
    replica.run_job(replica._jobs.get())
    assert vc.state("web") == WEB
