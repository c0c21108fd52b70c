"""``zerto-rewind check`` as its own process over the three-sites simulator process: the VM
is found across the sites and each VPG is shown with the site that would tag it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.config import write_ready_estate_config
from support.sim import estate_sim_fixture, set_site_fault

POWER_OFF = "mcp__vsphere__power_off_vm"
ready = estate_sim_fixture()


def check(ready: dict[str, Any], directory: Path, vm: str) -> tuple[int, dict[str, Any]]:
    config = write_ready_estate_config(ready, directory, tools={POWER_OFF: {"vm_arg": "name"}})
    env = {"HOME": str(directory), "PATH": os.environ.get("PATH", ""),
           "ZERTO_REWIND_CONFIG": str(config)}  # fmt: skip
    argv = [sys.executable, "-m", "zerto_rewind", "check", POWER_OFF, json.dumps({"name": vm})]
    done = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def test_each_vpg_is_previewed_on_the_site_that_would_tag_it(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    code, report = check(ready, tmp_path, "app-01")
    assert code == 0, report
    assert sorted((v["vpg"], v["zvm_site"]) for v in report["vpgs"]) == [
        ("hq-app-azure", "hq"),
        ("hq-web-dr", "hq"),
    ]
    _code, report = check(ready, tmp_path, "reports-01")
    assert [(v["vpg"], v["zvm_site"]) for v in report["vpgs"]] == [("dr-reports-aws", "dr")]


def test_a_vm_only_a_dark_site_could_hold_is_denied_naming_it(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    set_site_fault(ready, "aws", {"kind": "down"})
    try:
        code, report = check(ready, tmp_path, "nowhere-01")
    finally:
        set_site_fault(ready, "aws", None)
    assert code == 1
    assert (report["row"], report["outcome"]) == ("error", "deny")
    assert "site aws" in report["summary"]
    assert report["unknown_vms"] == []
