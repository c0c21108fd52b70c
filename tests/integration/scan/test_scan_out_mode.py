"""``catalog scan --out`` as its own process: the mode and owner kept, secrets kept private.

``catalog scan --merge CFG --out CFG`` is the README's order for a gateway config
holding VM credentials: the rewrite must leave it 0600 (``install mcp-host``
refuses anything wider) and never open a secret-bearing file to others.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from integration.scan.scan_helpers import scan
from support.config import OFFLINE_ZVM, write_config

PASSWORD = "vc-Pa55-scan-out"
TOOLS = {"tools": [{"name": "power_off_vm", "inputSchema": {"properties": {"name": {}}}}]}
GATEWAY: dict[str, Any] = {
    "zvm": OFFLINE_ZVM,
    "upstreams": {"vsphere": {"command": ["mcvsphere"], "env": {"VCENTER_PASSWORD": PASSWORD}}},
}


def merge_in_place(tmp_path: Path, config: Path) -> Any:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    return scan(
        "--server", "vsphere", "--tools-json", str(tools), "--quiet",
        "--merge", str(config), "--out", str(config),
    )  # fmt: skip


def test_merge_into_itself_keeps_0600(tmp_path: Path) -> None:
    """The gateway config stays 0600, its credentials in, the new tool added."""
    config = write_config(tmp_path, GATEWAY, name="gateway.json")
    before = os.stat(config)
    run = merge_in_place(tmp_path, config)
    assert run.returncode == 0, run.stderr
    after = os.stat(config)
    assert stat.S_IMODE(after.st_mode) == 0o600
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert after.st_ino != before.st_ino  # replaced atomically, not written over
    merged = json.loads(config.read_text())
    assert merged["upstreams"]["vsphere"]["env"]["VCENTER_PASSWORD"] == PASSWORD
    assert "mcp__vsphere__power_off_vm" in merged["tools"]
    assert PASSWORD not in run.stdout + run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_the_owner_is_kept(tmp_path: Path) -> None:
    """A config owned by another user (root rewriting it) stays that user's."""
    config = write_config(tmp_path, GATEWAY, name="gateway.json", mode=0o640)
    config.write_text(json.dumps({**GATEWAY, "upstreams": {}}))  # nothing secret: 0640 is fine
    os.chown(config, 65534, 65534)
    run = merge_in_place(tmp_path, config)
    assert run.returncode == 0, run.stderr
    after = os.stat(config)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (65534, 65534, 0o640)


@pytest.mark.parametrize("mode", [0o640, 0o644])
def test_a_secret_bearing_config_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    """Credentials in a group- or world-readable file: refused, the file untouched."""
    config = write_config(tmp_path, GATEWAY, name="gateway.json", mode=mode)
    before = config.read_bytes()
    run = merge_in_place(tmp_path, config)
    assert run.returncode == 1
    assert "would hold credentials (upstreams.vsphere.env)" in run.stderr
    assert f"mode {mode:04o}" in run.stderr
    assert "nothing was written" in run.stderr
    assert PASSWORD not in run.stderr
    assert config.read_bytes() == before
    assert stat.S_IMODE(os.stat(config).st_mode) == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gateway.json", "tools.json"]


def test_a_new_file_is_0600_and_a_plain_catalog_keeps_its_mode(tmp_path: Path) -> None:
    """A new --out is 0600; a 0644 catalog with nothing secret stays 0644."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    new = tmp_path / "catalog.json"
    run = scan("--server", "vsphere", "--tools-json", str(tools), "--quiet", "--out", str(new))
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600
    new.chmod(0o644)
    run = scan("--server", "vsphere", "--tools-json", str(tools), "--quiet", "--out", str(new))
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o644
