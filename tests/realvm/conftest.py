"""Fixtures for tests against the real VM side: govmomi's vCenter simulator and mcvsphere.

- ``realvm_ready`` (session): an ERROR, never a skip, when ``scripts/realvm-setup`` has not been
  run or its results are stale; the message says what is missing and what to run.
- ``vcenter``: a fresh simulator (six VMs, all powered on) on a 127.0.0.X:443 of its own,
  stopped after the test.
- ``anyio_backend``: the async tests run on asyncio.

Every test collected under this directory gets the ``slow`` marker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.realvm import SETUP_SCRIPT, VCenter, setup_problems, start_vcsim

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def realvm_ready() -> None:
    problems = setup_problems()
    if problems:
        pytest.fail(
            f"the real VM side is not set up: {'; '.join(problems)}.\n"
            f"Run {SETUP_SCRIPT} (installs Go and govmomi from apt, builds vcsim, "
            "creates the mcvsphere venv), then rerun the tests.",
            pytrace=False,
        )


@pytest.fixture
def vcenter(realvm_ready: None, tmp_path: Path) -> Iterator[VCenter]:
    with start_vcsim(tmp_path / "vcsim") as simulator:
        yield simulator.vcenter
