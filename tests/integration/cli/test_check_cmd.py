"""Issue 13 §4: ``zerto-rewind check`` tries one call without tagging anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from zerto_rewind.testing import DEMO_CATALOG, Sandbox


def check(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "check", *args],
        capture_output=True, text=True, env=box.env(), timeout=60, check=False,
    )  # fmt: skip


def as_json(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(run.stdout)
    return report


def test_check_confirmable_call_tags_nothing(tmp_path: Path) -> None:
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as box:
        box.write_config()
        run = check(box, "mcp__vsphere__power_off_vm", '{"name": "jp-ubuntu"}', "--json")
        assert run.returncode == 0, run.stderr
        report = as_json(run)
        assert report["classification"] == "mutating"
        assert report["catalog_entry"] == "mcp__vsphere__power_off_vm"
        assert report["specificity"] == "exact name"
        assert report["vms"] == [{"vm": "jp-ubuntu", "from": "argument name"}]
        assert report["vpgs"][0]["vpg"] == "jp-local"
        assert report["row"] == "confirmed"
        assert box.tag_requests() == 0


def test_check_regex_origin_and_unknown_vm(tmp_path: Path) -> None:
    """A wrong regex: the report shows the pattern, the matched text and the unknown VM."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as box:
        box.write_config()
        run = check(box, "mcp__vsphere__run_command", '{"command": "reboot @0"}', "--json")
        assert run.returncode == 1
        report = as_json(run)
        assert report["vms"][0]["vm"] == "0"
        assert "'@0'" in report["vms"][0]["from"]
        assert "(?P<vm>" in report["vms"][0]["from"]
        assert report["row"] == "vm_unknown"


def test_check_specificity_and_human_output(tmp_path: Path) -> None:
    catalog = {
        "read_only_tools": ["mcp__vsphere__list_*"],
        "tools": {"mcp__vsphere__*": {"vm_arg": "name"}},
    }
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        box.write_config()
        run = check(box, "mcp__vsphere__list_vms")
        assert run.returncode == 0, run.stderr
        assert "read_only" in run.stdout
        assert "mcp__vsphere__list_*" in run.stdout
        assert "19 literal characters" in run.stdout


def test_check_host_level_tool_with_fixed_vpgs(tmp_path: Path) -> None:
    catalog = {**DEMO_CATALOG, "tools": {"mcp__vsphere__reboot_host": {"vpgs": ["jp-local"]}}}
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        box.write_config()
        report = as_json(check(box, "mcp__vsphere__reboot_host", "{}", "--json"))
        assert report["fixed_vpgs"] == ["jp-local"]
        assert [v["vpg"] for v in report["vpgs"]] == ["jp-local"]
        assert report["row"] == "confirmed"
        assert box.tag_requests() == 0
