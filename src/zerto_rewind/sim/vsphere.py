"""The simulator's link to a real vCenter (or vcsim), over pyVmomi.

pyVmomi is an optional extra (``pip install 'zerto-rewind[sim-vcenter]'``), imported only
when ``--vcenter`` is given, so the simulator without a link needs nothing more. One
thread uses a link at a time (the :class:`~zerto_rewind.sim.replica.Replica`'s worker).
"""

from __future__ import annotations

import argparse
import importlib
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from zerto_rewind.sim.estate import EstateError
from zerto_rewind.sim.vmstate import DiskState, NicState, Step, VmRef, VmState

USER_ENV = "ZERTO_SIM_VCENTER_USER"
PASSWORD_ENV = "ZERTO_SIM_VCENTER_PASSWORD"  # noqa: S105 - the variable's name, not a secret
EXTRA = "zerto-rewind[sim-vcenter]"


@dataclass(frozen=True)
class VcenterSpec:
    """Where the link goes and how it logs in; the password never shows in a repr."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    ca_file: Path | None = None
    insecure: bool = False

    @property
    def display(self) -> str:
        """The vCenter as logs may show it: no user, no password."""
        return f"https://{self.host}:{self.port}/sdk"

    def tls_context(self) -> ssl.SSLContext:
        """Verification on, against ``ca_file`` or the system's CAs; off only when asked."""
        if self.insecure:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        cafile = None if self.ca_file is None else str(self.ca_file)
        return ssl.create_default_context(cafile=cafile)


def parse_vcenter(
    url: str, env: dict[str, str], ca_file: Path | None = None, insecure: bool = False
) -> VcenterSpec:
    """``https://USER:PASS@HOST[:PORT]/sdk``; a user or password left out of the URL comes
    from ``ZERTO_SIM_VCENTER_USER`` / ``ZERTO_SIM_VCENTER_PASSWORD``."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        msg = "--vcenter: expected https://USER:PASS@HOST[:PORT]/sdk (the URL is not shown)"
        raise EstateError(msg)
    user = unquote(parts.username) if parts.username else env.get(USER_ENV, "")
    password = unquote(parts.password) if parts.password else env.get(PASSWORD_ENV, "")
    if not user or not password:
        msg = (
            f"--vcenter: no user or password; put them in the URL or in {USER_ENV} / {PASSWORD_ENV}"
        )
        raise EstateError(msg)
    try:
        port = parts.port or 443
    except ValueError as exc:
        msg = f"--vcenter: bad port for {parts.hostname}"
        raise EstateError(msg) from exc
    return VcenterSpec(parts.hostname, port, user, password, ca_file, insecure)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The link's command-line flags."""
    add = parser.add_argument
    add("--vcenter", metavar="URL", help="link to a vCenter: https://USER:PASS@HOST/sdk")
    add("--vcenter-ca", type=Path, metavar="FILE", help="CA bundle that signs the vCenter's cert")
    add(
        "--vcenter-insecure",
        action="store_true",
        help="do not verify the vCenter's certificate (simulators such as vcsim only)",
    )


def spec_from_args(args: argparse.Namespace) -> VcenterSpec | None:
    """The link the flags ask for, or None."""
    if not args.vcenter:
        return None
    return parse_vcenter(args.vcenter, dict(os.environ), args.vcenter_ca, args.vcenter_insecure)


def _module(name: str) -> Any:
    """A pyVmomi module, imported only when a link is made (the optional extra)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        msg = f"--vcenter needs pyVmomi; install {EXTRA}"
        raise EstateError(msg) from exc


def connect(spec: VcenterSpec) -> PyVmomiLink:
    """A logged-in link; EstateError saying what failed (never the password)."""
    connection = _module("pyVim.connect")
    try:
        si = connection.SmartConnect(
            host=spec.host,
            port=spec.port,
            user=spec.user,
            pwd=spec.password,
            sslContext=spec.tls_context(),
        )
    # pyVmomi raises its own faults, ssl and socket errors: every one means "no link".
    except Exception as exc:
        msg = f"--vcenter: cannot log in to {spec.display}: {_why(exc)}"
        raise EstateError(msg) from None
    return PyVmomiLink(si)


def _why(exc: BaseException) -> str:
    text = getattr(exc, "msg", None) or str(exc) or ""
    return f"{type(exc).__name__}: {text}".rstrip(": ")


class PyVmomiLink:
    """A :class:`~zerto_rewind.sim.vmstate.VcenterLink` over one pyVmomi session."""

    def __init__(self, si: Any) -> None:
        self._si = si
        self._vim = _module("pyVmomi").vim
        self._wait = _module("pyVim.task").WaitForTask
        self._content = si.RetrieveContent()

    @property
    def server_id(self) -> str:
        """The vCenter's instance UUID."""
        return str(self._content.about.instanceUuid)

    def find(self, name: str | None, moref: str | None) -> list[VmRef]:
        """VMs by moref, else by exact name."""
        content = self._content
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [self._vim.VirtualMachine], True
        )
        try:
            found = [
                vm
                for vm in view.view
                if (vm._moId == moref if moref is not None else vm.name == name)
            ]
            return [VmRef(vm.name, vm._moId, _instance_uuid(vm)) for vm in found]
        finally:
            view.Destroy()

    def _vm(self, ref: VmRef) -> Any:
        return self._vim.VirtualMachine(ref.moref, self._si._stub)

    def snapshot(self, vm: VmRef) -> VmState:
        """Power state, CPUs, memory, annotation, disks and NICs as vCenter shows them."""
        obj = self._vm(vm)
        config = obj.config
        devices = config.hardware.device
        disks = [d for d in devices if isinstance(d, self._vim.vm.device.VirtualDisk)]
        nics = [d for d in devices if isinstance(d, self._vim.vm.device.VirtualEthernetCard)]
        return VmState(
            power_state=str(obj.runtime.powerState),
            num_cpu=int(config.hardware.numCPU),
            memory_mb=int(config.hardware.memoryMB),
            annotation=str(config.annotation or ""),
            disks=tuple(sorted((_disk(d) for d in disks), key=lambda d: d.path)),
            nics=tuple(sorted((_nic(n) for n in nics), key=lambda n: n.mac)),
        )

    def apply(self, vm: VmRef, steps: list[Step]) -> None:
        """Each step as a vCenter task, waited for; the first failure raises."""
        obj = self._vm(vm)
        for step in steps:
            self._wait(self._start(obj, step))

    def _start(self, obj: Any, step: Step) -> Any:
        vim = self._vim
        if step.action == "power_off":
            return obj.PowerOffVM_Task()
        if step.action == "power_on":
            return obj.PowerOnVM_Task()
        if step.action == "suspend":
            return obj.SuspendVM_Task()
        if step.action == "reconfigure":
            spec = vim.vm.ConfigSpec(
                numCPUs=step.num_cpu, memoryMB=step.memory_mb, annotation=step.annotation
            )
            return obj.ReconfigVM_Task(spec=spec)
        change = self._nic_change(obj, step) if step.nic else self._disk_change(obj, step)
        return obj.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[change]))

    def _nic_change(self, obj: Any, step: Step) -> Any:
        device_ns = self._vim.vm.device
        nic = step.nic
        assert nic is not None
        if step.action == "remove_nic":
            (device,) = [
                d
                for d in obj.config.hardware.device
                if isinstance(d, device_ns.VirtualEthernetCard) and d.macAddress == nic.mac
            ]
            return device_ns.VirtualDeviceSpec(operation="remove", device=device)
        card = device_ns.VirtualEthernetCard
        if nic.switch_uuid:
            port = self._vim.dvs.PortConnection(
                switchUuid=nic.switch_uuid, portgroupKey=nic.network
            )
            backing = card.DistributedVirtualPortBackingInfo(port=port)
        else:
            backing = card.NetworkBackingInfo(deviceName=nic.network)
        # The same MAC address, so the guest sees the adapter it had.
        device = getattr(device_ns, nic.device_type)(
            key=-1, backing=backing, addressType="manual", macAddress=nic.mac
        )
        return device_ns.VirtualDeviceSpec(operation="add", device=device)

    def _disk_change(self, obj: Any, step: Step) -> Any:
        vim = self._vim
        disk = step.disk
        assert disk is not None
        change = vim.vm.device.VirtualDeviceSpec
        if step.action == "remove_disk":
            # The file stays on the datastore, as a detached disk would.
            (device,) = [
                d
                for d in obj.config.hardware.device
                if isinstance(d, vim.vm.device.VirtualDisk)
                and (d.controllerKey, d.unitNumber) == (disk.controller_key, disk.unit_number)
            ]
            return change(operation="remove", device=device)
        backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
            fileName=disk.path, diskMode="persistent", thinProvisioned=True
        )
        device = vim.vm.device.VirtualDisk(
            key=-1,
            backing=backing,
            controllerKey=disk.controller_key,
            unitNumber=disk.unit_number,
            capacityInKB=disk.capacity_kb,
        )
        if self._file_exists(obj, disk.path):
            return change(operation="add", device=device)
        # Deleted with the disk: a new empty file of the same size at the same path.
        return change(operation="add", fileOperation="create", device=device)

    def _file_exists(self, obj: Any, path: str) -> bool:
        """Whether a disk file is still on its datastore (a removed disk may have kept it)."""
        folder, _, name = path.rpartition("/")
        datastore = next((d for d in obj.datastore if path.startswith(f"[{d.name}]")), None)
        if datastore is None:
            return False
        spec = self._vim.host.DatastoreBrowser.SearchSpec(matchPattern=[name])
        try:
            task = datastore.browser.SearchDatastore_Task(datastorePath=folder, searchSpec=spec)
            self._wait(task)
        # A folder that is gone answers FileNotFound: then the disk file is gone too.
        except Exception:
            return False
        return any(f.path == name for f in task.info.result.file or [])

    def close(self) -> None:
        """Log out."""
        _module("pyVim.connect").Disconnect(self._si)


def _instance_uuid(vm: Any) -> str | None:
    config = vm.config
    return None if config is None or not config.instanceUuid else str(config.instanceUuid)


def _disk(device: Any) -> DiskState:
    return DiskState(
        label=str(device.deviceInfo.label),
        path=str(getattr(device.backing, "fileName", "") or ""),
        capacity_kb=int(device.capacityInKB),
        controller_key=int(device.controllerKey),
        unit_number=int(device.unitNumber),
    )


def _nic(device: Any) -> NicState:
    backing = device.backing
    port = getattr(backing, "port", None)
    network = getattr(port, "portgroupKey", None) or getattr(backing, "deviceName", None) or ""
    return NicState(
        label=str(device.deviceInfo.label),
        mac=str(device.macAddress or ""),
        network=str(network),
        device_type=type(device).__name__.rsplit(".", 1)[-1],
        switch_uuid=str(getattr(port, "switchUuid", None) or ""),
    )
