"""The guard service as thin hooks meet it: `zerto-rewind gateway --socket`, hook-only."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from zerto_rewind.testing import Sandbox


@contextmanager
def guard_service(box: Sandbox, run: Path, *extra: str, write_config: bool = True) -> Iterator[str]:
    """Start the service for ``box``'s config with its socket in ``run``; yields its URL.

    ``extra`` are more ``gateway`` arguments (e.g. ``--approvals-socket PATH``);
    ``write_config=False`` keeps a config the caller wrote.
    """
    if write_config:
        box.write_config(state_dir=box.state_dir, log=box.log_path)
    sock, ready, stderr = run / "guard.sock", run / "ready.json", run / "service.stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zerto_rewind", "gateway", "--socket", str(sock),
             "--ready-file", str(ready), *extra],
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


@contextmanager
def sandbox_service(
    factory: pytest.TempPathFactory, *, guard_timeout_s: float
) -> Iterator[tuple[Sandbox, str]]:
    """A sandbox (the ZVM simulator) and its guard service, for a module: (box, service URL)."""
    root = factory.mktemp("svc")
    with (
        Sandbox(str(root / "box"), guard={"timeout_s": guard_timeout_s}) as box,
        guard_service(box, factory.mktemp("run")) as url,
    ):
        yield box, url


# Module-scoped fixtures for a test module that needs one sandbox and its service: import
# them (``from support.service import served_box, served_url, served``); the guard budget is
# the module's GUARD_BUDGET_S.
@pytest.fixture(scope="module")
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Sandbox, str]]:
    budget = float(getattr(request.module, "GUARD_BUDGET_S", 10.0))
    with sandbox_service(tmp_path_factory, guard_timeout_s=budget) as pair:
        yield pair


@pytest.fixture(scope="module", name="box")
def served_box(served: tuple[Sandbox, str]) -> Sandbox:
    """The sandbox: the ZVM simulator, the config and the log the service uses."""
    return served[0]


@pytest.fixture(scope="module", name="service")
def served_url(served: tuple[Sandbox, str]) -> str:
    """The guard service's URL (``zerto-rewind gateway --socket``), hook-only."""
    return served[1]
