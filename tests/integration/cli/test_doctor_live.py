"""``zerto-rewind doctor --server NAME`` compares the catalog with the live tool list (#12)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from support.config import write_offline_config
from zerto_rewind.cli.doctor import main
from zerto_rewind.scan.pins import pins_for

STAND_IN = Path(__file__).resolve().parents[2] / "e2e" / "vm_mcp_server.py"


def live(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> dict[str, Any]:
    """Run doctor with the live comparison; the live checks by name (others are ignored)."""
    main(["--config", str(config), "--settings", "/nonexistent", "--json", *args], env={"ZPW": ""})
    report = json.loads(capsys.readouterr().out)
    return {c["name"]: c for c in report["checks"] if c["name"].startswith("live")}


def test_the_stand_in_server_against_a_stale_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Unlisted tools, a vm_arg not in the schema and a tool the server lacks are all named."""
    config = write_offline_config(
        tmp_path,
        read_only_tools=["mcp__vsphere__list_vms", "mcp__vsphere__get_*"],
        tools={
            "mcp__vsphere__power_off_vm": {"vm_arg": "vm"},  # the schema says `name`
            "mcp__vsphere__reconfigure_vm": {"vm_arg": "vm.name"},
            "mcp__vsphere__delete_vm": {"vm_arg": "name"},  # the server has no such tool
        },
    )
    checks = live(capsys, config, "--server", "vsphere", "--", sys.executable, str(STAND_IN))
    assert checks["live: tools read"]["status"] == "pass"
    unlisted = checks["live: unlisted"]
    assert unlisted["status"] == "warn"
    for tool in ("snapshot_vms", "run_command", "mystery_tool"):
        assert f"mcp__vsphere__{tool}" in unlisted["detail"]
    assert "reconfigure_vm" not in unlisted["detail"]
    vm_arg = checks["live: vm_arg"]
    assert vm_arg["status"] == "warn"
    assert "mcp__vsphere__power_off_vm: vm_arg ['vm'] (its arguments: name)" in vm_arg["detail"]
    assert "reconfigure_vm" not in vm_arg["detail"]
    assert checks["live: stale"]["status"] == "warn"
    assert "mcp__vsphere__delete_vm" in checks["live: stale"]["detail"]
    assert checks["live: read-only"]["status"] == "pass"


def test_a_read_only_tool_the_server_marks_destructive_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From a tools/list dump: get_and_reset is destructive, the catalog says read-only."""
    dump = tmp_path / "tools.json"
    tools = [
        {"name": "get_vm", "annotations": {"readOnlyHint": True}, "inputSchema": {}},
        {"name": "get_and_reset", "annotations": {"destructiveHint": True}, "inputSchema": {}},
        {"name": "list_vms", "annotations": {"readOnlyHint": False}, "inputSchema": {}},
    ]
    dump.write_text(json.dumps({"tools": tools}))
    config = write_offline_config(
        tmp_path, read_only_tools=["mcp__vc__get_*", "mcp__vc__list_vms"], tools={}
    )
    checks = live(capsys, config, "--server", "vc", "--tools-json", str(dump))
    read_only = checks["live: read-only"]
    assert read_only["status"] == "fail"
    assert "mcp__vc__get_and_reset (the server marks it destructive)" in read_only["detail"]
    assert "mcp__vc__list_vms (the server marks it not read-only)" in read_only["detail"]
    assert "get_vm" not in read_only["detail"]
    assert checks["live: unlisted"]["status"] == "pass"


def test_the_mcvsphere_dump_against_the_reviewed_catalog_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scanned mcvsphere catalog, installed as-is with its pins and its identity check,
    agrees with mcvsphere's own list, and passes the catalog's own checks."""
    data = Path(__file__).resolve().parents[2] / "data"
    catalog = json.loads((data / "catalogs" / "mcvsphere.catalog.json").read_text())
    dump = data / "servers" / "mcvsphere.tools.json"
    pins = pins_for("mcvsphere", json.loads(dump.read_text())["tools"])
    assert catalog["catalog"]["pins"] == pins
    config = write_offline_config(
        tmp_path,
        read_only_tools=catalog["read_only_tools"],
        tools=catalog["tools"],
        catalog=catalog["catalog"],  # pins and resolvers, as the scan wrote them
    )
    main(["--config", str(config), "--settings", "/nonexistent", "--json",
          "--server", "mcvsphere", "--tools-json", str(dump)], env={"ZPW": ""})  # fmt: skip
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    for name in ("vm_arg", "catalog ties", "catalog patterns"):
        assert checks[name]["status"] == "pass", checks[name]
    assert "19 name no VM and set vpgs or decision" in checks["vm_arg"]["detail"]
    assert {n: c["status"] for n, c in checks.items() if n.startswith("live")} == {
        "live: tools read": "pass",
        "live: unlisted": "pass",
        "live: read-only": "pass",
        "live: vm_arg": "pass",
        "live: stale": "pass",
        "live: pins": "pass",
        "live: patterns": "pass",
        "live: identity": "pass",
    }


def test_a_vm_server_that_can_confirm_identity_but_has_no_check_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same catalog without catalog.resolvers: the live check fails, and its fix is the
    block the scan would write."""
    data = Path(__file__).resolve().parents[2] / "data"
    catalog = json.loads((data / "catalogs" / "mcvsphere.catalog.json").read_text())
    dump = data / "servers" / "mcvsphere.tools.json"
    config = write_offline_config(
        tmp_path,
        read_only_tools=catalog["read_only_tools"],
        tools=catalog["tools"],
        catalog={"pins": catalog["catalog"]["pins"]},
    )
    identity = live(capsys, config, "--server", "mcvsphere", "--tools-json", str(dump))[
        "live: identity"
    ]
    assert identity["status"] == "fail"
    assert "same-name VM in another folder" in identity["detail"]
    assert '"tool": "get_vm_info"' in identity["fix"]
    assert '"id_path": "instance_uuid"' in identity["fix"]


def test_doctor_reports_pattern_ties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """get_* (13) vs *t_vm (13): a tie that falls to mutating is reported."""
    config = write_offline_config(
        tmp_path, read_only_tools=["mcp__vc__get_*"], tools={"mcp__vc__*t_vm": {"vm_arg": "name"}}
    )
    main(["--config", str(config), "--settings", "/nonexistent", "--json"], env={"ZPW": ""})
    report = json.loads(capsys.readouterr().out)
    (tie,) = [c for c in report["checks"] if c["name"] == "catalog ties"]
    assert tie["status"] == "warn"
    assert "mcp__vc__get_* vs mcp__vc__*t_vm" in tie["detail"]


def test_server_is_required_for_a_live_source(tmp_path: Path) -> None:
    """`-- COMMAND` without --server is a usage error."""
    with pytest.raises(SystemExit) as stop:
        main(["--tools-json", str(tmp_path / "x.json")])
    assert stop.value.code == 2


def test_doctor_fails_a_tool_changed_since_it_was_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """mcvsphere's list with one tool's destructiveHint dropped and a new list_* tool: the
    pins check fails, naming both; with no pins at all it warns."""
    data = Path(__file__).resolve().parents[2] / "data"
    catalog = json.loads((data / "catalogs" / "mcvsphere.catalog.json").read_text())
    tools = json.loads((data / "servers" / "mcvsphere.tools.json").read_text())["tools"]
    pins = pins_for("mcvsphere", tools)
    victim = next(t for t in tools if (t.get("annotations") or {}).get("destructiveHint"))
    victim["annotations"] = {
        k: v for k, v in victim["annotations"].items() if k != "destructiveHint"
    }
    tools.append({"name": "list_and_delete_vms", "inputSchema": {"type": "object"}})
    dump = tmp_path / "changed.tools.json"
    dump.write_text(json.dumps({"tools": tools}))
    read_only = [*catalog["read_only_tools"], "mcp__mcvsphere__list_*"]
    config = write_offline_config(
        tmp_path, read_only_tools=read_only, tools=catalog["tools"], catalog={"pins": pins}
    )
    check = live(capsys, config, "--server", "mcvsphere", "--tools-json", str(dump))["live: pins"]
    assert check["status"] == "fail"
    assert f"mcp__mcvsphere__{victim['name']}" in check["detail"]
    assert "mcp__mcvsphere__list_and_delete_vms" in check["detail"]
    unpinned = write_offline_config(tmp_path, read_only_tools=read_only, tools=catalog["tools"])
    check = live(capsys, unpinned, "--server", "mcvsphere", "--tools-json", str(dump))["live: pins"]
    assert check["status"] == "warn"
    assert "not pinned" in check["detail"]
