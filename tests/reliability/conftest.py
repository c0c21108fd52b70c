"""Fixtures for the reliability suite: one simulator per module, a fresh state per test."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from reliability.reliability_helpers import GUARD, Bench
from zerto_rewind.testing import Sandbox


@pytest.fixture(scope="module")
def module_box() -> Iterator[Sandbox]:
    """One fast simulator (vCenter 2 s, Azure 6 s, AWS 20 s) for a whole test module."""
    with Sandbox(tempfile.mkdtemp(prefix="zr-rel-"), guard=GUARD) as box:
        yield box


@pytest.fixture
def bench(module_box: Sandbox, tmp_path: Path) -> Iterator[Bench]:
    """The module's simulator, reset, with a state directory and log of this test's own."""
    module_box.control("POST", "/_sim/reset")
    module_box.write_config()
    os.makedirs(tmp_path, exist_ok=True)
    yield Bench(module_box, tmp_path)
    module_box.control("DELETE", "/_sim/faults")
