"""``zerto-rewind catalog scan`` against the real mcvsphere (PyPI) talking to govmomi's vcsim.

The scan starts mcvsphere from its own venv with the SDK's stdio client, exactly as a user would
(`zerto-rewind catalog scan --server vsphere -- mcvsphere`), and must give the catalog kept in
tests/data/catalogs (scanned from the raw dump) for all 94 tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from realvm import ROOT, VCenter, mcvsphere_command


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
    assert len(scanned["read_only_tools"]) == 36
    assert len(scanned["read_only_tools"]) + len(scanned["tools"]) == 94
