"""``zerto-rewind catalog scan`` on bad input: a clear error of the tree, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerto_rewind.cli import main

TOOLS = {"tools": [{"name": "power_off_vm", "inputSchema": {"properties": {"name": {}}}}]}


def scan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run ``catalog scan --server vsphere ARGV`` through the CLI; (exit code, stderr)."""
    code = main(["catalog", "scan", "--server", "vsphere", "--quiet", *argv])
    return code, capsys.readouterr().err


def test_a_missing_tools_file_names_the_option_and_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --tools-json that cannot be read is a UsageError saying which file, exit 1."""
    missing = tmp_path / "nope.json"
    code, err = scan(capsys, "--tools-json", str(missing))
    assert code == 1
    assert err == (
        f"zerto-rewind catalog scan: UsageError: --tools-json {missing}: cannot read it "
        "(No such file or directory) — check the path\n"
    )


def test_a_tools_file_that_is_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --tools-json that is not JSON says so, with the parser's position."""
    bad = tmp_path / "tools.json"
    bad.write_text("{not json")
    code, err = scan(capsys, "--tools-json", str(bad))
    assert code == 1
    assert err.startswith(f"zerto-rewind catalog scan: UsageError: --tools-json {bad}: not JSON (")
    assert "line 1 column 2" in err


def test_a_tool_that_is_not_an_object_is_an_error_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tools/list with an entry that is not a named object is refused, not silently thinned."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [*TOOLS["tools"], "reboot_vm"]}))
    code, err = scan(capsys, "--tools-json", str(tools))
    assert code == 1
    assert "tool 1 is not an object with a name" in err


def test_no_source_or_two_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exactly one of a command, --url and --tools-json: otherwise a UsageError listing them."""
    code, err = scan(capsys)
    assert code == 1
    assert err.startswith("zerto-rewind catalog scan: UsageError: no server to scan — give ")
    code, err = scan(capsys, "--url", "http://127.0.0.1:1/mcp", "--", "mcvsphere")
    assert code == 1
    assert "more than one server to scan" in err


def test_a_bad_header(capsys: pytest.CaptureFixture[str]) -> None:
    """A --header without a colon says how to write one."""
    code, err = scan(capsys, "--url", "http://127.0.0.1:1/mcp", "--header", "Bearer x")
    assert code == 1
    assert "--header 'Bearer x': not a header — write it as NAME:VALUE" in err


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"read_only_tools": "mcp__vsphere__get_*", "tools": {}}, "read_only_tools"),
        ({"tools": ["mcp__vsphere__power_off_vm"]}, "tools"),
    ],
)
def test_merge_refuses_a_config_it_would_garble(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, object], key: str
) -> None:
    """--merge into a config whose catalog has the wrong shape: ConfigError, --out not written."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    target = tmp_path / "config.json"
    target.write_text(json.dumps(config))
    out = tmp_path / "merged.json"
    code, err = scan(capsys, "--tools-json", str(tools), "--merge", str(target), "--out", str(out))
    assert code == 1
    assert err.startswith(f"zerto-rewind catalog scan: ConfigError: {target}: {key}: not ")
    assert not out.exists()
    assert json.loads(target.read_text()) == config
