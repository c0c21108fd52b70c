"""The gateway in the real Claude Code CLI, in front of a real VM side.

``GatewayRig`` binds, for one test module:

- govmomi's vCenter simulator (``tests/realvm``: vcsim on a 127.0.0.X:443 of its own, six VMs
  powered on) and the third-party ``mcvsphere`` MCP server from PyPI talking to it;
- the ZVM simulator (``Sandbox``) with an estate whose VM names are vcsim's, one VPG per
  decision row (``ESTATE``), short cadences and a guard budget of ``BUDGET_S``;
- a config whose only upstream is ``vsphere`` = mcvsphere (the vCenter credentials live in
  the gateway's config, not in Claude Code's), whose catalog is the kept mcvsphere catalog
  renamed to the ``vsphere`` server minus ``UNLISTED_TOOL``, and whose ZVM secret is a file;
- in HTTP mode, one ``zerto-rewind gateway --listen 127.0.0.1:0`` for the module.

Claude Code gets no hook and no other VM server: its MCP config (``mcp_config``) holds the
gateway alone, as a stdio command (a new gateway per ``claude`` run) or as
``{"type": "http", "url": …, "headers": {"Authorization": "Bearer …"}}``.

What happened is read from three independent places: the vCenter (``power_states``, a
pyVmomi session of its own), the ZVM simulator (``/_sim/stats`` tag counters and the
journal's tagged checkpoints) and what the scripted model was sent (``fake_anthropic``).

``mcp_config(..., capture=F)`` wraps the stdio gateway command in a tiny tee that appends
every JSON-RPC message Claude Code sends to ``F`` (``sent_messages(F)``), so a test can read
the protocol revision and the capabilities the CLI declares.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.harness import E2E_DIR, write_json
from support.realvm import (
    DEFAULT_VMS,
    MCVSPHERE_VENV,
    SETUP_SCRIPT,
    VCenter,
    mcvsphere_command,
    power_states,
    setup_problems,
    start_vcsim,
)
from zerto_rewind.core.call_result import RESULT_EVENT
from zerto_rewind.gateway.http import token_digest
from zerto_rewind.sim.vsphere import VcenterSpec, parse_vcenter
from zerto_rewind.testing import Sandbox, fast_sim_config

__all__ = [
    "AWS_VPG",
    "BUDGET_S",
    "CLIENT_NAME",
    "DEFAULT_VMS",
    "ESTATE",
    "PYTHON",
    "SERVER",
    "TOKEN",
    "UNLISTED_TOOL",
    "VM",
    "GatewayRig",
    "maintenance_modes",
    "power_on",
    "power_states",
    "sent_messages",
    "tool",
]

PYTHON = os.path.abspath(sys.executable)
ROOT = E2E_DIR.parents[1]
SERVER = "vsphere"
CLIENT_NAME = "claude-e2e"
TOKEN = "e2e-gateway-token-0123456789abcdef"  # a throwaway loopback token
# Left out of the catalog: a mutating mcvsphere tool the guard has never been told about.
UNLISTED_TOOL = "suspend_vm"


@dataclass(frozen=True)
class _Vms:
    """Which vcsim VM stands for which decision row (each row its own VM and VPG)."""

    confirmed: str = "DC0_H0_VM0"  # vCenter VPG, tag lands in ~1 s
    failed: str = "DC0_H0_VM1"  # paused VPG: no tag can be made
    pending: str = "DC0_H1_VM0"  # AWS VPG: the tag lands after the guard budget
    unlisted: str = "DC0_H1_VM1"  # protected, but the tool is not in the catalog
    unknown: str = "DC0_C0_RP0_VM0"  # in vcsim, in no VPG
    spare: str = "DC0_C0_RP0_VM1"  # in no VPG either; the interactive decline case


VM = _Vms()
CONFIRMED_VPG, FAILED_VPG, AWS_VPG, UNLISTED_VPG = "vc-vpg", "paused-vpg", "aws-vpg", "vc-vpg-2"
ESTATE: dict[str, Any] = {
    "local_site": {"name": "zvm-local", "kind": "vcenter"},
    "sites": [{"name": "zvm-dr", "kind": "vcenter"}, {"name": "CMH-AWS", "kind": "aws"}],
    "vpgs": [
        {"name": CONFIRMED_VPG, "site_kind": "vcenter", "vms": [VM.confirmed]},
        {"name": FAILED_VPG, "site_kind": "vcenter", "vms": [VM.failed], "status": 2,
         "sub_status": 25},
        {"name": AWS_VPG, "site_kind": "aws", "vms": [VM.pending]},
        {"name": UNLISTED_VPG, "site_kind": "vcenter", "vms": [VM.unlisted]},
    ],
}  # fmt: skip
# The ZVM simulator's journals: vCenter every 1 s; AWS every 4 s. The guard is told the AWS
# VPG ticks every 8 s (a config override), so its expected landing is always past the 3 s
# budget: deterministically *pending*, and the tag still lands within ~4 s, before the retry
# time the guard gives (the same trick as tests/integration/mcp_server/mcp_helpers.py).
SIM_CADENCES = {"vcenter": 1.0, "hyperv": 1.0, "vcd": 1.0, "azure": 2.0, "aws": 4.0}
BUDGET_S = 3.0
GUARD: dict[str, Any] = {
    "timeout_s": BUDGET_S,
    "site_cadence_s": {"vcenter": 1.0, "hyperv": 1.0, "azure": 2.0, "aws": 4.0},
    "cadence_s": {AWS_VPG: 8.0},
    "landing_allowance_s": 0.5,
}
_CATALOG_FILE = ROOT / "tests" / "data" / "catalogs" / "mcvsphere.catalog.json"


def vcenter_link(vcenter: VCenter) -> VcenterSpec:
    """The ZVM simulator's link to vcsim (its certificate is self-signed: not verified)."""
    url = f"https://{vcenter.user}:{vcenter.password}@{vcenter.host}/sdk"
    return parse_vcenter(url, {}, insecure=True)


def tool(name: str) -> str:
    """``mcp__vsphere__power_off`` from ``power_off``: the name Claude Code gives the tool."""
    return f"mcp__{SERVER}__{name}"


def catalog() -> dict[str, Any]:
    """The kept mcvsphere catalog (scanned from the real server), renamed to ``vsphere``."""
    kept = json.loads(_CATALOG_FILE.read_text(encoding="utf-8"))
    prefix = "mcp__mcvsphere__"

    def rename(name: str) -> str:
        return tool(name.removeprefix(prefix))

    tools = {rename(k): v for k, v in kept["tools"].items() if k != f"{prefix}{UNLISTED_TOOL}"}
    assert tool(UNLISTED_TOOL) not in tools
    return {"read_only_tools": [rename(n) for n in kept["read_only_tools"]], "tools": tools}


# Run by the mcvsphere venv's Python (pyVmomi); settings from the environment.
_POWER_ON_PROBE = """
import os, ssl, sys, time
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
si = SmartConnect(host=os.environ["VCENTER_HOST"], user=os.environ["VCENTER_USER"],
                  pwd=os.environ["VCENTER_PASSWORD"], sslContext=context)
try:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    wanted = set(sys.argv[1:])
    for vm in view.view:
        if vm.name in wanted and vm.runtime.powerState != "poweredOn":
            task = vm.PowerOnVM_Task()
            while task.info.state not in ("success", "error"):
                time.sleep(0.05)
finally:
    Disconnect(si)
"""


def power_on(vcenter: VCenter, *names: str) -> None:
    """Power VMs back on straight through pyVmomi (not through any MCP server or guard)."""
    subprocess.run(
        [str(MCVSPHERE_VENV / "bin" / "python"), "-c", _POWER_ON_PROBE, *names],
        env={"PATH": "/usr/bin:/bin", **vcenter.mcvsphere_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


_MAINTENANCE_PROBE = """
import json, os, ssl
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
si = SmartConnect(host=os.environ["VCENTER_HOST"], user=os.environ["VCENTER_USER"],
                  pwd=os.environ["VCENTER_PASSWORD"], sslContext=context)
try:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    print(json.dumps({h.name: bool(h.runtime.inMaintenanceMode) for h in view.view}))
finally:
    Disconnect(si)
"""


def maintenance_modes(vcenter: VCenter) -> dict[str, bool]:
    """Every host's ``inMaintenanceMode`` straight from vCenter (pyVmomi)."""
    done = subprocess.run(
        [str(MCVSPHERE_VENV / "bin" / "python"), "-c", _MAINTENANCE_PROBE],
        env={"PATH": "/usr/bin:/bin", **vcenter.mcvsphere_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    states = json.loads(done.stdout)
    return {str(name): bool(flag) for name, flag in states.items()}


# A stdio tee: runs the command given after "--", copies every line both ways, and appends
# each line the client sent to the file named first. Stdlib only, so it starts fast.
_TEE = r"""
import subprocess, sys, threading
log_path, command = sys.argv[1], sys.argv[3:]
child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def up():
    with open(log_path, "ab") as log:
        for line in sys.stdin.buffer:
            log.write(line); log.flush()
            child.stdin.write(line); child.stdin.flush()
    child.stdin.close()
threading.Thread(target=up, daemon=True).start()
for line in child.stdout:
    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()
sys.exit(child.wait())
"""


def sent_messages(capture: Path) -> list[dict[str, Any]]:
    """The JSON-RPC messages the client sent through the tee, in order."""
    if not capture.exists():
        return []
    return [json.loads(line) for line in capture.read_text().splitlines() if line.strip()]


@dataclass
class GatewayRig:
    """One module's real VM side, ZVM simulator, config and (HTTP mode) gateway process."""

    root: Path
    vcenter: VCenter
    box: Sandbox
    http_url: str | None = None
    # mcvsphere's own unix user (``upstreams.vsphere.user``); None: it runs as the gateway
    # (root), which the gateway allows only with --allow-privileged-upstream.
    upstream_user: str | None = None
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    # ---- life cycle -----------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def running(
        cls,
        root: Path,
        *,
        http: bool,
        estate: Callable[[VCenter], dict[str, Any]] | None = None,
        catalog_options: dict[str, Any] | None = None,
        link_vcenter: bool = False,
    ) -> Iterator[GatewayRig]:
        """``estate``: the ZVM simulator's estate made from the running vCenter (e.g. with
        its morefs), instead of ``ESTATE``; ``catalog_options``: the config's ``catalog``;
        ``link_vcenter``: the simulator is linked to vcsim (``--vcenter``): identities from
        it, VM states kept at each checkpoint and put back by a restore's commit."""
        problems = setup_problems()
        if problems:
            raise AssertionError(
                f"the real VM side is not set up: {'; '.join(problems)}. Run {SETUP_SCRIPT}"
            )
        root.mkdir(parents=True, exist_ok=True)
        kept = catalog()
        if catalog_options is not None:
            kept["catalog"] = catalog_options
        with start_vcsim(root / "vcsim") as vcsim:
            made = ESTATE if estate is None else estate(vcsim.vcenter)
            estate_file = write_json(root / "estate.json", made)
            sim = fast_sim_config(cadences=dict(SIM_CADENCES), estate_file=estate_file, seed=7)
            if link_vcenter:
                sim.vcenter = vcenter_link(vcsim.vcenter)
            with Sandbox(
                str(root / "zerto"), sim_config=sim, guard=dict(GUARD), catalog=kept
            ) as box:
                rig = cls(root, vcsim.vcenter, box)
                try:
                    rig.write_config()
                    if http:
                        rig._start_http()
                    yield rig
                finally:
                    rig._stop_http()

    def write_config(
        self, *, approvals: dict[str, Any] | None = None, upstream: bool = True, **gateway: Any
    ) -> str:
        """The gateway's config: mcvsphere upstream, one client token, ZVM secret in a file;
        ``approvals``, the config's approvals section, if given. ``upstream=False`` leaves
        ``upstreams`` out, for ``zerto-rewind install mcp-host`` to move a host's server in."""
        secret = self.root / "zvm-secret"
        secret.write_text(self.box.sim.credentials["client_secret"], encoding="utf-8")
        secret.chmod(0o600)
        zvm = {k: v for k, v in self.box.config()["zvm"].items() if k != "client_secret_env"}
        zvm["client_secret_file"] = str(secret)
        spec: dict[str, Any] = {
            "command": mcvsphere_command(),
            "env": self.vcenter.mcvsphere_env(),
            "timeout_s": 30,
        }
        if self.upstream_user is not None:
            spec["user"] = self.upstream_user
        return self.box.write_config(
            zvm=zvm,
            **({"upstreams": {SERVER: spec}} if upstream else {}),
            gateway={"clients": {CLIENT_NAME: token_digest(TOKEN)}, **gateway},
            state_dir=self.box.state_dir,
            log=self.box.log_path,
            **({"approvals": approvals} if approvals is not None else {}),
        )

    def gateway_flags(self) -> list[str]:
        """The gateway's options for this rig's upstream: a root mcvsphere needs the allowance."""
        return [] if self.upstream_user is not None else ["--allow-privileged-upstream"]

    def gateway_env(self) -> dict[str, str]:
        """All the gateway needs from its environment: where its config is."""
        return {"ZERTO_REWIND_CONFIG": self.box.config_path, "PYTHONDONTWRITEBYTECODE": "1"}

    def _start_http(self) -> None:
        ready = self.root / "gateway-ready.json"
        stderr = self.root / "gateway.stderr"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
        env.update(self.gateway_env())
        with stderr.open("wb") as err:
            self._proc = subprocess.Popen(
                [PYTHON, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
                 "--ready-file", str(ready), *self.gateway_flags()],
                env=env, cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not ready.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._stop_http()
                raise AssertionError(f"gateway did not start: {stderr.read_text()}")
            time.sleep(0.05)
        self.http_url = json.loads(ready.read_text())["mcp"][SERVER]

    def _stop_http(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # ---- Claude Code's side ---------------------------------------------------------------

    def stdio_command(self, capture: Path | None = None) -> list[str]:
        """The gateway as a stdio MCP server; with ``capture``, behind a tee logging requests."""
        gateway = [PYTHON, "-m", "zerto_rewind", "gateway", "--stdio", "--upstream", SERVER,
                   *self.gateway_flags()]  # fmt: skip
        if capture is None:
            return gateway
        return [PYTHON, "-c", _TEE, str(capture), "--", *gateway]

    def mcp_config(self, path: Path, transport: str, *, capture: Path | None = None) -> Path:
        """Claude Code's MCP config: the gateway is its only server, named ``vsphere``."""
        entry: dict[str, Any]
        if transport == "stdio":
            command, *args = self.stdio_command(capture)
            entry = {"type": "stdio", "command": command, "args": args, "env": self.gateway_env()}
        elif transport == "http":
            assert self.http_url is not None, "the rig was started without HTTP"
            entry = {
                "type": "http",
                "url": self.http_url,
                "headers": {"Authorization": f"Bearer {TOKEN}"},
            }
        else:
            raise ValueError(f"unknown transport {transport!r}")
        return write_json(path, {"mcpServers": {SERVER: entry}})

    # ---- what really happened -------------------------------------------------------------

    def power_states(self) -> dict[str, str]:
        return power_states(self.vcenter)

    def power_on(self, *names: str) -> None:
        power_on(self.vcenter, *names)

    def maintenance_modes(self) -> dict[str, bool]:
        return maintenance_modes(self.vcenter)

    def tag_requests(self, vpg: str) -> int:
        return self.box.tag_requests(vpg)

    def log(self) -> list[dict[str, Any]]:
        """The decision lines: the calls' decisions and approval events, without the
        result lines the gateway writes after forwarding a change (see :meth:`results`)."""
        return [r for r in self.box.log_records() if r.get("event_type") != RESULT_EVENT]

    def results(self) -> list[dict[str, Any]]:
        """The result lines of forwarded changes (succeeded, failed, unknown)."""
        return [r for r in self.box.log_records() if r.get("event_type") == RESULT_EVENT]

    def log_since(self, count: int) -> list[dict[str, Any]]:
        """The decision-log lines written after the first ``count``."""
        return self.log()[count:]

    def tagged_checkpoints(self, vpg_name: str) -> dict[str, tuple[str, float]]:
        """{checkpoint id: (tag, landed epoch)} of the VPG's tagged checkpoints (ZVM API)."""
        vpg_id = self.box.sim.state.vpg_named(vpg_name).identifier
        client = self.box.client()
        try:
            found = client.list_checkpoints(vpg_id)
        finally:
            client.close()
        return {c.cp_id: (c.tag, c.timestamp.timestamp()) for c in found if c.tag}
