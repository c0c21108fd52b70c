"""``zerto-rewind catalog scan`` against real VM MCP servers from PyPI.

The scan starts mcvsphere from its own venv with the SDK's stdio client, exactly as a user would
(`zerto-rewind catalog scan --server vsphere -- mcvsphere`), talking to govmomi's vcsim, and must
give the catalog kept in tests/data/catalogs (scanned from the raw dump) for all 94 tools. Two
more servers, installed by scripts/realvm-setup (or scripts/dump-server-tools), answer
tools/list without a backend and must give their kept catalogs too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.realvm import ROOT, VCenter, mcvsphere_command

SERVERS = ROOT / ".cache" / "realvm" / "servers"
DATA = ROOT / "tests" / "data"


def scan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "catalog", "scan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_scan_of_live_mcvsphere_matches_the_kept_catalog(vcenter: VCenter, tmp_path: Path) -> None:
    env = dict(os.environ, **vcenter.mcvsphere_env())
    run = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "catalog", "scan", "--server", "mcvsphere",
         "--", *mcvsphere_command()],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    kept = json.loads((ROOT / "tests" / "data" / "catalogs" / "mcvsphere.catalog.json").read_text())
    scanned = json.loads(run.stdout)
    assert scanned == kept
    assert len(scanned["read_only_tools"]) == 35  # download_from_datastore has host_paths
    assert scanned["tools"]["mcp__mcvsphere__download_from_datastore"]["host_paths"] == ["save_to"]
    assert len(scanned["read_only_tools"]) + len(scanned["tools"]) == 94
    assert scanned["catalog"]["resolvers"]["mcvsphere"]["tool"] == "get_vm_info"


def test_doctor_passes_the_catalog_checks_of_a_fresh_mcvsphere_scan(
    vcenter: VCenter, tmp_path: Path
) -> None:
    """The scan merged into a config as-is: doctor's catalog checks and the live comparison
    with the running mcvsphere pass (the ZVM is not reachable here, which fails elsewhere)."""
    env = dict(os.environ, **vcenter.mcvsphere_env(), ZPW="secret")
    config = tmp_path / "zerto-rewind.json"
    zvm = {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "ZPW"}
    config.write_text(json.dumps({"zvm": zvm}))
    config.chmod(0o600)
    merged = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "catalog", "scan", "--server", "mcvsphere",
         "--quiet", "--merge", str(config), "--out", str(config), "--", *mcvsphere_command()],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr[-3000:]
    doctor = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "doctor", "--config", str(config), "--settings",
         "/nonexistent", "--json", "--server", "mcvsphere", "--", *mcvsphere_command()],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    for name in ("vm_arg", "catalog ties", "catalog patterns", "live: unlisted",
                 "live: read-only", "live: vm_arg", "live: stale", "live: pins",
                 "live: patterns", "live: identity"):  # fmt: skip
        assert checks[name]["status"] == "pass", checks[name]


# ------------------------------------------------------------------ real servers from PyPI

REAL = {
    # package: env that lets it answer tools/list without a backend
    "vsphere-mcp-server": {"VSPHERE_USERNAME": "user", "VSPHERE_PASSWORD": "pass"},
    "proxmox-mcp-server": {
        "PROXMOX_HOST": "127.0.0.1",
        "PROXMOX_USER": "root@pam",
        "PROXMOX_PASSWORD": "dummy",
    },
}


@pytest.mark.parametrize("package", sorted(REAL))
def test_scan_real_server_over_stdio(package: str, tmp_path: Path) -> None:
    """Started from its own venv by the SDK stdio client; same catalog as the one kept."""
    command = SERVERS / package / "bin" / package
    if not command.exists():
        pytest.fail(f"{command} is missing: run scripts/dump-server-tools {package}", pytrace=False)
    env = dict(os.environ, HOME=str(tmp_path), **REAL[package])
    run = scan("--server", package, "--quiet", "--", str(command), env=env)
    assert run.returncode == 0, run.stderr
    kept = json.loads((DATA / "catalogs" / f"{package}.catalog.json").read_text())
    assert json.loads(run.stdout) == kept
