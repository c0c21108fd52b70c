"""The identity check through a real gateway process and a real stdio upstream: a resolver
that errs, is slow, answers no identity or names another VM makes the call prompt, and
with no approver it is refused before the mutating tool runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    StartGateway,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.sim.models import stable_guid
from zerto_rewind.testing import DEMO_CATALOG, THREE_ZVMS, Sandbox

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).with_name("resolver_server.py")
# The simulator's VmIdentifier is <site identifier>.<moref>: its site is the vCenter.
RESOLVER = {"tool": "get_vm_id", "arg": "name", "id_path": "moid", "timeout_s": 1.5,
            "vcenter": stable_guid("site", "zvm-local")}  # fmt: skip


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
def gw(start_gateway: StartGateway, control: Path, actions: Path) -> GatewayProcess:
    upstream: dict[str, Any] = {
        "command": [sys.executable, str(SERVER)],
        "env": {"RESOLVER_CONTROL": str(control), "RESOLVER_ACTIONS": str(actions)},
        "timeout_s": 10,
    }
    return start_gateway(upstream=upstream)


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
        assert "checkpoint protects this" in text_of(result)
        assert "not verified" not in text_of(result)  # the resolver confirmed the VM
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


async def test_without_an_identity_check_the_note_says_the_vm_was_not_verified(
    tmp_path: Path, control: Path, actions: Path
) -> None:
    """The same server with no catalog.resolvers: the call runs on its checkpoint, and the
    note the agent gets says plainly that nothing confirmed which VM changed."""
    guard = {"timeout_s": 6.0, "landing_allowance_s": 0.5}
    with Sandbox(str(tmp_path / "plain"), guard=guard, catalog=dict(DEMO_CATALOG)) as plain:
        upstream: dict[str, Any] = {
            "command": [sys.executable, str(SERVER)],
            "env": {"RESOLVER_CONTROL": str(control), "RESOLVER_ACTIONS": str(actions)},
            "timeout_s": 10,
        }
        gateway_config(plain, upstream=upstream)
        with gateway_process(plain, tmp_path) as process:
            async with client(process.endpoint(), TOKENS["agent-a"]) as c:
                result = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
        assert not result.is_error, text_of(result)
        assert ran(actions) == 1
        assert decisions(plain)[-1]["row"] == "confirmed"
        text = text_of(result)
        assert "checkpoint protects this" in text
        assert "The VM's identity was not verified" in text
        assert "as 'jp-ubuntu', found by name" in text
        note = (result.structured_content or {}).get("zerto-rewind", {}).get("note", "")
        assert not result.structured_content or "not verified" in note


# web-42 of hq and db-42 of dr carry the same moref, vm-42, each in its own vCenter.
SAME_MOREF = {
    **THREE_ZVMS,
    "vpgs": [
        *THREE_ZVMS["vpgs"],
        {"name": "hq-42", "site_kind": "vcenter", "protected_site": "hq",
         "recovery_site": "lab", "vms": [{"name": "web-42", "vcenter_id": "vm-42"}]},
        {"name": "dr-42", "site_kind": "vcenter", "protected_site": "dr",
         "recovery_site": "lab", "vms": [{"name": "db-42", "vcenter_id": "vm-42"}]},
    ],
}  # fmt: skip


async def test_a_moref_of_another_vcenter_never_matches(
    tmp_path: Path, control: Path, actions: Path
) -> None:
    """Issue 28: the VM server answers vm-42 of dr's vCenter for hq's web-42 (hq.vm-42):
    with the defaults (vcenter read from the answer) it is another VM, a prompt refused
    with no approver, and the VM server saw no mutating call; hq's own vm-42 runs."""
    guard = {"timeout_s": 8.0, "landing_allowance_s": 0.5}
    resolver = {"tool": "get_vm_id", "arg": "name", "id_path": "moid",
                "vcenter_path": "vcenter", "timeout_s": 3}  # fmt: skip
    catalog = {**DEMO_CATALOG, "catalog": {"resolvers": {"vsphere": resolver}}}
    with Sandbox(str(tmp_path / "estate"), guard=guard, catalog=catalog, estate=SAME_MOREF,
                 zvm={"connect_timeout_s": 1.0, "read_timeout_s": 2.0}) as box:  # fmt: skip
        upstream: dict[str, Any] = {
            "command": [sys.executable, str(SERVER)],
            "env": {"RESOLVER_CONTROL": str(control), "RESOLVER_ACTIONS": str(actions)},
            "timeout_s": 10,
        }
        gateway_config(box, upstream=upstream)
        hq, dr = stable_guid("site", "hq"), stable_guid("site", "dr")
        with gateway_process(box, tmp_path) as process:
            async with client(process.endpoint(), TOKENS["agent-a"]) as c:
                control.write_text(json.dumps({"moid": "vm-42", "vcenter": dr}))
                other = await c.call_tool("power_off_vm", {"name": "web-42"})
                line = decisions(box)[-1]
                assert other.is_error
                assert f"vm-42 in vCenter {dr}" in text_of(other)
                assert f"vm-42 in vCenter {hq}" in text_of(other)
                assert (line["row"], line["decision"]) == ("vm_identity", "prompt")
                assert ran(actions) == 0, "another vCenter's vm-42 was changed"
                control.write_text(json.dumps({"moid": "vm-42", "vcenter": hq}))
                same = await c.call_tool("power_off_vm", {"name": "web-42"})
                assert not same.is_error, text_of(same)
                assert decisions(box)[-1]["row"] == "confirmed"
                assert ran(actions) == 1
            assert box.tag_requests("hq-42", site="hq") >= 1
            assert box.tag_requests("dr-42") == 0
