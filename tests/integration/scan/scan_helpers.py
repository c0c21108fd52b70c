"""What the scan's CLI tests share: ``zerto-rewind catalog scan`` run as a process."""

from __future__ import annotations

import subprocess
import sys

CLI = [sys.executable, "-m", "zerto_rewind"]


def scan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``zerto-rewind catalog scan ARGS`` in a process of its own; never raises on failure."""
    return subprocess.run(
        [*CLI, "catalog", "scan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
