"""Fixtures shared by the gateway's integration tests: a simulator sandbox, an action log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zerto_rewind.testing import Sandbox


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    """A fast simulator and a config with a 10 s guard budget."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as sandbox:
        yield sandbox


@pytest.fixture
def actions_log(tmp_path: Path) -> Path:
    """Where the stand-in VM server records each call that reached it."""
    return tmp_path / "actions.jsonl"
