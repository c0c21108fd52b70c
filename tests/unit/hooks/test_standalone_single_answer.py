"""The hook writes exactly one decision, whatever fails before or after writing it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from zerto_rewind.core.decision import Decision, Outcome, Row
from zerto_rewind.hooks import standalone as hook


@pytest.fixture
def config(tmp_path: Path) -> str:
    """A valid config whose catalog lists nothing (every tool is unlisted)."""
    path = tmp_path / "config.json"
    data = {"zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "NOPE"}}
    path.write_text(json.dumps(data))
    os.chmod(path, 0o600)
    return str(path)


def run_main(
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    tmp_path: Path,
    *,
    tool_input: dict[str, str] | None = None,
) -> tuple[int, str]:
    """hook.main on one call of mcp__x__y (unlisted unless the config lists it; then denied
    with ZERTO_HOOK_UNKNOWN=deny); returns (code, stdout)."""
    payload = {
        "hook_event_name": "PreToolUse",
        "tool_name": "mcp__x__y",
        "tool_input": tool_input or {},
    }
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    env = {
        "ZERTO_HOOK_UNKNOWN": "deny",
        "ZERTO_HOOK_LOG": str(tmp_path / "log"),
        "ZERTO_REWIND_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
        "NOPE": "unit-test-secret",  # the config's client_secret_env
    }
    # In-process: the watchdog would end pytest itself, so this run says it needs none.
    code = hook.main(["--config", config], env, watchdog=False)
    return code, out.getvalue()


def test_a_failure_after_the_answer_does_not_add_a_second_document(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """An exception while logging, after the deny is written: stdout still holds one deny."""

    def explode(*_args: object) -> None:
        raise RuntimeError("log exploded")

    monkeypatch.setattr("zerto_rewind.hooks.hook_log.log", explode)
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


def test_a_guard_crash_denies_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """A non-ZertoRewindError from the guard (a bug, a broken lock): deny, naming the error."""
    from zerto_rewind.core.guard import Guard

    def crash(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("lock table corrupted")

    monkeypatch.setattr(Guard, "decide", crash)
    guarded = tmp_path / "guarded.json"
    data = json.loads(Path(config).read_text())
    data["tools"] = {"mcp__x__y": {"vm_arg": "name"}}
    guarded.write_text(json.dumps(data))
    os.chmod(guarded, 0o600)
    code, stdout = run_main(monkeypatch, str(guarded), tmp_path, tool_input={"name": "vm-1"})
    answer = json.loads(stdout)["hookSpecificOutput"]
    assert code == 0
    assert answer["permissionDecision"] == "deny"
    assert "RuntimeError: lock table corrupted" in answer["permissionDecisionReason"]
    assert "not run" in answer["permissionDecisionReason"]


def test_a_crash_before_any_answer_denies_instead_of_exiting_silently(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """Anything raised before the guard answers: a deny JSON on stdout, never a silent 0."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("settings loader broke")

    monkeypatch.setattr(hook, "load_settings", broken)
    code, stdout = run_main(monkeypatch, config, tmp_path)
    answer = json.loads(stdout)["hookSpecificOutput"]
    assert code == 0
    assert answer["permissionDecision"] == "deny"
    assert "RuntimeError: settings loader broke" in answer["permissionDecisionReason"]


def test_the_watchdog_does_nothing_once_the_answer_is_given(config: str, tmp_path: Path) -> None:
    """An armed watchdog with a 0.5 s budget; the answer comes first; 1.5 s later all is well.

    The hook runs in-process in a child interpreter, so a watchdog that still
    fires ends the child (not pytest) and the missing "alive" line says so.
    """
    child = textwrap.dedent(
        f"""
        import io, json, sys, time
        from zerto_rewind.hooks import standalone as hook
        payload = {{"hook_event_name": "PreToolUse", "tool_name": "mcp__x__y", "tool_input": {{}}}}
        sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
        env = {{
            "ZERTO_HOOK_UNKNOWN": "deny",
            "ZERTO_HOOK_GUARD_TIMEOUT": "0.5",
            "ZERTO_HOOK_LOG": {str(tmp_path / "log")!r},
            "ZERTO_REWIND_STATE_DIR": {str(tmp_path / "state")!r},
            "HOME": {str(tmp_path)!r},
            "NOPE": "unit-test-secret",
        }}
        code = hook.main(["--config", {config!r}], env)
        time.sleep(1.5)
        print("alive", code, flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=30, check=False
    )
    lines = done.stdout.splitlines()
    assert lines[-1:] == ["alive 0"], done.stdout + done.stderr
    assert done.returncode == 0
    decisions = [json.loads(line) for line in lines[:-1]]
    assert [d["hookSpecificOutput"]["permissionDecision"] for d in decisions] == ["deny"]
    assert (
        "not in the zerto-rewind catalog"
        in decisions[0]["hookSpecificOutput"]["permissionDecisionReason"]
    )


def _answer(tmp_path: Path, config: str) -> hook._Answer:
    from zerto_rewind.config import load_settings
    from zerto_rewind.core.decision import ToolCall

    env = {"HOME": str(tmp_path), "ZERTO_HOOK_LOG": str(tmp_path / "log")}
    return hook._Answer(load_settings(env, path=config), ToolCall("mcp__x__y", {}))


def _deny() -> Decision:
    return Decision(Row.UNLISTED, Outcome.DENY, "mcp__x__y", reason="denied by the guard")


def test_a_watchdog_that_fires_after_the_answer_neither_writes_nor_exits(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """The race where the timer expires just as the guard answers: the guard's answer stands."""
    exits: list[int] = []
    monkeypatch.setattr(hook.os, "_exit", exits.append)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    answer = _answer(tmp_path, config)
    assert answer.give(_deny()) == 0
    answer._timeout()
    assert exits == []
    assert len(out.getvalue().splitlines()) == 1


def test_the_watchdog_thread_ends_when_the_answer_is_given(
    monkeypatch: pytest.MonkeyPatch, config: str, tmp_path: Path
) -> None:
    """An armed watchdog with a minute to go stops at once when the guard answers."""
    monkeypatch.setattr("sys.stdout", io.StringIO())
    answer = _answer(tmp_path, config)
    answer.arm_watchdog(time.monotonic() + 60.0)
    (watchdog,) = [t for t in threading.enumerate() if t.name == "zerto-rewind-watchdog"]
    answer.give(_deny())
    watchdog.join(timeout=5.0)
    assert not watchdog.is_alive()
