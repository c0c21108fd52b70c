"""Installing the hook into Claude Code's settings: merge, files, command line."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from support.config import write_offline_config
from zerto_rewind.cli import install_claude_code, run_command
from zerto_rewind.config import load_settings
from zerto_rewind.config.loader import file_sha256
from zerto_rewind.config.settings import DEFAULT_GUARD_TIMEOUT_S
from zerto_rewind.errors import ConfigError
from zerto_rewind.hooks.standalone import LAUNCH_CODE
from zerto_rewind.hostconfig.install.matcher import SELF_TOOLS, compile_matcher
from zerto_rewind.hostconfig.install.settings_file import (
    POST_EVENTS,
    build_entry,
    build_post_entry,
    find_our_hooks,
    hook_command,
    launch_code,
    merge,
    plan_timeout,
    required_margin,
)


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    """``install claude-code`` behind the CLI's error edge, as ``zerto-rewind install`` runs it."""
    return run_command("install claude-code", lambda: install_claude_code.main(argv, env))


EXAMPLE = Path(__file__).resolve().parents[4] / "hooks" / "settings.example.json"
VSPHERE_MATCHER = "^mcp__vsphere__(?!(?:list_vms|get_.*)$)"
# guard.protect_self (default on) adds Claude Code's file and shell tools.
OWN_TOOLS = "Bash$|Write$|Edit$|MultiEdit$|NotebookEdit$"
PROTECTED_MATCHER = f"^(?:mcp__vsphere__(?!(?:list_vms|get_.*)$)|{OWN_TOOLS})"


def entry(
    command: str = "/venv/bin/python -m zerto_rewind hook --config /c.json",
) -> dict[str, Any]:
    """A zerto-rewind PreToolUse entry with this command."""
    return {"matcher": "^x", "hooks": [{"type": "command", "command": command, "timeout": 180}]}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory."""
    path = tmp_path / "home"
    path.mkdir()
    return path


VSPHERE_SERVER = {"mcpServers": {"vsphere": {"command": "mcvsphere", "env": {"VCENTER_HOST": "x"}}}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory whose .mcp.json defines the catalog's server, vsphere."""
    path = tmp_path / "project"
    path.mkdir()
    (path / ".mcp.json").write_text(json.dumps(VSPHERE_SERVER))
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A valid config file."""
    return write_offline_config(tmp_path)


def run(home: Path, *argv: str) -> int:
    """Run ``zerto-rewind install`` with a clean environment."""
    return main(list(argv), env={"HOME": str(home)})


def read(project: Path) -> dict[str, Any]:
    """The project's Claude Code settings."""
    data: dict[str, Any] = json.loads((project / ".claude" / "settings.json").read_text())
    return data


# ------------------------------------------------------------------ pure parts


def test_build_entry_has_the_fields_claude_code_needs() -> None:
    """The entry blocks on failure, has a status message and quotes both paths."""
    built = build_entry(
        python="/opt/my venv/bin/python", config="/etc/z r.json", matcher="^m", timeout_s=180
    )
    handler = built["hooks"][0]
    assert built["matcher"] == "^m"
    assert handler["type"] == "command"
    assert handler["onFailure"] == "block"
    assert handler["timeout"] == 180
    assert handler["statusMessage"] == "zerto-rewind: checkpoint before change"
    assert shlex.split(handler["command"]) == [
        "/opt/my venv/bin/python", "-S", "-P", "-c", launch_code(), "hook",
        "--config", "/etc/z r.json",
    ]  # fmt: skip
    assert launch_code().endswith(LAUNCH_CODE)


def test_build_entry_refuses_relative_paths() -> None:
    """A relative interpreter or config would depend on the host's working directory."""
    with pytest.raises(ValueError, match="absolute"):
        build_entry(python="python3", config="/c.json", matcher="^m", timeout_s=180)
    with pytest.raises(ValueError, match="absolute"):
        build_entry(python="/p", config="c.json", matcher="^m", timeout_s=180)


def test_merge_keeps_other_hooks_events_and_keys() -> None:
    """Other PreToolUse entries, other events and other settings survive untouched."""
    bash = {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}
    post = {"matcher": "*", "hooks": [{"type": "command", "command": "audit.sh"}]}
    settings: dict[str, Any] = {
        "permissions": {"allow": ["Read"]},
        "env": {"A": "1"},
        "hooks": {"PreToolUse": [bash], "PostToolUse": [post]},
    }
    merged = merge(settings, entry())
    assert merged["permissions"] == {"allow": ["Read"]}
    assert merged["env"] == {"A": "1"}
    assert merged["hooks"]["PostToolUse"] == [post]
    assert merged["hooks"]["PreToolUse"] == [bash, entry()]
    assert settings["hooks"]["PreToolUse"] == [bash]  # the input is not modified


def test_merge_replaces_our_entry_in_place() -> None:
    """Re-merging replaces the earlier zerto-rewind entry where it was, never adds one."""
    bash = {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}
    old = entry("/old/python -m zerto_rewind hook --config /old.json")
    new = entry("/new/python -m zerto_rewind hook --config /new.json")
    merged = merge({"hooks": {"PreToolUse": [old, bash]}}, new)
    assert merged["hooks"]["PreToolUse"] == [new, bash]
    assert merge(merged, new) == merged


def test_merge_recognises_the_console_script_and_exec_forms() -> None:
    """``zerto-rewind hook`` and an exec-form ``args`` list are ours too."""
    script = entry("/venv/bin/zerto-rewind hook")
    exec_form = {
        "matcher": "^y",
        "hooks": [{"type": "command", "command": "/p", "args": ["-m", "zerto_rewind", "hook"]}],
    }
    merged = merge({"hooks": {"PreToolUse": [script, exec_form]}}, entry())
    assert merged["hooks"]["PreToolUse"] == [entry()]


def test_merge_keeps_foreign_handlers_that_shared_our_entry() -> None:
    """A hand-merged entry loses only our handler; its other handlers stay."""
    shared = {
        "matcher": "^mcp__",
        "hooks": [
            {"type": "command", "command": "/p -m zerto_rewind hook"},
            {"type": "command", "command": "notify.sh"},
        ],
    }
    merged = merge({"hooks": {"PreToolUse": [shared]}}, entry())
    assert merged["hooks"]["PreToolUse"] == [
        entry(),
        {"matcher": "^mcp__", "hooks": [{"type": "command", "command": "notify.sh"}]},
    ]
    assert len(find_our_hooks(merged)) == 1


@pytest.mark.parametrize(
    ("settings", "key"),
    [({"hooks": []}, "hooks"), ({"hooks": {"PreToolUse": {}}}, "hooks.PreToolUse")],
)
def test_merge_refuses_unexpected_shapes(settings: dict[str, Any], key: str) -> None:
    """A hooks block of the wrong shape is reported, not overwritten."""
    with pytest.raises(ConfigError) as info:
        merge(settings, entry())
    assert info.value.key == key


def test_plan_timeout_keeps_a_large_enough_timeout() -> None:
    """180 s over the default 150 s budget is left alone."""
    assert plan_timeout(180, DEFAULT_GUARD_TIMEOUT_S) == (180, None)


def test_plan_timeout_raises_a_timeout_too_close_to_the_budget() -> None:
    """A timeout without 10 s / 10 % headroom becomes budget + 30 s, with a note."""
    timeout, note = plan_timeout(180, 175)
    assert timeout == 205
    assert note is not None
    assert "raised from 180 s to 205 s" in note
    big, _ = plan_timeout(180, 600)  # 10 % of 600 is more than 30 s
    assert big >= 600 + required_margin(600)


# ------------------------------------------------------------------ command line


def test_install_writes_absolute_paths_and_the_compiled_matcher(
    home: Path, project: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative --config is made absolute; the interpreter is this venv's python."""
    monkeypatch.chdir(config.parent)
    assert run(home, "claude-code", "--project", str(project), "--config", config.name) == 0
    (ours,) = read(project)["hooks"]["PreToolUse"]
    handler = ours["hooks"][0]
    argv = shlex.split(handler["command"])
    assert argv[0] == os.path.abspath(sys.executable)  # not resolved through the symlink
    assert argv[argv.index("--config") + 1] == str(config)
    assert argv[argv.index("--config-sha256") + 1] == file_sha256(str(config))
    assert argv[argv.index("--settings") + 1] == str(project / ".claude" / "settings.json")
    assert ours["matcher"] == PROTECTED_MATCHER
    assert handler["timeout"] == 180
    assert handler["onFailure"] == "block"


def test_install_is_idempotent_and_makes_no_backup_when_nothing_changes(
    home: Path, project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second run finds the same entry, writes nothing and says so."""
    argv = ("claude-code", "--project", str(project), "--config", str(config))
    assert run(home, *argv) == 0
    first = (project / ".claude" / "settings.json").read_text()
    assert run(home, *argv) == 0
    assert "already installed" in capsys.readouterr().out
    assert (project / ".claude" / "settings.json").read_text() == first
    assert sorted(p.name for p in (project / ".claude").iterdir()) == ["settings.json"]


def test_install_backs_up_and_keeps_an_existing_file(
    home: Path, project: Path, config: Path
) -> None:
    """An existing settings file is copied to settings.json.bak-<UTC> and merged into."""
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = '{"model": "opus", "hooks": {"Stop": [{"hooks": []}]}}'
    settings.write_text(original)
    settings.chmod(0o600)
    assert run(home, "claude-code", "--project", str(project), "--config", str(config)) == 0
    (backup,) = settings.parent.glob("settings.json.bak-*")
    assert backup.read_text() == original
    assert backup.name.endswith("Z")
    merged = read(project)
    assert merged["model"] == "opus"
    assert merged["hooks"]["Stop"] == [{"hooks": []}]
    assert len(merged["hooks"]["PreToolUse"]) == 1
    assert settings.stat().st_mode & 0o777 == 0o600
    assert settings.read_text().startswith('{\n  "model": "opus",')  # indent 2, order kept


def test_dry_run_prints_the_result_and_writes_nothing(
    home: Path, project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run prints the merged JSON on stdout and creates no file."""
    code = run(home, "claude-code", "--project", str(project), "--config", str(config), "--dry-run")
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["hooks"]["PreToolUse"][0]["matcher"] == PROTECTED_MATCHER
    assert not (project / ".claude").exists()


def test_invalid_settings_json_is_refused_and_left_alone(
    home: Path, project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A settings file that is not JSON is never overwritten: exit 1 with the parse error."""
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": ')
    assert run(home, "claude-code", "--project", str(project), "--config", str(config)) == 1
    assert "not valid JSON" in capsys.readouterr().err
    assert settings.read_text() == '{"hooks": '
    assert list(settings.parent.iterdir()) == [settings]


def test_broken_config_is_not_installed(
    home: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config that does not load (here a bad vm_arg regex) stops the install."""
    bad = write_offline_config(
        tmp_path, tools={"mcp__v__x": {"vm_arg": {"path": "a", "pattern": "("}}}
    )
    assert run(home, "claude-code", "--project", str(project), "--config", str(bad)) == 1
    err = capsys.readouterr().err
    assert "tools.mcp__v__x.vm_arg.pattern" in err
    assert "Not installed" in err
    assert not (project / ".claude").exists()


def test_timeout_is_raised_above_a_large_guard_budget(
    home: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """guard.timeout_s 300 with the default 180 s host timeout installs 330 s and says so."""
    big = write_offline_config(tmp_path, guard={"timeout_s": 300})
    assert run(home, "claude-code", "--project", str(project), "--config", str(big)) == 0
    assert read(project)["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] == 330
    assert "timeout raised from 180 s to 330 s" in capsys.readouterr().out


def test_user_install_writes_home_settings(home: Path, config: Path) -> None:
    """--user writes $HOME/.claude/settings.json."""
    (home / ".claude.json").write_text(json.dumps(VSPHERE_SERVER))
    assert run(home, "claude-code", "--user", "--config", str(config)) == 0
    data = json.loads((home / ".claude" / "settings.json").read_text())
    assert len(find_our_hooks(data)) == 1


def test_all_tools_guards_every_tool_but_read_only(home: Path, project: Path, config: Path) -> None:
    """--all-tools writes a matcher that excludes read-only tools only."""
    argv = ("claude-code", "--project", str(project), "--config", str(config), "--all-tools")
    assert run(home, *argv) == 0
    matcher = read(project)["hooks"]["PreToolUse"][0]["matcher"]
    assert matcher == f"^(?:{OWN_TOOLS}|(?!(?:mcp__vsphere__list_vms|mcp__vsphere__get_.*)$).*)"
    command = read(project)["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith(" --all-tools")  # the hook gives unlisted Bash the unlisted rule


def test_protect_self_off_leaves_the_host_tools_out_of_the_matcher(
    home: Path, project: Path, tmp_path: Path
) -> None:
    quiet = write_offline_config(tmp_path, guard={"protect_self": False})
    assert run(home, "claude-code", "--project", str(project), "--config", str(quiet)) == 0
    assert read(project)["hooks"]["PreToolUse"][0]["matcher"] == VSPHERE_MATCHER


# ------------------------------------------------------------------ the example file


def test_settings_example_matches_what_install_builds(tmp_path: Path) -> None:
    """hooks/settings.example.json is valid JSON and is exactly the entry install would write."""
    example = json.loads(EXAMPLE.read_text())
    (ours,) = example["hooks"]["PreToolUse"]
    handler = ours["hooks"][0]
    assert handler["onFailure"] == "block"
    assert handler["timeout"] == 180
    budget = DEFAULT_GUARD_TIMEOUT_S
    assert handler["timeout"] >= budget + required_margin(budget)
    catalog = load_settings({}, path=str(write_offline_config(tmp_path))).catalog
    assert ours["matcher"] == compile_matcher(catalog, self_tools=SELF_TOOLS) == PROTECTED_MATCHER
    python, config = "/ABS/PATH/TO/venv/bin/python", "/ABS/PATH/TO/zerto-rewind.json"
    pin, settings = "SHA256_OF_THE_CONFIG", "/ABS/PATH/TO/project/.claude/settings.json"
    package_dir = "/ABS/PATH/TO/site-packages"
    assert handler["command"] == hook_command(
        python, config, config_sha256=pin, settings=settings, package_dir=package_dir
    )
    assert ours == build_entry(
        python=python,
        config=config,
        matcher=PROTECTED_MATCHER,
        timeout_s=180,
        config_sha256=pin,
        settings=settings,
        package_dir=package_dir,
    )
    # after the call: the same command, as install registers it for each post event
    after = build_post_entry(compile_matcher(catalog), handler["command"])
    assert {event: example["hooks"][event] for event in POST_EVENTS} == {
        event: [after] for event in POST_EVENTS
    }


def test_catalog_naming_nothing_is_refused(
    home: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A catalog with no server and no tool would never start the hook: exit 1, no file."""
    empty = write_offline_config(tmp_path, read_only_tools=[], tools={})
    assert run(home, "claude-code", "--project", str(project), "--config", str(empty)) == 1
    assert "--all-tools" in capsys.readouterr().err
    assert not (project / ".claude").exists()


# ---------------------------------------------------------------- server names, MCP server (#13)


def test_install_refuses_a_catalog_server_no_mcp_config_defines(
    home: Path, project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """.mcp.json registers `mcvsphere`, the catalog says `vsphere`: refused, unless --force."""
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"mcvsphere": {"command": "m"}}}))
    argv = ("claude-code", "--project", str(project), "--config", str(config))
    assert run(home, *argv) == 1
    err = capsys.readouterr().err
    assert "vsphere" in err
    assert f"{project / '.mcp.json'} (project): mcvsphere" in err
    assert not (project / ".claude" / "settings.json").exists()
    assert run(home, *argv, "--force") == 0


def test_a_server_given_with_mcp_config_or_the_local_scope_counts(
    home: Path, project: Path, config: Path, tmp_path: Path
) -> None:
    """A `claude --mcp-config` file, or ~/.claude.json's projects[dir], defines the server too."""
    (project / ".mcp.json").unlink()
    argv = ("claude-code", "--project", str(project), "--config", str(config))
    assert run(home, *argv) == 1
    extra = tmp_path / "mcp.json"
    extra.write_text(json.dumps(VSPHERE_SERVER))
    assert run(home, *argv, "--mcp-config", str(extra)) == 0
    (home / ".claude.json").write_text(json.dumps({"projects": {str(project): VSPHERE_SERVER}}))
    assert run(home, *argv) == 0


def test_with_mcp_server_registers_serve_and_the_hook_names_it(
    home: Path, project: Path, config: Path
) -> None:
    """--with-mcp-server: .mcp.json gains `zerto-rewind serve`; the hook, --mcp-server NAME."""
    argv = ("claude-code", "--project", str(project), "--config", str(config))
    assert run(home, *argv) == 0
    (plain,) = read(project)["hooks"]["PreToolUse"]
    assert "--mcp-server" not in plain["hooks"][0]["command"]
    assert run(home, *argv, "--with-mcp-server") == 0
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert set(servers) == {"vsphere", "zerto-rewind"}  # the VM server is kept
    assert servers["zerto-rewind"]["args"] == [
        "-m",
        "zerto_rewind",
        "serve",
        "--config",
        str(config),
    ]
    assert servers["zerto-rewind"]["command"] == os.path.abspath(sys.executable)
    (ours,) = read(project)["hooks"]["PreToolUse"]
    assert shlex.split(ours["hooks"][0]["command"])[-2:] == ["--mcp-server", "zerto-rewind"]
    # a later plain install sees the server in .mcp.json and keeps naming it
    assert run(home, *argv) == 0
    (again,) = read(project)["hooks"]["PreToolUse"]
    assert again == ours


def test_user_install_with_mcp_server_writes_claude_json(home: Path, config: Path) -> None:
    """--user --with-mcp-server registers the server in ~/.claude.json, keeping its other keys."""
    (home / ".claude.json").write_text(json.dumps({**VSPHERE_SERVER, "numStartups": 3}))
    assert run(home, "claude-code", "--user", "--config", str(config), "--with-mcp-server") == 0
    data = json.loads((home / ".claude.json").read_text())
    assert data["numStartups"] == 3
    assert set(data["mcpServers"]) == {"vsphere", "zerto-rewind"}


def test_the_plugin_hook_names_the_plugin_server(config: Path) -> None:
    """The plugin bundles the MCP server, so its hook hint names plugin_<name>_zerto-rewind."""
    from zerto_rewind.hostconfig.install.plugin import plugin_files

    settings = load_settings({"ZPW": "x"}, path=str(config))
    files, _notes = plugin_files(settings, python=sys.executable, config=str(config))
    (entry,) = files["hooks/hooks.json"]["hooks"]["PreToolUse"]
    command = shlex.split(entry["hooks"][0]["command"])
    assert command[-2:] == ["--mcp-server", "plugin_zerto-rewind_zerto-rewind"]


def test_json_says_what_was_written_then_that_nothing_changed(
    home: Path, project: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: one object on stdout; the settings file in `written`, its backup the second
    time nothing; a dry run lists what it would write and previews it."""
    argv = ("claude-code", "--project", str(project), "--config", str(config), "--json")
    settings = str(project / ".claude" / "settings.json")
    assert run(home, *argv, "--dry-run") == 0
    dry = json.loads(capsys.readouterr().out)
    assert (dry["target"], dry["outcome"], dry["written"]) == ("claude-code", "dry-run", [])
    assert dry["would_write"] == [settings]
    assert json.loads(dry["preview"][settings])["hooks"]["PreToolUse"]
    assert run(home, *argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["outcome"], first["written"], first["backups"]) == ("installed", [settings], [])
    assert any(line.startswith("installed ") for line in first["details"])
    assert run(home, *argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["outcome"], again["written"]) == ("unchanged", [])


def test_the_plugin_s_json_names_its_directory(
    home: Path, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plugin"
    argv = ["claude-plugin", "--out", str(out), "--config", str(config), "--json"]
    assert run(home, *argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["target"], report["outcome"]) == ("claude-plugin", "installed")
    assert report["written"] == [str(out)]
    assert out.is_dir()
