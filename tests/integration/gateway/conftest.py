"""Fixtures shared by the gateway's integration tests: a simulator sandbox, an action log,
and the real gateway process over them (``start_gateway``, or ``gw`` as configured by default)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from integration.gateway.gateway_helpers import (
    GatewayProcess,
    StartGateway,
    gateway_config,
    gateway_process,
)
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


@pytest.fixture
def start_gateway(box: Sandbox, tmp_path: Path, actions_log: Path) -> Iterator[StartGateway]:
    """``start_gateway(**config)``: write the gateway's config into ``box`` (see
    ``gateway_config``: the stand-in upstream recording to ``actions_log`` unless
    ``upstream=``) and start ``zerto-rewind gateway --listen``; it runs until the test ends.
    ``process=`` passes ``gateway_process``'s options (``extra_args``, ``env``, ...)."""
    with ExitStack() as running:

        def start(*, process: dict[str, Any] | None = None, **config: Any) -> GatewayProcess:
            gateway_config(box, actions_log, **config)
            return running.enter_context(gateway_process(box, tmp_path, **(process or {})))

        yield start


@pytest.fixture
def gw(start_gateway: StartGateway) -> GatewayProcess:
    """The gateway over the stand-in upstream, configured by default."""
    return start_gateway()
