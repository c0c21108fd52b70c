"""A call that names a file on the VM server's host needs a person (guard.host_path_decision).

It prompts even when its VM is protected and a checkpoint could be made; its reason
names the argument and never the path, which rides on the decision for the approver
only; the decision-log line holds no path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.config import load_written_settings
from unit.core.guard_fakes import URL, Rig
from zerto_rewind.config import Settings
from zerto_rewind.core.catalog import MUTATING, READ_ONLY, classify
from zerto_rewind.core.decision import Outcome, Row, ToolCall

UPLOAD = "mcp__vsphere__upload_iso"
DOWNLOAD = "mcp__vsphere__download_from_datastore"
SECRET_PATH = "/etc/zerto-rewind/secret.txt"


def settings_with(tmp_path: Path, tools: dict[str, Any], read_only: list[str]) -> Settings:
    config = {
        "zvm": {"url": URL, "username": "u", "password": "p"},
        "read_only_tools": read_only,
        "tools": tools,
        "state_dir": str(tmp_path / "state"),
    }
    return load_written_settings(tmp_path, config)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    rig = Rig(tmp_path, timeout_s=20.0)
    rig.settings = settings_with(
        tmp_path,
        {
            UPLOAD: {"vm_arg": "name", "host_paths": ["local_path"]},
            DOWNLOAD: {"host_paths": ["save_to"], "decision": "allow"},
            "mcp__vsphere__export_*": {"host_paths": ["out"], "decision": "deny"},
        },
        ["mcp__vsphere__get_*", "mcp__vsphere__list_vms"],
    )
    return rig


def decide(rig: Rig, tool: str, tool_input: dict[str, Any]) -> Any:
    return rig.guard().decide(ToolCall(tool, tool_input, session_id="s1"))


def test_a_host_path_on_a_protected_vm_prompts_and_makes_no_tag(rig: Rig) -> None:
    """jp-ubuntu could be checkpointed; the local file could not be rewound: a person decides."""
    decision = decide(rig, UPLOAD, {"name": "jp-ubuntu", "local_path": SECRET_PATH})
    assert (decision.row, decision.outcome) == (Row.HOST_PATH, Outcome.PROMPT)
    assert rig.zvm.tag_requests("jp-local") == 0
    assert decision.vms == ("jp-ubuntu",)
    assert "argument local_path" in decision.reason
    assert "machine where the VM server runs" in decision.reason
    assert SECRET_PATH not in decision.reason
    assert decision.host_paths == {"local_path": SECRET_PATH}
    assert f"local_path = {SECRET_PATH!r}" in decision.for_approver()


def test_the_decision_log_line_holds_no_path(rig: Rig) -> None:
    """log_record keeps the reason (argument names) and drops the paths."""
    call = ToolCall(UPLOAD, {"name": "jp-ubuntu", "local_path": SECRET_PATH}, session_id="s1")
    decision = rig.guard().decide(call)
    line = json.dumps(decision.log_record(call))
    assert SECRET_PATH not in line
    assert "secret.txt" not in line
    assert "local_path" in line


def test_without_its_host_path_the_call_is_guarded_as_before(rig: Rig) -> None:
    """No local_path: an ordinary mutating call, checkpointed."""
    decision = decide(rig, UPLOAD, {"name": "jp-ubuntu", "local_path": None})
    assert (decision.row, decision.outcome) == (Row.CONFIRMED, Outcome.CONTEXT)
    assert decision.host_paths == {}


def test_a_read_only_download_runs_without_save_to_and_prompts_with_it(rig: Rig) -> None:
    """decision allow covers the calls that name no host path; an empty save_to still counts."""
    plain = decide(rig, DOWNLOAD, {"datastore": "ds1", "path": "iso/readme.txt"})
    assert (plain.row, plain.outcome) == (Row.NO_VM, Outcome.NONE)
    for save_to in ("/var/log/zerto-rewind/decisions.log", ""):
        saving = decide(rig, DOWNLOAD, {"datastore": "ds1", "path": "x", "save_to": save_to})
        assert (saving.row, saving.outcome) == (Row.HOST_PATH, Outcome.PROMPT)
        assert saving.host_paths == {"save_to": save_to}


def test_decision_deny_denies_a_host_path(rig: Rig) -> None:
    """The tool's own policy can refuse every call that names a host path."""
    decision = decide(rig, "mcp__vsphere__export_logs", {"out": "/tmp/x"})
    assert (decision.row, decision.outcome) == (Row.HOST_PATH, Outcome.DENY)
    assert "argument out" in decision.reason
    assert "/tmp/x" not in decision.reason


def test_a_host_path_pattern_beats_a_read_only_pattern_for_calls_that_give_one(
    tmp_path: Path,
) -> None:
    """read_only_tools 'get_*' and tools 'get_file' with host_paths: a path prompts."""
    settings = settings_with(
        tmp_path,
        {"mcp__vsphere__get_f*": {"host_paths": ["save_to"], "decision": "allow"}},
        ["mcp__vsphere__get_*", "mcp__vsphere__get_file"],
    )
    catalog = settings.catalog
    assert classify("mcp__vsphere__get_file", {"p": 1}, catalog).kind == READ_ONLY
    verdict = classify("mcp__vsphere__get_file", {"save_to": "/x"}, catalog)
    assert (verdict.kind, verdict.host_paths) == (MUTATING, {"save_to": "/x"})
    assert classify("mcp__vsphere__get_fan", {"save_to": "/x"}, catalog).kind == MUTATING
    assert classify("mcp__vsphere__get_vm", {"save_to": "/x"}, catalog).kind == READ_ONLY


def test_a_nested_host_path_and_a_long_one_are_shown_cut(rig: Rig, tmp_path: Path) -> None:
    """Dotted paths fan out like vm_arg; a value past 500 characters is cut for display."""
    settings = settings_with(tmp_path, {"mcp__v__t": {"host_paths": ["opts.files[]"]}}, [])
    verdict = classify("mcp__v__t", {"opts": {"files": ["/a", "/b"]}}, settings.catalog)
    assert verdict.host_paths == {"opts.files[]": "/a, /b"}
    long = classify("mcp__v__t", {"opts": {"files": ["/" + "x" * 900]}}, settings.catalog)
    assert len(long.host_paths["opts.files[]"]) == 501
