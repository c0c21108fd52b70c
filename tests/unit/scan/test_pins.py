"""Pins: the digest of a reviewed tool, and how a live tool list differs from the pins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.cli import main
from zerto_rewind.scan.pins import compare_pins, merge_pins, pins_for, tool_digest

POWER_OFF: dict[str, Any] = {
    "name": "power_off",
    "description": "Power a VM off.",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    "annotations": {"destructiveHint": True},
}
LIST_VMS: dict[str, Any] = {
    "name": "list_vms",
    "description": "Every VM.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
RUG_PULL: dict[str, Any] = {
    "name": "list_and_delete_vms",
    "description": "List the VMs, and delete the one named.",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def test_the_digest_is_canonical_and_covers_description_schema_and_annotations() -> None:
    """Key order and null annotations do not change a pin; each of the three parts does."""
    pin = tool_digest(POWER_OFF)
    assert pin.startswith("sha256:")
    assert len(pin) == len("sha256:") + 64
    reordered = dict(reversed(list(POWER_OFF.items())))
    reordered["annotations"] = {"title": None, "destructiveHint": True}
    assert tool_digest(reordered) == pin
    assert tool_digest({**POWER_OFF, "name": "other"}) == pin  # the name is the pin's key
    for change in (
        {"description": "Power a VM off, gently."},
        {"inputSchema": {"type": "object", "properties": {"vm": {"type": "string"}}}},
        {"annotations": {}},  # destructiveHint dropped
    ):
        assert tool_digest({**POWER_OFF, **change}) != pin, change


def test_compare_finds_changed_new_and_removed_tools() -> None:
    """Against the pins of one server: a changed digest, a new tool and a vanished one."""
    pins = pins_for("vsphere", [POWER_OFF, LIST_VMS])
    pins["mcp__other__thing"] = tool_digest(LIST_VMS)  # another server's pin: not ours
    live = [{**POWER_OFF, "annotations": {}}, RUG_PULL]
    diff = compare_pins("vsphere", live, pins)
    assert diff.pinned
    assert diff.changed == ["mcp__vsphere__power_off"]
    assert diff.new == ["mcp__vsphere__list_and_delete_vms"]
    assert diff.removed == ["mcp__vsphere__list_vms"]
    assert diff.matching == []
    assert diff.unreviewed() == {
        "mcp__vsphere__list_and_delete_vms": "new",
        "mcp__vsphere__power_off": "changed",
    }
    assert not compare_pins("esx", live, pins).pinned


def test_merge_pins_new_tools_and_keeps_reviewed_pins_unless_repin() -> None:
    """A changed tool keeps its old pin (and is reported); --repin takes the live digests."""
    pins = pins_for("vsphere", [POWER_OFF, LIST_VMS])
    live = [{**POWER_OFF, "annotations": {}}, RUG_PULL]
    kept = merge_pins("vsphere", live, pins)
    assert kept.pins["mcp__vsphere__power_off"] == pins["mcp__vsphere__power_off"]
    assert kept.pins["mcp__vsphere__list_and_delete_vms"] == tool_digest(RUG_PULL)
    assert "mcp__vsphere__list_vms" in kept.pins
    repinned = merge_pins("vsphere", live, pins, repin=True)
    assert repinned.pins == pins_for("vsphere", live)


def test_merge_holds_back_a_new_tool_a_read_only_pattern_would_cover() -> None:
    """A conflict (pattern says read-only, scan says mutating) stays unpinned, with why."""
    pins = pins_for("vsphere", [LIST_VMS])
    why = {"mcp__vsphere__list_and_delete_vms": "read-only by 'mcp__vsphere__list_*'"}
    held = merge_pins("vsphere", [LIST_VMS, RUG_PULL], pins, conflicts=why)
    assert "mcp__vsphere__list_and_delete_vms" not in held.pins
    assert held.held == why


def _scan_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], *extra: str
) -> tuple[dict[str, Any], str]:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [{**POWER_OFF, "annotations": {}}, LIST_VMS, RUG_PULL]}))
    target = tmp_path / "config.json"
    target.write_text(json.dumps(config))
    out = tmp_path / "merged.json"
    argv = ["--tools-json", str(tools), "--merge", str(target), "--out", str(out), *extra]
    code = main(["catalog", "scan", "--server", "vsphere", "--quiet", *argv])
    assert code == 0
    return json.loads(out.read_text()), capsys.readouterr().err


def test_scan_merge_shows_the_differences_and_keeps_the_reviewed_pins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--merge: the changed tool is reported and keeps its pin; the new one that a read-only
    glob would cover is reported and not pinned; other catalog options stay."""
    reviewed = pins_for("vsphere", [POWER_OFF, LIST_VMS])
    config = {
        "read_only_tools": ["mcp__vsphere__list_*"],
        "tools": {"mcp__vsphere__power_off": {"vm_arg": "name"}},
        "catalog": {"from_annotations": True, "pins": reviewed},
    }
    merged, err = _scan_merge(tmp_path, capsys, config)
    assert merged["catalog"]["from_annotations"] is True
    assert merged["catalog"]["pins"] == reviewed
    assert "pins: CHANGED mcp__vsphere__power_off: " in err
    assert "the pin is kept" in err
    assert "pins: NEW mcp__vsphere__list_and_delete_vms: NOT pinned (the config reads it as " in err
    repinned, err = _scan_merge(tmp_path, capsys, config, "--repin")
    assert repinned["catalog"]["pins"]["mcp__vsphere__power_off"] == tool_digest(
        {**POWER_OFF, "annotations": {}}
    )
    assert "re-pinned as scanned now (--repin)" in err
    assert "mcp__vsphere__list_and_delete_vms" in repinned["catalog"]["pins"]


def test_a_plain_scan_pins_every_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --merge the catalog carries catalog.pins for every scanned tool."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [POWER_OFF, LIST_VMS]}))
    assert (
        main(["catalog", "scan", "--server", "vsphere", "--quiet", "--tools-json", str(tools)]) == 0
    )
    catalog = json.loads(capsys.readouterr().out)
    assert catalog["catalog"]["pins"] == pins_for("vsphere", [POWER_OFF, LIST_VMS])


def test_repin_without_merge_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [POWER_OFF]}))
    argv = ["catalog", "scan", "--server", "vsphere", "--tools-json", str(tools), "--repin"]
    assert main(argv) == 1
    assert "--repin changes the pins of a config" in capsys.readouterr().err
