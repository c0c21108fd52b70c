"""``zerto-rewind install host-hook HOST`` against a real guard service, in temporary HOMEs."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from support.service import served, served_url  # noqa: F401  (fixtures)
from zerto_rewind.cli import install_cmd, install_host_hook
from zerto_rewind.cli import run_command as cli_edge
from zerto_rewind.hooks.thin import LAUNCH_CODE
from zerto_rewind.hostconfig.formats import parse_jsonc
from zerto_rewind.hostconfig.hooks import HOOK_MARKER

GUARD_BUDGET_S = 10.0


def install(argv: list[str], home: Path) -> int:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    return cli_edge("install host-hook", lambda: install_host_hook.main(argv, env))


def test_codex_user_and_project_files_keep_the_users_other_hooks(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "hooks.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [theirs], "Stop": [theirs]}})
    )
    assert install(["codex", "--user", "--service", service], home) == 0
    out = capsys.readouterr().out
    assert "--dangerously-bypass-hook-trust" in out  # the trust step is said
    assert "kept:     1 other hook entry" in out
    data = json.loads((home / ".codex" / "hooks.json").read_text())
    assert data["hooks"]["Stop"] == [theirs]
    first, ours = data["hooks"]["PreToolUse"]
    assert first == theirs
    handler = ours["hooks"][0]
    words = shlex.split(handler["command"])
    assert words[:5] == [os.path.abspath(sys.executable), "-P", "-c", LAUNCH_CODE, "hook"]
    assert words[words.index("--host") + 1] == "codex"
    assert words[words.index("--service-user") + 1] == str(os.stat(service[5:]).st_uid)
    assert words[words.index("--servers") + 1] == "vsphere"
    assert handler["timeout"] > float(words[words.index("--budget") + 1])
    assert ours["matcher"] == "^(?:mcp__(?:vsphere)__.+|Bash|apply_patch|Edit|Write)$"
    (post,) = data["hooks"]["PostToolUse"]  # the same command records the result after it
    assert post["hooks"][0]["command"] == handler["command"]
    assert post["matcher"] == "^(?:mcp__(?:vsphere)__.+)$"
    assert "results:  PostToolUse" in out
    before = (home / ".codex" / "hooks.json").read_text()
    assert install(["codex", "--user", "--service", service], home) == 0
    assert "already installed, nothing to change" in capsys.readouterr().out
    assert (home / ".codex" / "hooks.json").read_text() == before
    project = tmp_path / "project"
    project.mkdir()
    assert install(["codex", "--project", str(project), "--service", service], home) == 0
    assert (project / ".codex" / "hooks.json").exists()


def test_gemini_settings_keep_the_model_and_the_mcp_servers(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"vsphere": {"command": "zerto-rewind", "args": ["gateway"]}},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    assert install(["gemini", "--user", "--service", service, "--prompt-as", "deny"], home) == 0
    assert "fingerprints project hooks" in capsys.readouterr().out
    data = json.loads((home / ".gemini" / "settings.json").read_text())
    assert {k: data[k] for k in settings} == settings
    (entry,) = data["hooks"]["BeforeTool"]
    assert entry["hooks"][0]["timeout"] % 1000 == 0  # milliseconds
    assert "--prompt-as deny" in entry["hooks"][0]["command"]


def test_gemini_with_comments_keeps_them(service: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    text = '{\n  // mine\n  "theme": "dark"\n}\n'
    (home / ".gemini" / "settings.json").write_text(text)
    assert install(["gemini", "--user", "--service", service], home) == 0
    written = (home / ".gemini" / "settings.json").read_text()
    assert written.startswith('{\n  // mine\n  "theme": "dark"')
    (entry,) = parse_jsonc(written)["hooks"]["BeforeTool"]
    assert HOOK_MARKER in entry["hooks"][0]["command"]


def test_gemini_with_a_layout_the_editor_cannot_follow_needs_force(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    text = '{\n  // mine\n  theme: "dark"\n}\n'  # an unquoted key: JSON5 only
    (home / ".gemini" / "settings.json").write_text(text)
    assert install(["gemini", "--user", "--service", service], home) == 1
    assert "has comments, which a rewrite would drop" in capsys.readouterr().err
    assert (home / ".gemini" / "settings.json").read_text() == text
    assert install(["gemini", "--user", "--service", service, "--force"], home) == 0
    assert "comments were dropped" in capsys.readouterr().out
    assert json.loads((home / ".gemini" / "settings.json").read_text())["theme"] == "dark"


def test_copilot_writes_its_own_file(service: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert install(["copilot", "--user", "--service", service], home) == 0
    data = json.loads((home / ".copilot" / "hooks" / "zerto-rewind.json").read_text())
    assert data["version"] == 1
    (entry,) = data["hooks"]["preToolUse"]
    assert entry["matcher"] == "(?:vsphere)-.+|bash|create|edit"
    assert entry["timeoutSec"] > 10
    for event in ("postToolUse", "postToolUseFailure"):
        (post,) = data["hooks"][event]
        assert (post["bash"], post["matcher"]) == (entry["bash"], "(?:vsphere)-.+")


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["codex", "--prompt-as", "ask"], "a codex hook cannot ask"),
        (["copilot", "--prompt-as", "ask"], "a copilot hook cannot ask"),
        (["gemini", "--servers", "other"], "--servers other: not in the service's catalog"),
    ],
)
def test_refusals_write_nothing(
    service: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expect: str,
) -> None:
    home = tmp_path / "home"
    assert install([*argv, "--user", "--service", service], home) == 1
    assert expect in capsys.readouterr().err
    assert not home.exists()


def test_an_unreachable_or_plain_http_service_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    absent = f"unix:{tmp_path / 'absent.sock'}"
    assert install(["codex", "--user", "--service", absent], home) == 1
    assert "cannot find the guard service's socket" in capsys.readouterr().err
    assert install(["codex", "--user", "--service", "http://127.0.0.1:1"], home) == 1
    assert "plain http" in capsys.readouterr().err
    assert not home.exists()


def test_install_lists_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert install_cmd.main(["--help"]) == 0
    assert "host-hook" in capsys.readouterr().out


def test_file_and_dry_run(service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--file names any file of the host's format; --dry-run prints it and writes nothing."""
    home = tmp_path / "home"
    target = tmp_path / "elsewhere" / "hooks.json"
    argv = ["codex", "--file", str(target), "--service", service]
    assert install([*argv, "--dry-run"], home) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert "dry run, nothing written" in captured.err
    assert not target.exists()
    assert install(argv, home) == 0
    assert json.loads(target.read_text()) == printed
    (entry,) = printed["hooks"]["PreToolUse"]
    assert f"--protect {target}" in entry["hooks"][0]["command"]  # the file it wrote


def test_json_says_what_was_written(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: a dry run previews the file; the install names it; a rerun changes nothing."""
    home = tmp_path / "home"
    target = tmp_path / "elsewhere" / "hooks.json"
    argv = ["codex", "--file", str(target), "--service", service, "--json"]
    assert install([*argv, "--dry-run"], home) == 0
    dry = json.loads(capsys.readouterr().out)
    assert (dry["target"], dry["outcome"], dry["would_write"]) == (
        "host-hook",
        "dry-run",
        [str(target)],
    )
    assert json.loads(dry["preview"][str(target)])["hooks"]["PreToolUse"]
    assert not target.exists()
    assert install(argv, home) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["outcome"], done["written"]) == ("installed", [str(target)])
    assert any(line.startswith("file:") for line in done["details"])
    assert install(argv, home) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "unchanged"
