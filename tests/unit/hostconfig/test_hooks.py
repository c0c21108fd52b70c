"""The hook files of Codex, Gemini CLI and Copilot CLI: paths, matchers, entries, the merge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from zerto_rewind.errors import ConfigError
from zerto_rewind.hostconfig.hooks import (
    build_entry,
    hook_file,
    matcher_for,
    missing_post_events,
    plan_hook_file,
    write_hook_file,
)

OURS = "/venv/bin/python -c 'from zerto_rewind.agent_hooks.hook import run; run()' hook --host X"


def test_default_paths() -> None:
    env = {"HOME": "/h"}
    assert hook_file("codex", project=None, env=env) == "/h/.codex/hooks.json"
    assert hook_file("codex", project=None, env={**env, "CODEX_HOME": "/c"}) == "/c/hooks.json"
    assert hook_file("codex", project="/p", env=env) == "/p/.codex/hooks.json"
    assert hook_file("gemini", project=None, env=env) == "/h/.gemini/settings.json"
    assert hook_file("gemini", project="/p", env=env) == "/p/.gemini/settings.json"
    assert hook_file("copilot", project=None, env=env) == "/h/.copilot/hooks/zerto-rewind.json"
    assert hook_file("copilot", project="/p", env=env) == "/p/.github/hooks/zerto-rewind.json"


@pytest.mark.parametrize(
    ("host", "hits", "misses"),
    [
        (
            "codex",
            ["mcp__vsphere__power_off_vm", "mcp__vm.prod__x", "Bash", "apply_patch"],
            ["mcp__vsphere2__x", "mcp__other__x", "xBash", "mcp__vsphere__", "Read"],
        ),
        (
            "gemini",
            [
                "mcp_vsphere_power_off_vm",
                "mcp_vm.prod_x",
                "run_shell_command",
                "write_file",
                "replace",
            ],
            ["mcp_other_x", "read_file", "mcp_vsphere_"],
        ),
        (
            "copilot",
            ["vsphere-power_off_vm", "vm.prod-x", "bash", "create", "edit"],
            ["view", "other-x", "vsphere-"],
        ),
    ],
)
def test_matchers_are_anchored_and_cover_the_servers_and_the_own_tools(
    host: str, hits: list[str], misses: list[str]
) -> None:
    pattern = matcher_for(host, ["vsphere", "vm.prod"])
    anchored = pattern if host != "copilot" else f"^(?:{pattern})$"  # Copilot anchors itself
    for name in hits:
        assert re.search(anchored, name), name
    for name in misses:
        assert not re.search(anchored, name), name


def test_entries_use_each_hosts_fields_and_units() -> None:
    codex = build_entry("codex", command=OURS, matcher="m", timeout_s=160)
    assert codex["hooks"][0] | {"statusMessage": ""} == {
        "type": "command",
        "command": OURS,
        "timeout": 160,
        "statusMessage": "",
    }
    gemini = build_entry("gemini", command=OURS, matcher="m", timeout_s=160)
    assert gemini["hooks"][0]["timeout"] == 160_000  # milliseconds
    assert gemini["hooks"][0]["name"] == "zerto-rewind"
    copilot = build_entry("copilot", command=OURS, matcher="m", timeout_s=160)
    assert copilot == {"type": "command", "bash": OURS, "timeoutSec": 160, "matcher": "m"}


def test_gemini_settings_keep_every_other_key_and_hook(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    theirs = {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}
    path.write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "mcpServers": {"vsphere": {"command": "x"}},
                "hooks": {"BeforeTool": [theirs], "AfterTool": [theirs]},
            }
        )
    )
    path.chmod(0o640)
    entry = build_entry("gemini", command=OURS, matcher="m", timeout_s=10)
    plan = plan_hook_file("gemini", str(path), entry)
    assert plan.kept_hooks == 1
    backup = write_hook_file(plan)
    data = json.loads(path.read_text())
    assert data["security"] == {"auth": {"selectedType": "gemini-api-key"}}
    assert data["mcpServers"] == {"vsphere": {"command": "x"}}
    assert data["hooks"]["BeforeTool"] == [theirs, entry]
    assert data["hooks"]["AfterTool"] == [theirs]
    assert path.stat().st_mode & 0o777 == 0o640
    assert backup is not None
    assert Path(backup).exists()
    again = plan_hook_file("gemini", str(path), entry)
    assert again.text is None  # idempotent


def test_a_reinstall_replaces_our_entry_and_keeps_a_shared_entrys_other_handlers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hooks.json"
    old = build_entry("codex", command=OURS + " --budget 1", matcher="old", timeout_s=6)
    shared = {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "audit"}, {"type": "command", "command": OURS}],
    }
    path.write_text(json.dumps({"hooks": {"PreToolUse": [old, shared]}}))
    new = build_entry("codex", command=OURS + " --budget 9", matcher="new", timeout_s=14)
    write_hook_file(plan_hook_file("codex", str(path), new))
    entries = json.loads(path.read_text())["hooks"]["PreToolUse"]
    assert entries == [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}, new]


def test_copilot_file_has_version_1_and_keeps_other_hooks(tmp_path: Path) -> None:
    path = tmp_path / "hooks" / "zerto-rewind.json"
    entry = build_entry("copilot", command=OURS, matcher="m", timeout_s=40)
    write_hook_file(plan_hook_file("copilot", str(path), entry))
    assert json.loads(path.read_text()) == {"version": 1, "hooks": {"preToolUse": [entry]}}
    theirs = {"type": "command", "bash": "audit", "matcher": "bash"}
    data = json.loads(path.read_text())
    data["hooks"]["preToolUse"].insert(0, theirs)
    data["hooks"]["postToolUse"] = [theirs]
    path.write_text(json.dumps(data))
    write_hook_file(plan_hook_file("copilot", str(path), entry))
    data = json.loads(path.read_text())
    assert data["hooks"]["preToolUse"] == [theirs, entry]
    assert data["hooks"]["postToolUse"] == [theirs]


def test_a_commented_file_keeps_its_comments_and_layout(tmp_path: Path) -> None:
    """Gemini's settings.json may hold comments: only ``hooks`` changes, in place."""
    path = tmp_path / "settings.json"
    original = '{\n  // the user\'s note\n  "theme": "dark",\n}\n'
    path.write_text(original)
    entry = build_entry("gemini", command=OURS, matcher="m", timeout_s=1)
    plan = plan_hook_file("gemini", str(path), entry)
    assert not plan.drops_comments
    assert plan.text is not None
    assert plan.text.startswith('{\n  // the user\'s note\n  "theme": "dark",')
    write_hook_file(plan)
    again = plan_hook_file("gemini", str(path), entry)
    assert again.text is None  # a re-run changes nothing
    assert "// the user's note" in path.read_text()


def test_a_layout_the_editor_cannot_follow_says_a_rewrite_drops_the_comments(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    # JSON5 that only a full parser reads (an unquoted key): no in-place edit.
    path.write_text('{\n  // the user\'s note\n  theme: "dark",\n}\n')
    plan = plan_hook_file(
        "gemini", str(path), build_entry("gemini", command=OURS, matcher="m", timeout_s=1)
    )
    assert plan.drops_comments
    assert json.loads(plan.text or "")["theme"] == "dark"


@pytest.mark.parametrize(
    "text", ["[1]", "{not json", '{"hooks": []}', '{"hooks": {"BeforeTool": {}}}']
)
def test_a_file_that_is_not_a_hook_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(ConfigError):
        plan_hook_file("gemini", str(path), {"matcher": "m", "hooks": []})


def test_the_post_entry_goes_under_each_post_event_and_is_found_again(tmp_path: Path) -> None:
    """Gemini's AfterTool gets our post entry beside the user's own; a file without it
    misses the event (the doctor's "hook results" warning)."""
    theirs = {"matcher": "x", "hooks": [{"type": "command", "command": "audit.sh"}]}
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {"AfterTool": [theirs]}}))
    assert missing_post_events("gemini", str(path)) == ["AfterTool"]
    entry = build_entry("gemini", command=OURS, matcher="m", timeout_s=10)
    post = build_entry("gemini", command=OURS, matcher="p", timeout_s=30)
    write_hook_file(plan_hook_file("gemini", str(path), entry, post))
    data = json.loads(path.read_text())
    assert data["hooks"]["AfterTool"] == [theirs, post]
    assert missing_post_events("gemini", str(path)) == []
    assert plan_hook_file("gemini", str(path), entry, post).text is None  # idempotent
    copilot = tmp_path / "zerto-rewind.json"
    write_hook_file(plan_hook_file("copilot", str(copilot), entry))
    assert missing_post_events("copilot", str(copilot)) == ["postToolUse", "postToolUseFailure"]
