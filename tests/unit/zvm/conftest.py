"""Fixtures for the ZVM client's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from unit.zvm.zvm_fakes import FakeClock, FakeZvm, make_settings
from zerto_rewind.zvm import TokenCache, ZvmClient


@pytest.fixture
def zvm() -> FakeZvm:
    """A fresh scripted ZVM."""
    return FakeZvm()


@pytest.fixture
def clock() -> FakeClock:
    """A fake monotonic clock."""
    return FakeClock()


@pytest.fixture
def client(zvm: FakeZvm, clock: FakeClock, tmp_path: Any) -> Iterator[ZvmClient]:
    """A ZvmClient wired to the scripted ZVM, a fake clock and a temp token cache."""
    with ZvmClient(
        make_settings(),
        token_cache=TokenCache(str(tmp_path / "state")),
        transport=httpx.MockTransport(zvm),
        clock=clock,
        sleep=clock.sleep,
    ) as c:
        yield c
