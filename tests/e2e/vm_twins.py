"""Look-alike VMs in vcsim, made and read straight through pyVmomi (no MCP server, no guard).

The probes run in the mcvsphere venv's Python (it has pyVmomi) with the vCenter settings in
the environment, like ``support.realvm.power_states``. Every VM is named by its managed
object id (``vm-42``), so a test can tell which of two same-name VMs changed.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from support.realvm import MCVSPHERE_VENV, VCenter

__all__ = ["VmRecord", "inventory", "make_twin", "rename"]

_PRELUDE = """
import json, os, ssl, sys, time
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
si = SmartConnect(host=os.environ["VCENTER_HOST"], user=os.environ["VCENTER_USER"],
                  pwd=os.environ["VCENTER_PASSWORD"], sslContext=context)
content = si.RetrieveContent()

def vms():
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        return list(view.view)
    finally:
        view.Destroy()

def by_moref(moref):
    return next(vm for vm in vms() if vm._moId == moref)

def wait(task):
    while task.info.state not in ("success", "error"):
        time.sleep(0.05)
    if task.info.state == "error":
        raise SystemExit(f"task failed: {task.info.error}")
    return task.info.result
"""

_INVENTORY = """
try:
    print(json.dumps([
        {"moref": vm._moId, "name": vm.name, "folder": vm.parent.name,
         "power": str(vm.runtime.powerState),
         "instance_uuid": vm.config.instanceUuid if vm.config else None}
        for vm in vms()
    ]))
finally:
    Disconnect(si)
"""

# argv: source moref, new name, folder name ("" = the source's folder)
_TWIN = """
try:
    source = by_moref(sys.argv[1])
    folder = source.parent
    if sys.argv[3]:
        found = [f for f in folder.childEntity
                 if isinstance(f, vim.Folder) and f.name == sys.argv[3]]
        folder = found[0] if found else folder.CreateFolder(sys.argv[3])
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=True, template=False)
    clone = wait(source.CloneVM_Task(folder=folder, name=sys.argv[2], spec=spec))
    uuid = clone.config.instanceUuid if clone.config else None
    if not uuid or uuid == source.config.instanceUuid:
        # A real vCenter gives every clone its own instance UUID; make sure vcsim does too.
        import uuid as uuidlib
        wait(clone.ReconfigVM_Task(vim.vm.ConfigSpec(instanceUuid=str(uuidlib.uuid4()))))
    if str(clone.runtime.powerState) != "poweredOn":
        wait(clone.PowerOnVM_Task())
    print(json.dumps({"moref": clone._moId}))
finally:
    Disconnect(si)
"""

# argv: moref, new name
_RENAME = """
try:
    wait(by_moref(sys.argv[1]).Rename_Task(sys.argv[2]))
finally:
    Disconnect(si)
"""


@dataclass(frozen=True)
class VmRecord:
    """One vcsim VM as vCenter itself reports it."""

    moref: str
    name: str
    folder: str
    power: str
    instance_uuid: str | None


def _probe(vcenter: VCenter, script: str, *args: str) -> Any:
    done = subprocess.run(
        [str(MCVSPHERE_VENV / "bin" / "python"), "-c", _PRELUDE + script, *args],
        env={"PATH": "/usr/bin:/bin", **vcenter.mcvsphere_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"vcsim probe failed: {done.stderr or done.stdout}")
    return json.loads(done.stdout) if done.stdout.strip() else None


def inventory(vcenter: VCenter) -> dict[str, VmRecord]:
    """Every VM by moref: name, folder, power state, instance UUID."""
    rows = _probe(vcenter, _INVENTORY)
    return {row["moref"]: VmRecord(**row) for row in rows}


def make_twin(vcenter: VCenter, source_moref: str, name: str, folder: str = "") -> str:
    """Clone ``source_moref`` as ``name`` (in ``folder``, made if needed), powered on; its moref."""
    made = _probe(vcenter, _TWIN, source_moref, name, folder)
    return str(made["moref"])


def rename(vcenter: VCenter, moref: str, name: str) -> None:
    """Rename one VM (Rename_Task), by moref."""
    _probe(vcenter, _RENAME, moref, name)
