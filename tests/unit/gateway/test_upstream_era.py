"""The upstream's remembered protocol era (gateway/upstream.py, EraMemo).

A server that answered the handshake rather than ``server/discover`` is remembered, in
memory and in a 0600 file, so later connections skip the probe that mcvsphere warns
about; a remembered handshake that fails is forgotten. The socket-level behaviour is in
tests/integration/gateway/test_gateway_upstream_era.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from zerto_rewind.config.settings import UpstreamSettings
from zerto_rewind.gateway.upstream import EraMemo, Upstream


def memo(tmp_path: Path) -> EraMemo:
    return EraMemo("vsphere", str(tmp_path / "state" / "upstreams" / "vsphere.era"))


def test_nothing_known_means_probe(tmp_path: Path) -> None:
    assert memo(tmp_path).handshake_only() is False
    assert EraMemo("vsphere", None).handshake_only() is False


def test_a_handshake_is_remembered_across_processes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another EraMemo on the same file (the next stdio gateway) knows it; one log line says
    why the upstream's log may show warnings about the probe."""
    first = memo(tmp_path)
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.gateway"):
        first.remember_handshake("2025-11-25")
        first.remember_handshake("2025-11-25")
    assert first.handshake_only()
    assert memo(tmp_path).handshake_only()
    path = Path(first.path or "")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "harmless" in lines[0]
    assert "2025-11-25" in lines[0]


def test_forgotten_means_probe_again(tmp_path: Path) -> None:
    m = memo(tmp_path)
    m.remember_handshake("2025-06-18")
    m.forget()
    assert m.handshake_only() is False
    assert memo(tmp_path).handshake_only() is False


def test_an_unreadable_or_strange_file_means_probe(tmp_path: Path) -> None:
    m = memo(tmp_path)
    path = Path(m.path or "")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe modern?")
    assert m.handshake_only() is False


def test_an_unwritable_state_dir_still_remembers_in_memory(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    m = EraMemo("vsphere", str(blocked / "upstreams" / "vsphere.era"))
    m.remember_handshake("2025-06-18")
    assert m.handshake_only()


class _Refused(Exception):
    pass


@asynccontextmanager
async def refusing_transport() -> AsyncIterator[Any]:
    """A transport that cannot be opened, as a server that refuses the handshake."""
    raise _Refused
    yield  # pragma: no cover


def test_a_remembered_handshake_that_fails_is_forgotten(tmp_path: Path) -> None:
    """The next attempt probes server/discover again: a server upgraded to 2026-07-28 only
    is reached after one failed connection, not never."""
    upstream = Upstream(UpstreamSettings(name="vsphere", command=["true"]))
    upstream.era = memo(tmp_path)
    upstream.era.remember_handshake("2025-06-18")

    async def connect() -> None:
        async with upstream._connect(refusing_transport()):
            pytest.fail("the connection must not open")

    with pytest.raises(_Refused):
        anyio.run(connect)
    assert upstream.era.handshake_only() is False
    assert memo(tmp_path).handshake_only() is False
