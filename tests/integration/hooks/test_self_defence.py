"""The standalone hook against an agent that attacks the guard itself (issue 11, section 2):
a rewritten config, a forged state directory, writes to the guard's own files. Through the
hook as a subprocess, against the simulator."""

from __future__ import annotations

import json
import os
from pathlib import Path

from zerto_rewind.config.loader import file_sha256
from zerto_rewind.core.state import _safe_name
from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"
FORGED_TAG = "zerto-rewind vsphere.power_off_vm jp-ubuntu s=forged 2027-01-15T07:59:00Z"


def pinned(box: Sandbox) -> tuple[str, ...]:
    """The hook arguments install writes: the config and its SHA-256."""
    return ("--config", box.config_path, "--config-sha256", file_sha256(box.config_path))


# ---------------------------------------------------------------- the pin


def test_a_config_rewritten_to_call_power_off_read_only_denies_every_call(box: Sandbox) -> None:
    args = pinned(box)
    assert box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, hook_args=args).decision == "context"
    # The agent's one shell command: power_off becomes read-only, the guard would wave it on.
    catalog = box.config()
    catalog["read_only_tools"] = [*catalog.get("read_only_tools", []), POWER_OFF]
    catalog["tools"] = {k: v for k, v in catalog["tools"].items() if k != POWER_OFF}
    box.write_config(**catalog)
    before = box.tag_requests()
    for tool in (POWER_OFF, "mcp__vsphere__get_vm", "mcp__vsphere__delete_datastore"):
        run = box.run_hook(tool, {"name": "jp-ubuntu"}, hook_args=args)
        assert run.decision == "deny", tool
        assert "changed since the guard was installed" in run.reason
        assert "zerto-rewind install" in run.reason
    assert box.tag_requests() == before
    assert box.log_records()[-1]["row"] == "config_error"


def test_an_unreadable_pinned_config_denies_every_call(box: Sandbox) -> None:
    args = pinned(box)
    os.remove(box.config_path)
    run = box.run_hook("mcp__vsphere__get_vm", {"name": "jp-ubuntu"}, hook_args=args)
    assert run.decision == "deny"
    assert "cannot be read" in run.reason


def test_the_pinned_config_unchanged_guards_as_before(box: Sandbox) -> None:
    args = pinned(box)
    read_only = box.run_hook("mcp__vsphere__get_vm", {"name": "jp-ubuntu"}, hook_args=args)
    assert (read_only.returncode, read_only.stdout) == (0, "")
    assert box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, hook_args=args).decision == "context"


# ---------------------------------------------------------------- forged state


def forge_landed(box: Sandbox, vpg_name: str) -> str:
    """Write a 'landed, unused' record for the VPG as GuardState would; returns the file."""
    import time

    with box.client() as client:
        vpg_id = client.find_vpg(vpg_name).vpg_id
    now = time.time()
    path = os.path.join(box.state_dir, "vpgs", f"{_safe_name(vpg_id)}.json")
    raw = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    raw.update(
        vpg_id=vpg_id,
        vpg_name=vpg_name,
        allowed_since_landing=0,
        tag={
            "name": FORGED_TAG,
            "requested_at": now - 30,
            "expected_at": now - 28,
            "overdue_at": now + 3600,
            "state": "landed",
            "checkpoint_id": "forged-checkpoint-1",
            "landed_at": now - 1,
        },
    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(raw, fh)
    return path


def test_a_forged_landed_record_does_not_let_a_call_through(box: Sandbox) -> None:
    assert box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}).decision == "context"  # a real change
    forge_landed(box, "jp-local")
    run = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    record = box.log_records()[-1]
    assert FORGED_TAG not in record["tags"]
    assert "forged-checkpoint-1" not in record["checkpoint_ids"]
    assert box.tag_requests("jp-local") == 2  # tagged anew
    if run.decision == "context":  # allowed only on the new tag, which the journal holds
        with box.client() as client:
            vpg = client.find_vpg("jp-local")
            journal = {c.cp_id: c.tag for c in client.list_checkpoints(vpg.vpg_id) if c.tag}
        assert journal[record["checkpoint_ids"][0]] == record["tags"][0]
        assert "forged-checkpoint-1" not in run.output["additionalContext"]  # type: ignore[index]
    else:
        assert record["row"] == "pending"


def test_a_forged_record_on_a_vpg_that_cannot_tag_in_time_is_pending(
    slow_aws_box: Sandbox,
) -> None:
    box = slow_aws_box
    forge_landed(box, "CMH-AWS-1")
    box.wait_past_boundary("CMH-AWS-1")  # the next landing is then past the 5 s budget
    run = box.run_hook(POWER_OFF, {"name": "win2019-1"})
    assert run.decision == "deny"
    assert box.log_records()[-1]["row"] == "pending"
    assert FORGED_TAG not in run.reason
    assert box.tag_requests("CMH-AWS-1") == 1


# ---------------------------------------------------------------- the guard's own files


def installed(box: Sandbox, settings: str, *more: str) -> tuple[str, ...]:
    """The hook arguments install writes with guard.protect_self on."""
    return (*pinned(box), "--settings", settings, *more)


def test_writes_to_the_guards_files_are_denied_and_logged(box: Sandbox) -> None:
    settings = os.path.join(box.root, "project", ".claude", "settings.json")
    args = installed(box, settings)
    attempts = [
        ("Bash", {"command": f"sed -i 's/power_off_vm/get_vm/' {box.config_path}"}),
        ("Bash", {"command": f"cat > {settings} <<'EOF'\n{{}}\nEOF"}),
        ("Bash", {"command": f"rm -rf {box.state_dir}"}),
        ("Bash", {"command": "echo '{}' > zerto-rewind.json"}),  # no "/": the bare name
        ("Write", {"file_path": box.config_path, "content": "{}"}),
        ("Edit", {"file_path": settings, "old_string": "a", "new_string": "b"}),
        ("Write", {"file_path": os.path.join(box.state_dir, "vpgs", "x.json"), "content": "{}"}),
        ("Write", {"file_path": box.log_path, "content": ""}),
    ]
    before = Path(box.config_path).read_bytes()
    for tool, tool_input in attempts:
        run = box.run_hook(tool, tool_input, hook_args=args)
        assert run.decision == "deny", (tool, tool_input)
        assert "the guard's own files" in run.reason
    assert [r["row"] for r in box.log_records()] == ["protected"] * len(attempts)
    assert Path(box.config_path).read_bytes() == before


def test_other_bash_and_file_calls_pass_silently(box: Sandbox) -> None:
    settings = os.path.join(box.root, "project", ".claude", "settings.json")
    args = installed(box, settings)
    for tool, tool_input in (
        ("Bash", {"command": "ls -la && git status"}),
        ("Bash", {"command": f"cat {box.config_path}"}),
        ("Write", {"file_path": os.path.join(box.root, "notes.md"), "content": "x"}),
    ):
        run = box.run_hook(tool, tool_input, hook_args=args)
        assert (run.returncode, run.stdout, run.stderr) == (0, "", ""), (tool, run.stderr)
    assert box.log_records() == []


def test_with_all_tools_an_unlisted_bash_call_gets_the_unlisted_rule(box: Sandbox) -> None:
    settings = os.path.join(box.root, "project", ".claude", "settings.json")
    run = box.run_hook("Bash", {"command": "ls"}, hook_args=installed(box, settings, "--all-tools"))
    assert run.decision == "ask"
    assert box.log_records()[-1]["row"] == "unlisted"


def test_protect_self_off_checks_no_file(box: Sandbox) -> None:
    box.write_config(guard={"timeout_s": 10, "protect_self": False})
    settings = os.path.join(box.root, "project", ".claude", "settings.json")
    write = {"file_path": box.config_path, "content": "{}"}
    run = box.run_hook("Write", write, hook_args=installed(box, settings, "--all-tools"))
    assert run.decision == "ask"  # only the unlisted rule: install would not match Write at all
    assert box.log_records()[-1]["row"] == "unlisted"
