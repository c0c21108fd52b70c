"""guard.protect_self: which file and shell calls count as writing the guard's own files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zerto_rewind.config import load_settings
from zerto_rewind.hooks import protect
from zerto_rewind.hostconfig.install.matcher import compile_matcher

HEAVY = ("json", "re", "typing", "httpx")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.json").write_text("{}")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.json").write_text("{}")
    return path


@pytest.fixture
def config(home: Path) -> Path:
    path = home / ".config" / "zerto-rewind" / "guard.json"
    path.parent.mkdir(parents=True)
    data = {
        "zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "NOPE"},
        "tools": {"mcp__vsphere__power_off": {"vm_arg": "name"}},
        "state_dir": str(home / "state"),
        "log": str(home / "guard.log"),
    }
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return path


@pytest.fixture
def items(home: Path, project: Path, config: Path) -> list[protect.Protected]:
    settings = load_settings({"HOME": str(home)}, path=str(config))
    env = {"HOME": str(home), "CLAUDE_PROJECT_DIR": str(project)}
    return protect.protected_paths(
        settings, settings_file=str(project / ".claude" / "settings.json"), env=env
    )


def hit(items: list[protect.Protected], tool: str, tool_input: dict[str, str], **kw: str) -> str:
    found = protect.check(tool, tool_input, items, **kw)
    return "" if found is None else found[0].what


# ---------------------------------------------------------------- file tools


@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit"])
def test_file_tools_on_the_config_settings_state_and_log_are_caught(
    tool: str, items: list[protect.Protected], home: Path, project: Path, config: Path
) -> None:
    assert hit(items, tool, {"file_path": str(config)}) == "the guard's config"
    for settings in (
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",  # not there yet: still protected
        home / ".claude" / "settings.json",
    ):
        assert "host settings" in hit(items, tool, {"file_path": str(settings)})
    assert "state" in hit(items, tool, {"file_path": str(home / "state" / "vpgs" / "v.json")})
    assert "log" in hit(items, tool, {"file_path": str(home / "guard.log")})
    assert "Python environment" in hit(items, tool, {"file_path": f"{sys.prefix}/lib/x.pth"})
    assert hit(items, tool, {"file_path": str(project / "README.md")}) == ""


def test_relative_tilde_and_dotted_paths_are_resolved(
    items: list[protect.Protected], home: Path, project: Path, config: Path
) -> None:
    assert hit(items, "Write", {"file_path": ".claude/settings.json"}, cwd=str(project))
    assert hit(items, "Write", {"file_path": "../home/guard.log"}, cwd=str(project))
    dotted = str(project / "src" / ".." / ".claude" / "settings.json")
    assert hit(items, "Edit", {"file_path": dotted})
    env_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        assert hit(items, "Write", {"file_path": "~/.config/zerto-rewind/guard.json"})
    finally:
        if env_home is not None:
            os.environ["HOME"] = env_home


def test_symlinks_and_hard_links_to_a_protected_file_are_the_file(
    items: list[protect.Protected], tmp_path: Path, config: Path, home: Path
) -> None:
    link = tmp_path / "innocent.json"
    link.symlink_to(config)
    assert hit(items, "Write", {"file_path": str(link)}) == "the guard's config"
    folder = tmp_path / "elsewhere"
    folder.symlink_to(home / "state")
    assert "state" in hit(items, "Write", {"file_path": str(folder / "vpgs" / "x.json")})
    hard = tmp_path / "hard.json"
    os.link(config, hard)
    assert hit(items, "Edit", {"file_path": str(hard)}) == "the guard's config"


def test_another_spelling_of_a_name_in_a_protected_folder_is_caught(
    items: list[protect.Protected], project: Path
) -> None:
    """On a case-insensitive disk SETTINGS.JSON is settings.json: denied everywhere."""
    assert hit(items, "Write", {"file_path": str(project / ".claude" / "Settings.JSON")})


def test_notebook_edit_names_its_file_as_notebook_path(
    items: list[protect.Protected], config: Path
) -> None:
    assert hit(items, "NotebookEdit", {"notebook_path": str(config)})
    assert hit(items, "NotebookEdit", {"file_path": str(config)}) == ""


# ---------------------------------------------------------------- Bash


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/power_off/list_vms/' {config}",
        "cat > {config} <<'EOF'\n{{}}\nEOF",
        "echo '{{}}' >{config}",
        "python3 -c \"open('{config}', 'w').write('{{}}')\"",
        "cp /tmp/evil.json ~/.config/zerto-rewind/guard.json",
        "mv /tmp/x $HOME/.config/zerto-rewind/guard.json",
        "tee ${{HOME}}/.claude/settings.json < /tmp/x",
        "rm -rf {state}",
        "ln -sf /tmp/evil {config}",
        "cd {project} && echo '{{}}' > .claude/settings.local.json",
        "echo x > guard.json",
        "{prefix}/bin/pip install evil",
        "{prefix}/bin/python -m pip install evil",
        "cp evil.py {prefix}/lib/python3.11/site-packages/",
        "ls; sed -i s/a/b/ ../home/.claude/settings.json",
        "touch ~/.zerto-guard-hook.log",
        "cd ~ && echo > .zerto-guard-hook.log",
    ],
)
def test_bash_commands_that_write_the_guards_files_are_caught(
    command: str, items: list[protect.Protected], home: Path, project: Path, config: Path
) -> None:
    text = command.format(config=config, state=home / "state", project=project, prefix=sys.prefix)
    assert hit(items, "Bash", {"command": text}, home=str(home)), text


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "git status && pytest -q",
        "cat {config}",
        "grep power_off {config}",
        "jq . ~/.claude/settings.json",
        "tail -n 20 {home}/guard.log",
        "{prefix}/bin/python -m pytest -q tests",
        "{prefix}/bin/zerto-rewind log",
        "cp notes.md notes.bak && echo done > out.txt",
        "cat {config}.bak > /tmp/copy.json",
        "ls {state} 2>/dev/null",
    ],
)
def test_bash_commands_that_only_read_or_touch_other_files_pass(
    command: str, items: list[protect.Protected], home: Path, config: Path
) -> None:
    text = command.format(config=config, home=home, state=home / "state", prefix=sys.prefix)
    assert hit(items, "Bash", {"command": text}, home=str(home)) == "", text


def test_non_file_tools_and_odd_inputs_pass(items: list[protect.Protected], config: Path) -> None:
    assert hit(items, "Read", {"file_path": str(config)}) == ""
    assert protect.check("Bash", "not a dict", items) is None
    assert protect.check("Write", {"file_path": 3}, items) is None


# ---------------------------------------------------------------- matcher and cost


def test_the_matcher_adds_the_host_tools_when_protecting(config: Path, home: Path) -> None:
    catalog = load_settings({"HOME": str(home)}, path=str(config)).catalog
    plain = compile_matcher(catalog)
    watched = compile_matcher(catalog, self_tools=protect.SELF_TOOLS)
    assert plain == "^mcp__vsphere__"
    assert watched == "^(?:mcp__vsphere__|Bash$|Write$|Edit$|MultiEdit$|NotebookEdit$)"
    every = compile_matcher(catalog, all_tools=True, self_tools=protect.SELF_TOOLS)
    assert every == ".*"


def test_protect_imports_nothing_heavy() -> None:
    code = (
        "import sys; from zerto_rewind.hooks import protect; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout
