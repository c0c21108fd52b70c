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
