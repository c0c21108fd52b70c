"""Fixtures for the hook's integration tests: a simulator and a wired config per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zerto_rewind.testing import Sandbox, fast_sim_config


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    """A fast simulator (vCenter 2 s, AWS 20 s) and a config with a 10 s guard budget."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as sandbox:
        yield sandbox


@pytest.fixture
def slow_aws_box(tmp_path: Path) -> Iterator[Sandbox]:
    """AWS cadence 12 s against a 5 s budget: every AWS tag lands after the budget."""
    config = fast_sim_config(cadences={"vcenter": 2.0, "hyperv": 2.0, "azure": 6.0, "aws": 12.0})
    with Sandbox(str(tmp_path / "aws"), sim_config=config, guard={"timeout_s": 5}) as sandbox:
        yield sandbox
