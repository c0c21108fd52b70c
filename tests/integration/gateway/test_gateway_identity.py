"""The identity check through a real gateway process and a real stdio upstream: a resolver
that errs, is slow, answers no identity or names another VM makes the call prompt, and
with no approver it is refused before the mutating tool runs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.testing import DEMO_CATALOG, Sandbox

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).with_name("resolver_server.py")
RESOLVER = {"tool": "get_vm_id", "arg": "name", "id_path": "moid", "timeout_s": 1.5}


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    guard = {"timeout_s": 6.0, "landing_allowance_s": 0.5}
    catalog = {**DEMO_CATALOG, "catalog": {"resolvers": {"vsphere": RESOLVER}}}
    with Sandbox(str(tmp_path / "box"), guard=guard, catalog=catalog) as sandbox:
        yield sandbox


@pytest.fixture
def control(tmp_path: Path) -> Path:
    return tmp_path / "resolver-control"


@pytest.fixture
def actions(tmp_path: Path) -> Path:
    return tmp_path / "resolver-actions.jsonl"


@pytest.fixture
def gw(box: Sandbox, tmp_path: Path, control: Path, actions: Path) -> Iterator[GatewayProcess]:
    upstream: dict[str, Any] = {
        "command": [sys.executable, str(SERVER)],
        "env": {"RESOLVER_CONTROL": str(control), "RESOLVER_ACTIONS": str(actions)},
        "timeout_s": 10,
    }
    gateway_config(box, upstream=upstream)
    with gateway_process(box, tmp_path) as process:
        yield process


def ran(actions: Path) -> int:
    return len(actions.read_text().splitlines()) if actions.exists() else 0


async def test_the_same_vm_runs_and_each_fault_prompts_and_is_refused(
    gw: GatewayProcess, box: Sandbox, control: Path, actions: Path
) -> None:
    async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
        result = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
        assert not result.is_error, text_of(result)
        assert ran(actions) == 1
        assert decisions(box)[-1]["row"] == "confirmed"
        for mode, said in (
            ("vm-202", "they are different VMs"),
            ("error", "answered with an error"),
            ("missing", "without a value at 'moid'"),
            ("slow", "did not answer get_vm_id within 1.5 s"),
        ):
            control.write_text(mode)
            result = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
            assert result.is_error, mode
            assert said in text_of(result), (mode, text_of(result))
            assert "was not run" in text_of(result)
            line = decisions(box)[-1]
            assert (line["row"], line["decision"], line["answer"]) == (
                "vm_identity",
                "prompt",
                "no_approver",
            )
            assert ran(actions) == 1, f"{mode}: the mutating tool ran"
