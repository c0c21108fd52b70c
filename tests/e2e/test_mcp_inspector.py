"""`zerto-rewind serve` through a second, independent MCP client: the MCP Inspector's CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.harness import INSPECTOR_BIN
from zerto_rewind.testing import SECRET_ENV, Sandbox


@pytest.fixture
def box(tmp_path: Path):
    """A simulator and a config for the MCP server."""
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as sandbox:
        yield sandbox


def inspect(box: Sandbox, *method_args: str) -> dict:
    """Run `mcp-inspector --cli <zerto-rewind serve> --method ...` and parse its JSON."""
    assert INSPECTOR_BIN.exists(), "run: cd tests/e2e && npm ci"
    env = box.env()
    passed = [
        "-e", f"{SECRET_ENV}={env[SECRET_ENV]}",
        "-e", f"ZERTO_REWIND_STATE_DIR={box.state_dir}",
        "-e", f"ZERTO_HOOK_LOG={box.log_path}",
        # the Inspector takes --config for itself, so the server's comes by environment
        "-e", f"ZERTO_REWIND_CONFIG={box.config_path}",
    ]  # fmt: skip
    server = [sys.executable, "-m", "zerto_rewind", "serve"]
    done = subprocess.run(
        [str(INSPECTOR_BIN), "--cli", *passed, *server, *method_args],
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    parsed: dict = json.loads(done.stdout)
    return parsed


def test_inspector_lists_the_guard_tools(box: Sandbox) -> None:
    """tools/list from the Inspector shows both seed tools, with annotations."""
    tools = {t["name"]: t for t in inspect(box, "--method", "tools/list")["tools"]}
    assert {"zerto_check_tool", "zerto_guard_before_mutate", "zerto_protection_status"} <= set(
        tools
    )
    assert tools["zerto_check_tool"]["annotations"]["readOnlyHint"] is True
    assert "zerto_failover" not in tools, "live recovery is not offered unless allow_live"


def test_inspector_calls_protection_status(box: Sandbox) -> None:
    """tools/call zerto_protection_status for jp-ubuntu returns its VPG over the real server."""
    result = inspect(
        box,
        "--method",
        "tools/call",
        "--tool-name",
        "zerto_protection_status",
        "--tool-arg",
        "vm=jp-ubuntu",
    )
    assert result.get("isError") is not True, result
    assert "jp-local" in json.dumps(result["structuredContent"])
