"""The guard service as thin hooks meet it: `zerto-rewind gateway --socket`, hook-only."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from zerto_rewind.testing import Sandbox


@contextmanager
def guard_service(box: Sandbox, run: Path) -> Iterator[str]:
    """Start the service for ``box``'s config with its socket in ``run``; yields its URL."""
    box.write_config(state_dir=box.state_dir, log=box.log_path)
    sock, ready, stderr = run / "guard.sock", run / "ready.json", run / "service.stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zerto_rewind", "gateway", "--socket", str(sock),
             "--ready-file", str(ready)],
            env=box.env(),
            stdin=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, "the guard service did not start in 30 s"
            time.sleep(0.05)
        yield f"unix:{sock}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
