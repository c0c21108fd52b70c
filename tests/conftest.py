"""Suite-wide fixtures: a clean environment for every test."""

from __future__ import annotations

import pytest

_OURS = (
    "ZERTO_REWIND_CONFIG",
    "ZERTO_HOOK_UNKNOWN",
    "ZERTO_HOOK_GUARD_TIMEOUT",
    "ZERTO_HOOK_LOG",
    "ZERTO_REWIND_STATE_DIR",
)


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's own zerto-rewind settings."""
    for name in _OURS:
        monkeypatch.delenv(name, raising=False)
