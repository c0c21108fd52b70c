"""`zerto-rewind serve` as a child process over stdio, with the real MCP client and the hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.mcp_server.mcp_helpers import (
    POWER_OFF,
    call,
    log_records,
    serve,
    tag_requests,
    text,
    write_mcp_config,
)
from zerto_rewind.sim import SimServer

pytestmark = pytest.mark.anyio

PASSWORD_ENV = "ZVM_TEST_PASSWORD"


@pytest.fixture
def child_env(sim: SimServer, tmp_path: Path) -> dict[str, str]:
    """What the server and the hook get: stdio children see only an allow-listed environment."""
    return {
        "HOME": str(tmp_path),
        PASSWORD_ENV: sim.credentials["password"],
        "ZERTO_REWIND_STATE_DIR": str(tmp_path / "shared-state"),
        "ZERTO_HOOK_LOG": str(tmp_path / "hook.log"),
    }


async def run_hook(config: Path, env: dict[str, str], vm: str) -> dict[str, Any]:
    """The PreToolUse hook as a subprocess, fed one call on stdin; its JSON answer."""
    payload = {
        "session_id": "session-1",
        "hook_event_name": "PreToolUse",
        "tool_name": POWER_OFF,
        "tool_input": {"name": vm},
        "tool_use_id": "toolu_1",
    }
    done = await anyio.run_process(
        [sys.executable, "-m", "zerto_rewind", "hook", "--config", str(config)],
        input=json.dumps(payload).encode(),
        env={**env, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return dict(json.loads(done.stdout))


async def test_hook_reuses_the_checkpoint_confirmed_over_mcp(sim, tmp_path, child_env):
    """Confirmed via zerto_guard_before_mutate, the hook allows the next change with no new tag."""
    config = write_mcp_config(sim, tmp_path, password_env=PASSWORD_ENV)
    async with serve(config, child_env, tmp_path / "serve.err") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        check = await call(
            client, "zerto_check_tool", tool_name=POWER_OFF, tool_input={"name": "jp-ubuntu"}
        )
        answer = await call(
            client,
            "zerto_guard_before_mutate",
            tool_name=POWER_OFF,
            tool_input={"name": "jp-ubuntu"},
        )
        checkpoint = answer["checkpoints"][0]["checkpoint_id"]
        hook = await run_hook(config, child_env, "jp-ubuntu")
        tags_after_hook = tag_requests(sim)
        status = await call(client, "zerto_protection_status", vm="jp-ubuntu")
        listing = await call(client, "zerto_list_checkpoints", vm="jp-ubuntu", tagged_only=True)
        plan = await call(client, "zerto_recovery_plan", vm="jp-ubuntu", checkpoint=checkpoint)
        second = await run_hook(config, child_env, "jp-ubuntu")
    assert "zerto_guard_before_mutate" in names
    assert "zerto_failover" not in names
    assert check["row"] == "confirmed"
    assert answer["row"] == "confirmed"
    context = hook["hookSpecificOutput"]["additionalContext"]
    assert f"checkpoint {checkpoint}" in context
    assert tags_after_hook == {"jp-local": 1}  # the hook reused the MCP-confirmed tag
    records = log_records(tmp_path / "hook.log")
    assert [(r["origin"], r["row"]) for r in records] == [
        ("mcp", "confirmed"),
        ("hook", "confirmed"),
        ("hook", "confirmed"),
    ]
    assert records[0]["checkpoint_ids"] == records[1]["checkpoint_ids"] == [checkpoint]
    # The checkpoint covered one change; the next change gets its own tag.
    assert tag_requests(sim) == {"jp-local": 2}
    assert checkpoint not in second["hookSpecificOutput"]["additionalContext"]
    assert status["vpgs"][0]["guard_tag"]["changes_allowed_since_landing"] == 1
    assert listing["vpgs"][0]["checkpoints"][-1]["checkpoint_id"] == checkpoint
    assert plan["confirm"] == f"jp-ubuntu@{checkpoint}"
    assert (tmp_path / "shared-state" / "vpgs").is_dir()  # ZERTO_REWIND_STATE_DIR was used


async def test_serve_starts_and_explains_a_missing_config(tmp_path, child_env):
    """With no config the server still lists its tools; calls say how to fix the config."""
    async with serve(tmp_path / "absent.json", child_env, tmp_path / "serve.err") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("zerto_protection_status", {"vm": "jp-ubuntu"})
    assert "zerto_check_tool" in names
    assert "zerto_failover" not in names
    assert result.is_error
    assert "fix the config:" in text(result)
    assert "config file not found" in text(result)
