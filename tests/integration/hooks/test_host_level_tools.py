"""Issue 13 §2: tools that take no VM — fixed ``vpgs`` and a per-tool ``decision``.

Through the hook as a subprocess, against the simulator. Each test fails on the
behaviour before the keys existed (they were config errors, and a tool with no
VM argument prompted with "fix vm_arg").
"""

from __future__ import annotations

from pathlib import Path

from zerto_rewind.testing import DEMO_CATALOG, Sandbox

REBOOT_HOST = "mcp__vsphere__reboot_host"
CREATE_VM = "mcp__vsphere__create_vm"
MAINTENANCE = "mcp__vsphere__enter_maintenance_mode"


def _catalog(**tools: dict[str, object]) -> dict[str, object]:
    merged = {**DEMO_CATALOG["tools"], **tools}
    return {**DEMO_CATALOG, "tools": merged}


def test_fixed_vpgs_are_tagged_before_a_host_level_call(tmp_path: Path) -> None:
    """``vpgs``: every named VPG gets a landed tag; the context names each VPG and checkpoint."""
    catalog = _catalog(**{REBOOT_HOST: {"vpgs": ["jp-local", "paused-vpg"]}})
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        run = box.run_hook(REBOOT_HOST, {"host": "esx-01"})
        # paused-vpg cannot take a tag: the most restrictive row wins, nothing is tagged
        assert run.decision == "deny"
        assert "paused-vpg" in run.reason
        assert box.tag_requests() == 0
    catalog = _catalog(**{REBOOT_HOST: {"vpgs": ["jp-local"]}})
    with Sandbox(str(tmp_path / "box2"), guard={"timeout_s": 10}, catalog=catalog) as box:
        run = box.run_hook(REBOOT_HOST, {"host": "esx-01"})
        assert run.returncode == 0
        out = run.output
        assert out is not None
        context = out["additionalContext"]
        record = box.log_records()[-1]
        assert record["row"] == "confirmed"
        assert record["vpgs"] == ["jp-local"]
        assert record["checkpoint_ids"][0] in context
        assert "jp-local" in context
        assert box.tag_requests("jp-local") == 1


def test_unknown_fixed_vpg_is_denied(tmp_path: Path) -> None:
    """A VPG name the ZVM does not know: deny (fail closed), naming the VPG."""
    catalog = _catalog(**{REBOOT_HOST: {"vpgs": ["no-such-vpg"]}})
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        run = box.run_hook(REBOOT_HOST, {})
        assert run.decision == "deny"
        assert "no-such-vpg" in run.reason
        assert box.log_records()[-1]["row"] == "failed"


def test_decision_allow_runs_a_create_call_and_logs_why(tmp_path: Path) -> None:
    """``decision: allow`` for a tool that changes no existing VM: exit 0, logged with a reason."""
    catalog = _catalog(**{CREATE_VM: {"decision": "allow"}})
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        run = box.run_hook(CREATE_VM, {"name": "new-vm"})
        assert (run.returncode, run.stdout) == (0, "")
        record = box.log_records()[-1]
        assert (record["row"], record["decision"]) == ("no_vm", "none")
        assert "decision: allow" in record["reason"]
        assert box.tag_requests() == 0


def test_decision_deny_and_default_prompt_never_recommend_vm_arg(tmp_path: Path) -> None:
    """No VM argument: the message says what an operator can configure, never "fix vm_arg"."""
    catalog = _catalog(**{MAINTENANCE: {"decision": "deny"}, REBOOT_HOST: {}})
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        denied = box.run_hook(MAINTENANCE, {"host": "esx-01"})
        assert denied.decision == "deny"
        asked = box.run_hook(REBOOT_HOST, {"host": "esx-01"})
        assert asked.decision == "ask"
        for reason in (denied.reason, asked.reason):
            assert "vm_arg" not in reason
            assert "zerto-rewind config" not in reason
            assert "operator can configure which VPGs" in reason


def test_regex_vm_unknown_shows_pattern_and_matched_text(tmp_path: Path) -> None:
    """Issue 13 §4: a regex-extracted unknown VM names the pattern and the text it matched."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as box:
        run = box.run_hook("mcp__vsphere__run_command", {"command": "reboot @0"})
        assert run.decision == "ask"
        assert "'@0'" in run.reason
        assert "(?P<vm>" in run.reason
        assert "vm_map" not in run.reason
