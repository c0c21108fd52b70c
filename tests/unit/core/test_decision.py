"""The guard's host-neutral values and the decision-log record (decision.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.config import load_settings
from zerto_rewind.core.catalog import classify
from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall, VpgOutcome, fmt_time

PASSWORD = "Pa55w0rd-do-not-log-9f3k"
LOG_KEYS = {
    "time",
    "origin",
    "session_id",
    "tool_use_id",
    "tool",
    "row",
    "decision",
    "vms",
    "vpgs",
    "vpg_ids",
    "site_types",
    "checkpoint_ids",
    "tags",
    "requested_at",
    "expected_at",
    "landed_at",
    "retry_after",
    "elapsed_ms",
    "reason",
}
T0 = 1_715_953_509.25  # 2024-05-17T13:45:09.250Z


def secret_input() -> dict[str, Any]:
    """A tool_input that carries a password in several places next to the VM name."""
    return {
        "name": "web01.corp.example",
        "password": PASSWORD,
        "guest": {"user": "root", "password": PASSWORD},
        "command": f"ssh root@web01 'echo {PASSWORD} | sudo -S reboot'",
        "env": [f"PW={PASSWORD}"],
    }


def confirmed(vms: tuple[str, ...]) -> Decision:
    """A confirmed decision on one VPG, as the guard builds it."""
    vpg = VpgOutcome(
        "vpg-id-1",
        "VPG One",
        vms,
        site_kind="vcenter",
        tag="zr vsphere.power_off web01 s=0f3c9a1e 2024-05-17T13:45:09Z",
        checkpoint_id="cp-7180",
        requested_at=T0,
        expected_at=T0 + 5,
        landed_at=T0 + 4,
    )
    return Decision(
        Row.CONFIRMED,
        Outcome.CONTEXT,
        "mcp__vsphere__power_off",
        context="checkpoint cp-7180",
        vms=vms,
        vpgs=[vpg],
        elapsed_ms=4200,
    )


def test_log_record_has_documented_keys() -> None:
    """A record has exactly the documented keys, with ids, names and ISO times."""
    call = ToolCall(
        "mcp__vsphere__power_off",
        secret_input(),
        session_id="sess-1",
        tool_use_id="toolu_1",
        started_at=T0,
    )
    record = confirmed(("web01",)).log_record(call)
    assert set(record) == LOG_KEYS
    assert record["origin"] == "hook"
    assert (record["session_id"], record["tool_use_id"]) == ("sess-1", "toolu_1")
    assert (record["tool"], record["row"], record["decision"]) == (
        "mcp__vsphere__power_off",
        "confirmed",
        "context",
    )
    assert record["vms"] == ["web01"]
    assert (record["vpgs"], record["vpg_ids"], record["site_types"]) == (
        ["VPG One"],
        ["vpg-id-1"],
        ["vcenter"],
    )
    assert record["checkpoint_ids"] == ["cp-7180"]
    assert record["tags"] == ["zr vsphere.power_off web01 s=0f3c9a1e 2024-05-17T13:45:09Z"]
    assert record["requested_at"] == "2024-05-17T13:45:09.250Z"
    assert record["expected_at"] == "2024-05-17T13:45:14.250Z"
    assert record["landed_at"] == "2024-05-17T13:45:13.250Z"
    assert record["retry_after"] is None
    assert record["elapsed_ms"] == 4200
    assert abs(time.time() - _parse(record["time"])) < 60
    json.dumps(record)  # one JSON line


def _parse(stamp: str) -> float:
    """Epoch seconds of a fmt_time string."""
    import calendar

    base, millis = stamp.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(millis) / 1000


def test_record_without_vpgs() -> None:
    """A decision that reached no VPG logs empty lists and null times."""
    decision = Decision(Row.UNLISTED, Outcome.PROMPT, "mcp__x__y", reason="unlisted tool")
    record = decision.log_record(ToolCall("mcp__x__y", {}))
    assert set(record) == LOG_KEYS
    assert record["vms"] == record["vpgs"] == record["checkpoint_ids"] == record["tags"] == []
    assert record["requested_at"] is record["landed_at"] is None
    assert (record["session_id"], record["reason"]) == (None, "unlisted tool")


def test_pending_record_has_retry_after() -> None:
    """A pending decision logs its retry time and the tag it is waiting for."""
    decision = confirmed(("web01",)).but(
        row=Row.PENDING, outcome=Outcome.DENY, retry_after=T0 + 130
    )
    decision.vpgs[0].checkpoint_id = decision.vpgs[0].landed_at = None
    record = decision.log_record(ToolCall("t", {}, origin="mcp"))
    assert record["retry_after"] == "2024-05-17T13:47:19.250Z"
    assert record["checkpoint_ids"] == []
    assert record["landed_at"] is None
    assert record["origin"] == "mcp"


@pytest.fixture
def ssh_catalog(tmp_path: Path) -> Any:
    """A catalog whose SSH tool finds the VM with a pattern and whose power tool by name."""
    config = {
        "zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "ZS"},
        "tools": {
            "mcp__ssh__exec": {
                "vm_arg": {"path": "command", "pattern": r"ssh\s+(?:\S+@)?(?P<vm>[\w.-]+)"}
            },
            "mcp__vsphere__power_off": {"vm_arg": "name"},
        },
        "vm_map": {"strip_domain": True},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return load_settings({"HOME": str(tmp_path)}, path=str(path)).catalog


@pytest.mark.parametrize("tool", ["mcp__vsphere__power_off", "mcp__ssh__exec"])
def test_log_record_never_contains_argument_values(ssh_catalog: Any, tool: str) -> None:
    """A password anywhere in tool_input never reaches the log; the VM name does."""
    tool_input = secret_input()
    classification = classify(tool, tool_input, ssh_catalog)
    assert classification.vms == ("web01",)
    call = ToolCall(tool, tool_input, session_id="s", tool_use_id="u")
    for decision in (
        confirmed(classification.vms),
        Decision(Row.NO_VM, Outcome.PROMPT, tool, reason=classification.problem or ""),
        Decision(Row.VM_UNKNOWN, Outcome.PROMPT, tool, vms=classification.vms),
    ):
        record = decision.log_record(call)
        line = json.dumps(record, ensure_ascii=False)
        for value in (PASSWORD, "root", "sudo", "corp.example", "PW="):  # other argument values
            assert value not in line
        assert record["vms"] == ([] if decision.row == Row.NO_VM else ["web01"])


def test_no_vm_problem_names_paths_not_values(ssh_catalog: Any) -> None:
    """When no VM is found, the logged reason names the paths tried, not the arguments."""
    tool_input = {"command": f"echo {PASSWORD}"}
    classification = classify("mcp__ssh__exec", tool_input, ssh_catalog)
    assert classification.problem is not None
    decision = Decision(Row.NO_VM, Outcome.PROMPT, "mcp__ssh__exec", reason=classification.problem)
    line = json.dumps(decision.log_record(ToolCall("mcp__ssh__exec", tool_input)))
    assert PASSWORD not in line
    assert "command (pattern)" in line


@pytest.mark.parametrize(
    ("epoch", "text"),
    [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (T0, "2024-05-17T13:45:09.250Z"),
        (T0 + 0.9999, "2024-05-17T13:45:10.249Z"),
    ],
)
def test_fmt_time(epoch: float, text: str) -> None:
    """Times are ISO-8601 UTC with milliseconds and a Z."""
    assert fmt_time(epoch) == text


def test_tool_call_defaults() -> None:
    """A ToolCall defaults to origin hook and a start time of now."""
    before = time.time()
    call = ToolCall("t", {})
    assert call.origin == "hook"
    assert before <= call.started_at <= time.time()


def test_a_decision_is_immutable_once_made() -> None:
    """A step that changes the answer makes a new decision; the one it was given is unchanged."""
    import dataclasses

    decision = confirmed(("web01",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.outcome = Outcome.DENY  # type: ignore[misc]
    denied = decision.but(outcome=Outcome.DENY, reason="no")
    assert (decision.outcome, decision.reason) == (Outcome.CONTEXT, "")
    assert (denied.outcome, denied.reason, denied.vms) == (Outcome.DENY, "no", ("web01",))
