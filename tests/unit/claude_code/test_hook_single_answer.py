"""The hook writes at most one decision, even if something fails after writing it."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from zerto_rewind.claude_code import hook


@pytest.fixture
def config(tmp_path: Path) -> str:
    """A valid config whose catalog lists nothing (every tool is unlisted)."""
    path = tmp_path / "config.json"
    data = {"zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "NOPE"}}
    path.write_text(json.dumps(data))
    os.chmod(path, 0o600)
    return str(path)


def run_main(monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path) -> tuple[int, str]:
    """hook.main on one unlisted call with ZERTO_HOOK_UNKNOWN=deny; returns (code, stdout)."""
    payload = {"hook_event_name": "PreToolUse", "tool_name": "mcp__x__y", "tool_input": {}}
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    env = {
        "ZERTO_HOOK_UNKNOWN": "deny",
        "ZERTO_HOOK_LOG": str(tmp_path / "log"),
        "ZERTO_REWIND_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
    }
    code = hook.main(["--config", config], env)
    return code, out.getvalue()


def test_a_failure_after_the_answer_does_not_add_a_second_document(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """An exception while logging, after the deny is written: stdout still holds one deny."""

    def explode(*_args: object) -> None:
        raise RuntimeError("log exploded")

    monkeypatch.setattr(hook, "_log", explode)
    code, stdout = run_main(monkeypatch, config, tmp_path)
    assert code == 0
    documents = [line for line in stdout.splitlines() if line.strip()]
    assert len(documents) == 1
    assert json.loads(documents[0])["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_an_ordinary_call_answers_once(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """Without failures the unlisted call is denied with exactly one JSON document."""
    code, stdout = run_main(monkeypatch, config, tmp_path)
    assert code == 0
    assert len(stdout.strip().splitlines()) == 1
