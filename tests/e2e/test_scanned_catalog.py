"""Issue 12's end-to-end proof: a catalog scanned live from mcvsphere, installed as-is.

One vcsim and one ZVM simulator (``gateway_e2e.GatewayRig``: vcsim's VM names, ``DC0_H0_VM0``
in a vCenter VPG). What a user would do, each step a subprocess of the real commands:

1. ``zerto-rewind catalog scan --server vsphere --merge C --out C -- mcvsphere`` against the
   running vcsim, where ``C`` holds the ``zvm`` section only: the config is the ZVM plus the
   scan's ``read_only_tools`` and ``tools``, nothing written by hand;
2. ``zerto-rewind install claude-code --project DIR --config C --mcp-config M`` (``M``: mcvsphere
   as server ``vsphere`` with its vCenter environment), settings used as written;
3. ``claude -p`` with the scripted model: ``list_vms`` runs with no hook process at all (the
   config is broken while it runs, as in test_guard_rows.py: a hook would have denied and
   logged), ``power_off`` of the protected VM runs on a tagged checkpoint the model is told
   about, and the host-level ``enter_maintenance_mode`` prompts, which ``-p`` turns into a
   denial.

What happened is read back from the vCenter (pyVmomi), the ZVM simulator (tag counters and
journal), what the scripted model was sent, and the decision log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.fake_anthropic import call, delayed
from e2e.gateway_e2e import (
    CONFIRMED_VPG,
    DEFAULT_VMS,
    PYTHON,
    SERVER,
    VM,
    GatewayRig,
    tool,
)
from e2e.guarded import hook_contexts, parse_time
from e2e.harness import E2E_DIR, E2ESession, write_json
from support.realvm import mcvsphere_command

LIST_VMS, POWER_OFF = tool("list_vms"), tool("power_off")
MAINTENANCE = tool("enter_maintenance_mode")  # host-level: no VM argument
ZERTO_REWIND = Path(PYTHON).parent / "zerto-rewind"  # the venv's console script, as a user runs it
KEPT_CATALOG = E2E_DIR.parent / "data" / "catalogs" / "mcvsphere.catalog.json"


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[GatewayRig]:
    # The rig's own (gateway) config is not used: only its vcsim, its ZVM simulator and the
    # ZVM secret file it wrote.
    with GatewayRig.running(tmp_path / "rig", http=False) as started:
        yield started


def zerto_rewind(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [str(ZERTO_REWIND), *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 0, f"zerto-rewind {args} exited {run.returncode}: {run.stderr[-3000:]}"
    return run


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without any zerto-rewind setting, with a throwaway HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZERTO_", "VCENTER_"))}
    return {**env, "HOME": str(home), **extra}


def kept_catalog_as_vsphere() -> dict[str, Any]:
    """The kept scan (server ``mcvsphere``), every name renamed to ``mcp__vsphere__…``."""
    kept = json.loads(KEPT_CATALOG.read_text(encoding="utf-8"))

    def rename(name: str) -> str:
        return tool(name.removeprefix("mcp__mcvsphere__"))

    return {
        "read_only_tools": [rename(n) for n in kept["read_only_tools"]],
        "tools": {rename(k): v for k, v in kept["tools"].items()},
    }


def test_live_scanned_catalog_installed_as_is(
    rig: GatewayRig, e2e: E2ESession, tmp_path: Path
) -> None:
    """list_vms runs with no hook; power_off runs on a confirmed tag; a host-level tool prompts."""
    env = user_env(e2e.home)
    # ---- 1. the config: the ZVM section, then the live scan merged into it -------------------
    zvm = json.loads(Path(rig.box.config_path).read_text(encoding="utf-8"))["zvm"]
    assert set(zvm) == {"url", "client_id", "client_secret_file", "ca_bundle"}
    config = write_json(tmp_path / "zerto-rewind.json", {"zvm": zvm})
    scan_dir = tmp_path / "scan"  # mcvsphere reads a .env from its working directory
    scan_dir.mkdir()
    scan = zerto_rewind(
        "catalog", "scan", "--server", SERVER, "--merge", str(config), "--out", str(config),
        "--", *mcvsphere_command(),
        env={**env, **rig.vcenter.mcvsphere_env()}, cwd=scan_dir,
    )  # fmt: skip
    assert "94 new tool(s) added" in scan.stderr
    written = json.loads(config.read_text(encoding="utf-8"))
    assert list(written) == ["zvm", "read_only_tools", "tools", "catalog"]
    # the scan pins every tool it reviewed (catalog.pins, one digest per tool)
    assert len(written["catalog"]["pins"]) == 94
    assert written["zvm"] == zvm
    catalog = {k: written[k] for k in ("read_only_tools", "tools")}
    assert catalog == kept_catalog_as_vsphere()  # the live scan is the kept one
    assert LIST_VMS in catalog["read_only_tools"]
    assert catalog["tools"][POWER_OFF] == {"vm_arg": "name"}
    # host-level: mutating, no VM argument, so a person decides each call
    assert catalog["tools"][MAINTENANCE] == {"decision": "prompt"}
    # the identity check the scan proposed (read by a gateway; this hook cannot call it)
    assert written["catalog"]["resolvers"][SERVER]["tool"] == "get_vm_info"

    # ---- 2. install, with mcvsphere as Claude Code's server `vsphere` -------------------------
    command, *args = mcvsphere_command()
    mcp = write_json(
        tmp_path / "mcp.json",
        {"mcpServers": {SERVER: {"type": "stdio", "command": command, "args": args,
                                 "env": rig.vcenter.mcvsphere_env()}}},
    )  # fmt: skip
    e2e.mcp_config = mcp
    zerto_rewind(
        "install", "claude-code", "--project", str(e2e.project_dir), "--config", str(config),
        "--mcp-config", str(mcp), env=env, cwd=tmp_path,
    )  # fmt: skip
    settings = json.loads((e2e.project_dir / ".claude" / "settings.json").read_text())
    [entry] = settings["hooks"]["PreToolUse"]
    matcher = re.compile(entry["matcher"])  # Python and JS read the compiled matcher alike
    assert not matcher.search(LIST_VMS)
    assert matcher.search(POWER_OFF)
    assert matcher.search(MAINTENANCE)

    # ---- 3. claude -p -----------------------------------------------------------------------
    # While list_vms runs the config is not JSON: a hook started for it would deny the call
    # and log `config_error`. The same bytes are back before the model asks for power_off
    # (the pin matches again).
    pinned = config.read_bytes()
    config.write_text("{ this is not JSON", encoding="utf-8")

    def restore(_messages: list[dict[str, Any]]) -> None:
        config.write_bytes(pinned)

    hosts_before = rig.maintenance_modes()
    assert not any(hosts_before.values())
    assert rig.box.tag_requests() == 0
    e2e.script(
        [
            [call(LIST_VMS)],
            delayed([call(POWER_OFF, name=VM.confirmed)], restore),
            [call(MAINTENANCE, evacuate_vms=False)],
            "done",
        ]
    )

    run = e2e.run(
        permission_mode="bypassPermissions",
        env={"ZERTO_REWIND_STATE_DIR": rig.box.state_dir, "ZERTO_HOOK_LOG": rig.box.log_path},
        timeout=120,
    )

    assert run.ok, run.describe()
    assert run.result == "done"
    assert config.read_bytes() == pinned
    assert run.denied_tools == [MAINTENANCE]
    list_id, power_id, maintenance_id = e2e.api.tool_use_ids()
    # list_vms: ran (vcsim's VMs in the result) and no hook process logged anything for it
    listing = e2e.api.tool_result(list_id)
    assert not listing.is_error
    assert all(vm in listing.text for vm in DEFAULT_VMS)
    power, maintenance = rig.log()
    # power_off: confirmed on one tag on the VM's VPG, which landed before the call ran
    assert (power["tool"], power["row"], power["decision"]) == (POWER_OFF, "confirmed", "context")
    assert (power["vms"], power["vpgs"]) == ([VM.confirmed], [CONFIRMED_VPG])
    states = rig.power_states()
    assert states[VM.confirmed] == "poweredOff"
    assert [vm for vm, state in states.items() if state != "poweredOn"] == [VM.confirmed]
    assert rig.tag_requests(CONFIRMED_VPG) == 1
    assert rig.box.tag_requests() == 1
    [cp] = power["checkpoint_ids"]
    tag, landed = rig.tagged_checkpoints(CONFIRMED_VPG)[cp]
    assert power["tags"] == [tag]
    assert landed <= parse_time(power["time"])
    told = e2e.api.tool_result(power_id)
    assert not told.is_error
    assert f"VM '{VM.confirmed}' powered off" in told.text  # mcvsphere's own answer
    [(context_tool, context)] = hook_contexts(e2e.api.system_texts())
    assert context_tool == POWER_OFF
    assert context.startswith("zerto-rewind: a Zerto checkpoint protects this")
    assert "The VM's identity was not verified" in context  # a hook cannot check it
    assert f"checkpoint {cp} tagged" in context
    assert f"VPG '{CONFIRMED_VPG}'" in context
    # enter_maintenance_mode: no VM to tag, so the guard asks; -p asks nobody: not run
    assert (maintenance["tool"], maintenance["row"], maintenance["decision"]) == (
        MAINTENANCE,
        "no_vm",
        "prompt",
    )
    assert "cannot tell which VM" in maintenance["reason"]
    refused = e2e.api.tool_result(maintenance_id)
    assert refused.is_error
    assert refused.text == maintenance["reason"]
    assert rig.maintenance_modes() == hosts_before
