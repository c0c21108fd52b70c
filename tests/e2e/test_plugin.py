"""The zerto-rewind Claude Code plugin (``zerto_rewind.hostconfig.install.plugin``) in the real CLI.

The plugin is generated for this environment (absolute interpreter and config) by
``zerto-rewind install claude-plugin --out DIR --config C`` (the body of
``zerto-rewind install claude-plugin``), checked with ``claude plugin validate`` and loaded
with ``--plugin-dir``. The project's own settings file is removed first, so the plugin's hook
is the only guard; the plugin's MCP server (``zerto-rewind serve``) runs beside the stand-in
vSphere server.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from e2e.fake_anthropic import call
from e2e.guarded import MODES, PYTHON, Guarded
from e2e.harness import claude_env, mcp_tool
from zerto_rewind.hostconfig.install.plugin import MCP_SERVER_NAME, PLUGIN_NAME
from zerto_rewind.hostconfig.install.settings_file import hook_command

POWER_OFF = mcp_tool("power_off_vm")
PLUGIN_TOOLS = f"mcp__plugin_{PLUGIN_NAME}_{MCP_SERVER_NAME}__"
CHECK_TOOL = f"{PLUGIN_TOOLS}zerto_check_tool"


def _generate(guarded: Guarded, out: Path) -> None:
    config = guarded.box.config_path
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "zerto_rewind",
            "install",
            "claude-plugin",
            "--out",
            str(out),
            "--config",
            config,
        ],
        capture_output=True,
        text=True,
        env=guarded.box.env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _validate(guarded: Guarded, plugin: Path) -> subprocess.CompletedProcess[str]:
    e2e = guarded.e2e
    return subprocess.run(
        [str(e2e.claude), "plugin", "validate", "--strict", "--json", str(plugin)],
        capture_output=True,
        text=True,
        env=claude_env(e2e.api.url, e2e.home),
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("mode", MODES)
def test_the_plugin_guards_calls_and_serves_its_tools(
    guarded: Guarded, mode: str, tmp_path: Path
) -> None:
    """Loaded with ``--plugin-dir``, the plugin's hook guards and its MCP tools answer."""
    guarded.settings_path.unlink()  # only the plugin's hook from here on
    plugin = tmp_path / "zerto-rewind-plugin"
    _generate(guarded, plugin)
    [entry] = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"]
    assert entry["hooks"][0]["onFailure"] == "block"
    assert entry["hooks"][0]["command"].startswith(
        hook_command(PYTHON, "/x").split(" --config ")[0]
    )
    validated = _validate(guarded, plugin)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert json.loads(validated.stdout)["success"] is True

    guarded.e2e.script(
        [
            [call(CHECK_TOOL, tool_name=POWER_OFF, tool_input={"name": "jp-ubuntu"})],
            [call(POWER_OFF, name="jp-ubuntu")],
            [call(POWER_OFF, name="sql-paused-1")],
            "done",
        ]
    )
    # --strict-mcp-config drops plugin MCP servers too ("No such tool available"): pass the
    # stand-in's config without it (the temp HOME and project have no other MCP config).
    mcp = guarded.e2e.mcp_config
    guarded.e2e.mcp_config = None  # type: ignore[assignment]
    extra = ["--mcp-config", str(mcp)]
    if mode == "default":
        extra += ["--allowedTools", f"{PLUGIN_TOOLS}*"]
    try:
        run = guarded.run(mode, plugin_dirs=[plugin], extra_args=extra)
    finally:
        guarded.e2e.mcp_config = mcp

    assert run.ok, run.describe()
    check_id, power_id, paused_id = guarded.e2e.api.tool_use_ids()
    checked = guarded.e2e.api.tool_result(check_id)
    assert not checked.is_error, checked.text
    preview = json.loads(checked.text)
    assert (preview["row"], preview["would_request_tag"]) == ("confirmed", True)
    assert guarded.tag_requests("jp-local") == 1  # the preview tagged nothing; the call did
    # the plugin's hook: confirmed (runs, with context), then failed (denied, never ran)
    hook_rows = [
        (r["tool"], r["row"], r["decision"]) for r in guarded.log() if r["origin"] == "hook"
    ]
    assert hook_rows == [(POWER_OFF, "confirmed", "context"), (POWER_OFF, "failed", "deny")]
    assert guarded.vm_actions() == [("jp-ubuntu", "power_off_vm")]
    assert run.denied_tools == [POWER_OFF]
    assert [d["tool_use_id"] for d in run.permission_denials] == [paused_id]
    assert not guarded.e2e.api.tool_result(power_id).is_error
    assert guarded.e2e.api.tool_result(paused_id).is_error
    assert guarded.e2e.api.saw("a Zerto checkpoint protects this")
