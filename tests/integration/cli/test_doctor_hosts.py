"""``zerto-rewind doctor`` for gateway setups, as its own process, real host files in a temp HOME.

Codex (TOML), Gemini CLI and Copilot CLI keep their MCP servers in their own
files; the doctor scans each for VM servers that bypass the gateway, and with
no hook installed and a gateway entry found it runs the gateway checks, not
Claude Code's hook checks. ``install mcp-host`` runs as its own process too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.config import VSPHERE_CATALOG, write_sim_config
from support.sim import sim_fixture
from zerto_rewind.sim import SimServer

SECRET_VAR = "ZR_DOCTOR_HOSTS_PASSWORD"
PASSWORD = "vc-Pa55-doctor-hosts"
HOOK_CHECKS = ("hook installed", "host settings", "mcp servers")

sim = sim_fixture(scope="module", jitter=0.0, seed=11)


@pytest.fixture
def gateway_config(sim: SimServer, tmp_path: Path) -> Path:
    """A gateway config for the simulator; its upstream runs as a user of its own."""
    etc = tmp_path / "etc"
    etc.mkdir()
    return write_sim_config(
        sim, etc, name="gateway.json", secret_env=SECRET_VAR, upstreams={}, **VSPHERE_CATALOG
    )


def zr(*argv: str, home: Path, sim: SimServer) -> subprocess.CompletedProcess[str]:
    """One ``zerto-rewind`` command as its own process, from an empty directory."""
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "USER": "alice",
        SECRET_VAR: sim.credentials["password"],
    }
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=120,
        check=False,
    )


def doctor(*argv: str, home: Path, sim: SimServer) -> tuple[int, dict[str, list[dict[str, str]]]]:
    """(exit code, checks by name) of ``doctor --json ARGV``; no secret in what it printed."""
    done = zr("doctor", "--json", *argv, home=home, sim=sim)
    assert PASSWORD not in done.stdout + done.stderr
    report = json.loads(done.stdout)
    checks: dict[str, list[dict[str, str]]] = {}
    for check in report["checks"]:
        checks.setdefault(check["name"], []).append(check)
    return done.returncode, checks


def put(path: Path, text: str) -> Path:
    """A host file as the host would have it (its directory made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def bypass_of(checks: dict[str, list[dict[str, str]]], path: Path) -> dict[str, str]:
    (found,) = [c for c in checks["gateway bypass"] if c["detail"].startswith(f"read {path}:")]
    return found


def install(host: str, home: Path, sim: SimServer, config: Path, *extra: str) -> None:
    argv = ["install", "mcp-host", host, "--server", "vsphere", "--gateway-config", str(config)]
    done = zr(*argv, "--upstream-user", "nobody", *extra, home=home, sim=sim)
    assert done.returncode == 0, done.stderr
    # `uvx mcvsphere` is no server on this machine: the install's trial start as nobody
    # says so; nothing else warns (nobody is no owner of the guard's files).
    warned = [ln for ln in (done.stdout + done.stderr).splitlines() if "WARNING" in ln]
    assert all("the VM server cannot start: as nobody" in ln for ln in warned), warned


def assert_only_the_missing_server_fails(checks: dict[str, list[dict[str, str]]]) -> None:
    """`uvx mcvsphere` is not installed here: doctor's trial start as nobody fails, naming
    it (tests/integration/gateway/test_upstream_startup.py has a real one); nothing else."""
    (start,) = checks.pop("upstream vsphere: start")
    assert start["status"] == "fail", start
    assert "as nobody" in start["detail"]
    assert "cannot run uvx" in start["detail"]
    failed = [c for group in checks.values() for c in group if c["status"] == "fail"]
    assert failed == []


VM_ENTRY: dict[str, Any] = {
    "command": "uvx",
    "args": ["mcvsphere"],
    "env": {"VCENTER_HOST": "vc.lab.local", "VCENTER_PASSWORD": PASSWORD},
}


def test_codex_direct_with_a_password_fails_then_install_makes_it_a_gateway_setup(
    sim: SimServer, tmp_path: Path, gateway_config: Path
) -> None:
    """Codex reaching mcvsphere with its vCenter password: FAIL; after install, gateway checks."""
    home = tmp_path / "home"
    codex = put(
        home / ".codex" / "config.toml",
        'model = "gpt-5-codex"\n\n'
        '[mcp_servers.vsphere]\ncommand = "uvx"\nargs = ["mcvsphere"]\n\n'
        '[mcp_servers.vsphere.env]\nVCENTER_HOST = "vc.lab.local"\n'
        f'VCENTER_PASSWORD = "{PASSWORD}"\n',
    )
    code, checks = doctor(home=home, sim=sim)
    assert code == 1
    found = bypass_of(checks, codex)
    assert found["status"] == "fail"
    assert "vsphere: reaches a VM server directly" in found["detail"]
    assert "credentials in this file the agent can read (env.VCENTER_PASSWORD)" in found["detail"]
    assert found["fix"].startswith("zerto-rewind install mcp-host codex --server vsphere --file")

    install("codex", home, sim, gateway_config, "--user")
    code, checks = doctor(home=home, sim=sim)  # no --config: the gateway entry names it
    assert not set(HOOK_CHECKS) & set(checks), checks.keys()
    (setup,) = checks["gateway setup"]
    assert setup["status"] == "pass"
    assert f"{codex} vsphere" in setup["detail"]
    (config,) = checks["config"]
    assert config["status"] == "pass"
    assert f"named by the gateway entry in {codex}" in config["detail"]
    found = bypass_of(checks, codex)
    assert found["status"] == "pass"
    assert "vsphere: reaches upstream 'vsphere' through the gateway" in found["detail"]
    (identity,) = checks["upstream vsphere: identity"]
    assert identity["status"] == "pass", identity
    assert_only_the_missing_server_fails(checks)
    assert code == 1


def test_gemini_and_copilot_files_and_host_narrowing(
    sim: SimServer, tmp_path: Path, gateway_config: Path
) -> None:
    """Gemini behind the gateway passes; Copilot's direct VM server without credentials warns."""
    home = tmp_path / "home"
    gemini = put(
        home / ".gemini" / "settings.json",
        '{\n  // auth\n  "security": {"auth": {"selectedType": "gemini-api-key"}},\n'
        f'  "mcpServers": {{"vsphere": {json.dumps(VM_ENTRY)}}}\n}}\n',
    )
    lab = {"type": "local", "command": "mcvsphere", "args": [], "tools": ["*"]}
    copilot = put(
        home / ".copilot" / "mcp-config.json", json.dumps({"mcpServers": {"lab-vcenter": lab}})
    )

    code, checks = doctor("--host", "gemini", home=home, sim=sim)
    assert code == 1
    found = bypass_of(checks, gemini)
    assert found["status"] == "fail"
    assert "env.VCENTER_PASSWORD" in found["detail"]
    assert not set(HOOK_CHECKS) & set(checks)  # Gemini has no Claude Code hook
    assert not any(str(copilot) in c["detail"] for c in checks["gateway bypass"])

    install("gemini", home, sim, gateway_config, "--user")
    assert "// auth" in gemini.read_text()
    code, checks = doctor("--host", "gemini", home=home, sim=sim)
    assert bypass_of(checks, gemini)["status"] == "pass"
    assert checks["gateway setup"][0]["status"] == "pass"
    assert not any(str(copilot) in c["detail"] for c in checks["gateway bypass"])
    assert_only_the_missing_server_fails(checks)

    code, checks = doctor("--host", "copilot", "--config", str(gateway_config), home=home, sim=sim)
    found = bypass_of(checks, copilot)
    assert found["status"] == "warn"
    assert "lab-vcenter: reaches a VM server directly" in found["detail"]
    assert "no credentials in this file" in found["detail"]
    (setup,) = checks["gateway setup"]
    assert setup["status"] == "fail"  # nothing of Copilot's reaches the gateway
    assert "zerto-rewind install mcp-host copilot" in setup["fix"]

    code, checks = doctor(home=home, sim=sim)  # every host: both files, gateway setup found
    assert bypass_of(checks, gemini)["status"] == "pass"
    assert bypass_of(checks, copilot)["status"] == "warn"
    assert not set(HOOK_CHECKS) & set(checks)


def test_a_claude_code_hook_setup_never_reads_codex_s_config(
    sim: SimServer, tmp_path: Path, gateway_config: Path
) -> None:
    """With the Claude Code hook installed, doctor checks Claude Code's setup: Codex's
    file (a VM server with its password, beside it) is not read and no gateway change is
    advised; `--host codex` asks about Codex, and gets it."""
    home = tmp_path / "home"
    codex = put(
        home / ".codex" / "config.toml",
        '[mcp_servers.vsphere]\ncommand = "uvx"\nargs = ["mcvsphere"]\n\n'
        f'[mcp_servers.vsphere.env]\nVCENTER_PASSWORD = "{PASSWORD}"\n',
    )
    claude_server = {"command": "uvx", "args": ["mcvsphere"]}
    put(home / ".claude.json", json.dumps({"mcpServers": {"vsphere": claude_server}}))
    done = zr(
        "install", "claude-code", "--user", "--config", str(gateway_config), home=home, sim=sim
    )
    assert done.returncode == 0, done.stderr
    code, checks = doctor(home=home, sim=sim)
    failed = [c for group in checks.values() for c in group if c["status"] == "fail"]
    assert (code, failed) == (0, [])
    text = json.dumps(checks)
    assert str(codex) not in text
    assert "install mcp-host" not in text
    assert "gateway bypass" not in checks
    (hosts,) = checks["hosts"]
    assert "doctor --host HOST" in hosts["detail"]
    assert checks["hook installed"][0]["status"] == "pass"
    _code, codex_checks = doctor("--host", "codex", home=home, sim=sim)
    assert bypass_of(codex_checks, codex)["status"] == "fail"
