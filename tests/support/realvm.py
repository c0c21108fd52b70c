"""The real VM side for tests: govmomi's vCenter simulator and the third-party mcvsphere MCP server.

Both come from package registries and are built by ``scripts/realvm-setup`` into ``.cache/realvm``.
A test starts a simulator (``start_vcsim``), talks to it through mcvsphere over stdio
(``mcvsphere_session``), and reads back what really happened to the VMs from the vCenter itself
(``power_states`` over pyVmomi, or ``vm_info`` through a fresh mcvsphere), never from the guard.

pyVmomi's ``SmartConnect`` as mcvsphere calls it always uses port 443, so every simulator gets a
loopback address of its own (127.0.0.X:443); binding 443 needs root or CAP_NET_BIND_SERVICE.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = "scripts/realvm-setup"
CACHE = ROOT / ".cache" / "realvm"
VCSIM_SOURCE = ROOT / "tests" / "realvm" / "vcsim" / "main.go"
VCSIM_BIN = CACHE / "bin" / "vcsim"
VCSIM_STAMP = CACHE / "bin" / "vcsim.stamp"
MCVSPHERE_VENV = CACHE / "mcvsphere-venv"
MCVSPHERE_BIN = MCVSPHERE_VENV / "bin" / "mcvsphere"

SDK_PORT = 443
# The simulator's built-in login; it guards nothing.
VCSIM_USER = "user"
VCSIM_PASSWORD = "pass"
# The default model as main.go builds it: two standalone hosts and a cluster, all VMs powered on.
DEFAULT_VMS = (
    "DC0_H0_VM0",
    "DC0_H0_VM1",
    "DC0_H1_VM0",
    "DC0_H1_VM1",
    "DC0_C0_RP0_VM0",
    "DC0_C0_RP0_VM1",
)
# Addresses tried when a test does not pick one; 127.0.0.254 is left to scripts/dump-server-tools.
_AUTO_HOSTS = tuple(f"127.0.0.{last}" for last in range(10, 250))
_AUTO_ATTEMPTS = 20
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0
_READ_BACK_TIMEOUT_S = 60.0


class RealVMError(RuntimeError):
    """The real VM side is not set up, or a part of it did not start or answer."""


def setup_problems() -> list[str]:
    """What is missing or stale in ``.cache/realvm``; empty when tests can run."""
    problems: list[str] = []
    if not VCSIM_BIN.exists():
        problems.append(f"{VCSIM_BIN} is missing")
    else:
        built_from = _stamp_field(VCSIM_STAMP, "main_go_sha256")
        if built_from != hashlib.sha256(VCSIM_SOURCE.read_bytes()).hexdigest():
            problems.append(f"{VCSIM_BIN} was not built from the current {VCSIM_SOURCE.name}")
    if not MCVSPHERE_BIN.exists():
        problems.append(f"{MCVSPHERE_BIN} is missing")
    return problems


def require_setup() -> None:
    """Raise ``RealVMError`` saying what to run when the real VM side is not ready."""
    problems = setup_problems()
    if problems:
        raise RealVMError(
            f"the real VM side is not ready: {'; '.join(problems)}. Run {SETUP_SCRIPT}"
        )


def _stamp_field(stamp: Path, key: str) -> str | None:
    try:
        value = json.loads(stamp.read_text()).get(key)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class VCenter:
    """A running simulator as its clients see it."""

    host: str
    sdk_url: str
    user: str = VCSIM_USER
    password: str = VCSIM_PASSWORD

    def mcvsphere_env(self) -> dict[str, str]:
        """The settings mcvsphere reads from its environment; the certificate is self-signed."""
        return {
            "VCENTER_HOST": self.host,
            "VCENTER_USER": self.user,
            "VCENTER_PASSWORD": self.password,
            "VCENTER_INSECURE": "true",
        }


class VCenterSimulator:
    """One ``vcsim`` process serving the default model on ``host:443``.

    Its state lives in that process: every simulator starts with the six VMs powered on.
    """

    def __init__(self, host: str, workdir: Path) -> None:
        self.host = host
        self.workdir = workdir
        self._proc: subprocess.Popen[bytes] | None = None
        self._vcenter: VCenter | None = None

    @property
    def vcenter(self) -> VCenter:
        if self._vcenter is None:
            raise RealVMError(f"the simulator on {self.host} is not running")
        return self._vcenter

    def start(self) -> VCenter:
        """Start the process and wait until it serves; ``RealVMError`` when it cannot."""
        require_setup()
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / "ready.json"
        ready.unlink(missing_ok=True)
        stderr_path = self.workdir / "vcsim.stderr"
        with stderr_path.open("wb") as stderr:
            self._proc = subprocess.Popen(
                [str(VCSIM_BIN), "-listen", f"{self.host}:{SDK_PORT}", "-ready-file", str(ready)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not ready.exists():
            if self._proc.poll() is not None:
                self._proc = None
                why = stderr_path.read_text(errors="replace").strip() or "no message"
                raise RealVMError(f"vcsim on {self.host}:{SDK_PORT} exited: {why}")
            if time.monotonic() > deadline:
                self.stop()
                raise RealVMError(
                    f"vcsim on {self.host}:{SDK_PORT} not ready in {_START_TIMEOUT_S} s"
                )
            time.sleep(0.02)
        self._vcenter = VCenter(host=self.host, sdk_url=json.loads(ready.read_text())["url"])
        return self._vcenter

    def stop(self) -> None:
        """SIGTERM, so that vcsim removes its datastore directories; SIGKILL if it hangs."""
        proc, self._proc, self._vcenter = self._proc, None, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> VCenterSimulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def start_vcsim(workdir: Path, host: str | None = None) -> Iterator[VCenterSimulator]:
    """A running simulator on ``host`` or, when None, on the first free 127.0.0.X:443.

    Parallel test workers start their search at different addresses, and an address another
    process holds is skipped, so simulators never share one.
    """
    if host is not None:
        with VCenterSimulator(host, workdir) as simulator:
            yield simulator
        return
    first = os.getpid() % len(_AUTO_HOSTS)
    failures: list[str] = []
    for attempt in range(_AUTO_ATTEMPTS):
        candidate = _AUTO_HOSTS[(first + attempt) % len(_AUTO_HOSTS)]
        simulator = VCenterSimulator(candidate, workdir)
        try:
            simulator.start()
        except RealVMError as error:
            if "address already in use" not in str(error):
                raise
            failures.append(candidate)
            continue
        try:
            yield simulator
        finally:
            simulator.stop()
        return
    raise RealVMError(f"no free loopback address for vcsim; tried {', '.join(failures)}")


def mcvsphere_command() -> list[str]:
    """The stdio server command line; configure it with ``VCenter.mcvsphere_env()``."""
    return [str(MCVSPHERE_BIN)]


def mcvsphere_params(vcenter: VCenter, workdir: Path) -> StdioServerParameters:
    """How to start mcvsphere as a stdio child talking to ``vcenter``.

    ``workdir`` becomes its working directory: mcvsphere also reads a ``.env`` file from there,
    so it must be a directory of the test's own.
    """
    command, *args = mcvsphere_command()
    return StdioServerParameters(
        command=command, args=args, env=vcenter.mcvsphere_env(), cwd=str(workdir)
    )


@contextlib.asynccontextmanager
async def mcvsphere_session(vcenter: VCenter, workdir: Path) -> AsyncIterator[Client]:
    """An initialized MCP client session with a fresh mcvsphere process.

    The server's stderr (start-up banner, deprecation warnings) goes to
    ``workdir/mcvsphere.stderr`` rather than into the test's output.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    params = mcvsphere_params(vcenter, workdir)
    with (workdir / "mcvsphere.stderr").open("a") as errlog:
        # mcvsphere runs a 1.x SDK: go straight to the initialize handshake, no discovery probe.
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            yield client


async def vm_info(vcenter: VCenter, vm_name: str, workdir: Path) -> dict[str, Any]:
    """mcvsphere's own ``get_vm_info`` for one VM, from a server process of its own."""
    async with mcvsphere_session(vcenter, workdir) as client:
        result = await client.call_tool("get_vm_info", {"name": vm_name})
    if result.is_error:
        raise RealVMError(f"get_vm_info({vm_name}) failed: {tool_text(result.content)}")
    if result.structured_content is not None:
        info = result.structured_content.get("result", result.structured_content)
    else:
        info = json.loads(tool_text(result.content))
    if not isinstance(info, dict):
        raise RealVMError(f"get_vm_info({vm_name}) answered {info!r}, not an object")
    return info


def tool_text(content: list[Any]) -> str:
    """The text blocks of a tool result, joined."""
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


# Run by the mcvsphere venv's Python, which has pyVmomi; settings come from the environment
# so that the password never shows in a process listing. A probe's body runs between these
# two, with ``si``, ``content``, ``vim`` and ``json`` at hand, and prints one JSON value.
_PROBE_HEAD = """
import json, os, ssl
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
si = SmartConnect(
    host=os.environ["VCENTER_HOST"],
    user=os.environ["VCENTER_USER"],
    pwd=os.environ["VCENTER_PASSWORD"],
    sslContext=context,
)
try:
    content = si.RetrieveContent()
"""
_PROBE_TAIL = """
finally:
    Disconnect(si)
"""


def _probe(vcenter: VCenter, body: str, what: str, env: dict[str, str] | None = None) -> Any:
    """The JSON a pyVmomi probe prints: a direct session, independent of any MCP server."""
    require_setup()
    indented = "".join(f"    {line}\n" for line in body.strip().splitlines())
    done = subprocess.run(
        [str(MCVSPHERE_VENV / "bin" / "python"), "-c", _PROBE_HEAD + indented + _PROBE_TAIL],
        env={"PATH": "/usr/bin:/bin", **(env or {}), **vcenter.mcvsphere_env()},
        capture_output=True,
        text=True,
        timeout=_READ_BACK_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RealVMError(f"reading {what} from {vcenter.sdk_url} failed: {done.stderr}")
    return json.loads(done.stdout)


def datastore_folders(vcenter: VCenter, datastore: str) -> list[str]:
    """The folders at the top of ``datastore``: vCenter names its backing directory (vcsim
    keeps a datastore as a directory of this machine), and that directory is listed."""
    body = """
view = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datastore], True)
(ds,) = [d for d in view.view if d.name == os.environ["ZR_DATASTORE"]]
print(json.dumps(ds.info.url))
"""
    root = Path(_probe(vcenter, body, datastore, {"ZR_DATASTORE": datastore}))
    return sorted(entry.name for entry in root.iterdir() if entry.is_dir())


def power_states(vcenter: VCenter) -> dict[str, str]:
    """Every VM's power state (``poweredOn``/``poweredOff``/``suspended``) straight from vCenter.

    A direct pyVmomi session, independent of any MCP server or guard.
    """
    body = """
view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
print(json.dumps({vm.name: str(vm.runtime.powerState) for vm in view.view}))
"""
    states = _probe(vcenter, body, "power states")
    if not isinstance(states, dict):
        raise RealVMError(f"power-state probe printed {states!r}, not an object")
    return {str(name): str(state) for name, state in states.items()}


def vm_states(vcenter: VCenter) -> dict[str, Any]:
    """Every VM as vCenter shows it, straight from a pyVmomi session of its own: vCenter's
    instance UUID (``server_id``) and per VM name its moref, instance UUID, power state,
    CPUs, memory, annotation, disk files and NICs (MAC, distributed port group)."""
    body = """
view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
vms = {}
for vm in view.view:
    hw = vm.config.hardware
    disks = [d for d in hw.device if isinstance(d, vim.vm.device.VirtualDisk)]
    nics = [d for d in hw.device if isinstance(d, vim.vm.device.VirtualEthernetCard)]
    vms[vm.name] = {"moref": vm._moId, "instance_uuid": vm.config.instanceUuid,
                    "power_state": str(vm.runtime.powerState), "num_cpu": hw.numCPU,
                    "memory_mb": hw.memoryMB, "annotation": vm.config.annotation or "",
                    "disks": sorted(d.backing.fileName for d in disks),
                    "nics": sorted([n.macAddress, n.backing.port.portgroupKey] for n in nics)}
print(json.dumps({"server_id": content.about.instanceUuid, "vms": vms}))
"""
    states = _probe(vcenter, body, "VM states")
    if not isinstance(states, dict):
        raise RealVMError(f"VM-state probe printed {states!r}, not an object")
    return states


def change_vm(vcenter: VCenter, vm_name: str, change: dict[str, Any]) -> None:
    """Change a VM directly in vCenter, behind every guard's back: ``power`` (``on``/``off``),
    ``num_cpu``, ``memory_mb``, ``annotation``, ``remove_disk`` (True: the first disk, its
    file deleted), ``remove_nic`` (True: the first NIC). Each is one vCenter task, waited for."""
    body = """
from pyVim.task import WaitForTask
change = json.loads(os.environ["ZR_CHANGE"])
view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
(vm,) = [v for v in view.view if v.name == os.environ["ZR_VM"]]
if change.get("power") == "off":
    WaitForTask(vm.PowerOffVM_Task())
spec = vim.vm.ConfigSpec(numCPUs=change.get("num_cpu"), memoryMB=change.get("memory_mb"),
                         annotation=change.get("annotation"))
WaitForTask(vm.ReconfigVM_Task(spec=spec))
if change.get("remove_disk"):
    disk = [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)][0]
    remove = vim.vm.device.VirtualDeviceSpec(operation="remove", device=disk)
    remove.fileOperation = "destroy"
    WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[remove])))
if change.get("remove_nic"):
    card = vim.vm.device.VirtualEthernetCard
    nic = [d for d in vm.config.hardware.device if isinstance(d, card)][0]
    remove = vim.vm.device.VirtualDeviceSpec(operation="remove", device=nic)
    WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[remove])))
if change.get("power") == "on":
    WaitForTask(vm.PowerOnVM_Task())
print(json.dumps(str(vm.runtime.powerState)))
"""
    env = {"ZR_VM": vm_name, "ZR_CHANGE": json.dumps(change)}
    _probe(vcenter, body, f"a change to {vm_name}", env)
