"""hook.main in-process: arguments, stdin errors, the config denial, the guarded path's
answers and the watchdog's message (the subprocess tests in test_fast_path.py and
tests/integration/claude_code/ pin the same from outside, where mutmut cannot see).

Every call says ``watchdog=False`` or stubs the watchdog: an armed one ends its
process with ``os._exit``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall
from zerto_rewind.hooks import standalone as hook
from zerto_rewind.hooks.config_denial import config_denial_reason

TOOL = "mcp__vsphere__power_off"
PAYLOAD: dict[str, Any] = {
    "hook_event_name": "PreToolUse",
    "tool_name": TOOL,
    "tool_input": {"name": "vm-1"},
    "session_id": "sess-9",
    "tool_use_id": "toolu_9",
}


def write_hook_config(tmp_path: Path, **extra: Any) -> str:
    """A config for PAYLOAD's tool: power_off is mutating (VM in ``name``), list_vms read-only.

    Its ZVM nobody answers: these tests never get past a fake guard.
    """
    data = {
        "zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "NOPE"},
        "read_only_tools": ["mcp__vsphere__list_vms"],
        "tools": {TOOL: {"vm_arg": "name"}},
        **extra,
    }
    return str(write_config(tmp_path, data))


class Io:
    """Captured stdout and stderr of one in-process hook run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stdin: bytes) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        monkeypatch.setattr("sys.stdout", self.out)
        monkeypatch.setattr("sys.stderr", self.err)

    def answer(self) -> dict[str, Any]:
        (line,) = self.out.getvalue().splitlines()
        specific: dict[str, Any] = json.loads(line)["hookSpecificOutput"]
        return specific


def env_of(tmp_path: Path, **more: str) -> dict[str, str]:
    return {
        "HOME": str(tmp_path),
        "ZERTO_HOOK_LOG": str(tmp_path / "log"),
        "ZERTO_REWIND_STATE_DIR": str(tmp_path / "state"),
        "NOPE": "unit-test-secret",  # the config's client_secret_env
        **more,
    }


def run(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    payload: Any = None,
    **env: str,
) -> tuple[int, Io]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload or PAYLOAD).encode()
    streams = Io(monkeypatch, data)
    return hook.main(argv, env_of(tmp_path, **env), watchdog=False), streams


def log_lines(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (tmp_path / "log").read_text().splitlines()]


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the guarded path; record what it was given."""
    seen: list[dict[str, Any]] = []

    def fake(payload: Any, settings: Any, wall: float, mono: float, **kwargs: Any) -> int:
        seen.append({"tool": payload.tool_name, "settings": settings, **kwargs})
        return 0

    monkeypatch.setattr(hook, "_guarded", fake)
    return seen


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("prefix", [[], ["hook"]])
def test_help_prints_the_usage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flag: str, prefix: list[str]
) -> None:
    code, streams = run(monkeypatch, tmp_path, [*prefix, flag])
    assert (code, streams.out.getvalue()) == (0, hook._USAGE)
    assert hook._USAGE.startswith("usage: zerto-rewind hook [--config PATH]")


@pytest.mark.parametrize(
    ("argv", "stray"),
    [
        (["--config"], ["--config"]),
        (["--verbose", "x"], ["--verbose", "x"]),
        (["--config", "a", "b"], ["b"]),
        (["hook", "--x", "1"], ["--x", "1"]),
        # another hook's option (the thin hook's), read from the one flag table
        (["--config", "a", "--service", "unix:/s"], ["--service"]),
    ],
)
def test_unexpected_arguments_block_the_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str], stray: list[str]
) -> None:
    """The words the hook does not take are named; the call is blocked (exit 2)."""
    code, streams = run(monkeypatch, tmp_path, argv)
    args = stray
    assert code == 2
    assert streams.out.getvalue() == ""
    assert streams.err.getvalue() == (
        f"zerto-rewind hook: unexpected arguments {args!r}; the call is blocked.\n{hook._USAGE}"
    )


def test_hook_then_config_is_read_as_the_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    """`python -c LAUNCH_CODE hook --config F`: the leading "hook" is the subcommand."""
    config = write_hook_config(tmp_path)
    code, _streams = run(monkeypatch, tmp_path, ["hook", "--config", config])
    assert code == 0
    assert guarded[0]["settings"].path == config
    assert guarded[0]["rewind_tool"] is None
    assert guarded[0]["watchdog"] is False


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("zerto", "mcp__zerto__zerto_recovery_plan"),
        ("My-Zerto_2", "mcp__My-Zerto_2__zerto_recovery_plan"),
        ("bad name", None),
        ("x;rm", None),
        ("", None),
    ],
)
def test_mcp_server_names_the_rewind_tool_only_when_it_is_a_plain_name(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    guarded: list[dict[str, Any]],
    name: str,
    tool: str | None,
) -> None:
    config = write_hook_config(tmp_path)
    run(monkeypatch, tmp_path, ["--mcp-server", name, "--config", config])
    assert guarded[0]["rewind_tool"] == tool


def test_the_config_comes_from_the_environment_without_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    config = write_hook_config(tmp_path)
    code, _streams = run(monkeypatch, tmp_path, [], ZERTO_REWIND_CONFIG=config)
    assert (code, guarded[0]["settings"].path) == (0, config)


def test_a_read_only_call_answers_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    config = write_hook_config(tmp_path)
    payload = {**PAYLOAD, "tool_name": "mcp__vsphere__list_vms"}
    code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    assert (code, streams.out.getvalue(), guarded) == (0, "", [])
    assert not (tmp_path / "log").exists()


def test_a_classification_config_error_goes_down_the_guarded_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    """If the catalog cannot classify the call, the guarded path (which denies) decides."""
    from zerto_rewind.errors import ConfigError

    def broken(*_args: object) -> None:
        raise ConfigError("bad", path="/c.json", key="tools")

    monkeypatch.setattr(hook, "classify", broken)
    config = write_hook_config(tmp_path)
    payload = {**PAYLOAD, "tool_name": "mcp__vsphere__list_vms"}
    run(monkeypatch, tmp_path, ["--config", config], payload)
    assert [g["tool"] for g in guarded] == ["mcp__vsphere__list_vms"]


# ---------------------------------------------------------------- stdin


def test_bad_stdin_blocks_with_the_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, streams = run(monkeypatch, tmp_path, [], b'{"tool_name": ""}')
    assert (code, streams.out.getvalue()) == (2, "")
    assert streams.err.getvalue() == (
        "zerto-rewind hook: hook input has no tool_name string. The call is blocked; check the "
        "hook wiring.\n"
    )


def test_unreadable_stdin_blocks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Broken:
        def read(self) -> bytes:
            raise OSError("EIO")

    streams = Io(monkeypatch, b"")
    monkeypatch.setattr("sys.stdin", type("S", (), {"buffer": Broken()})())
    code = hook.main([], env_of(tmp_path), watchdog=False)
    assert code == 2
    assert streams.err.getvalue() == (
        "zerto-rewind hook: cannot read stdin: EIO. The call is blocked.\n"
    )


# ---------------------------------------------------------------- the config denial


def test_a_broken_config_denies_says_what_to_fix_and_logs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No guard without a config: deny "the guard's config cannot be used (…)", one log line
    (config_error)."""
    missing = str(tmp_path / "nope.json")
    code, streams = run(monkeypatch, tmp_path, ["--config", missing])
    answer = streams.answer()
    assert code == 0
    assert answer["permissionDecision"] == "deny"
    reason = answer["permissionDecisionReason"]
    assert reason.startswith(f"zerto-rewind denied {TOOL}: ")  # its wording: docs/decisions.md
    assert missing in reason
    (line,) = log_lines(tmp_path)
    assert (line["row"], line["decision"], line["tool"]) == ("config_error", "deny", TOOL)
    assert (line["session_id"], line["tool_use_id"], line["reason"]) == (
        "sess-9",
        "toolu_9",
        reason,
    )
    assert 0 <= line["elapsed_ms"] < 10_000
    assert line["vms"] == []


def test_a_config_denial_that_cannot_be_logged_still_denies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = str(tmp_path / "nope.json")
    (tmp_path / "log").mkdir()  # the log path is a directory
    code, streams = run(monkeypatch, tmp_path, ["--config", missing])
    assert (code, streams.answer()["permissionDecision"]) == (0, "deny")
    assert streams.err.getvalue().startswith("zerto-rewind hook: decision not logged: ")


# ---------------------------------------------------------------- the guarded path


def fake_guard(monkeypatch: pytest.MonkeyPatch, decide: Any) -> list[dict[str, Any]]:
    """Replace core.guard.Guard by one whose decide() is ``decide``; record its use."""
    from zerto_rewind.core import guard as guard_module

    seen: list[dict[str, Any]] = []

    class FakeGuard:
        def __init__(self, settings: Any, **kwargs: Any) -> None:
            seen.append({"init": kwargs})

        def decide(self, call: ToolCall, **kwargs: Any) -> Decision:
            seen.append({"call": call})
            return decide(call)  # type: ignore[no-any-return]

        def close(self) -> None:
            seen.append({"closed": True})

    monkeypatch.setattr(guard_module, "Guard", FakeGuard)
    return seen


def test_the_guarded_path_hands_the_call_to_the_guard_and_renders_its_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def decide(call: ToolCall) -> Decision:
        return Decision(
            Row.CONFIRMED, Outcome.CONTEXT, call.tool_name, context="cp 7", vms=("vm-1",)
        )

    seen = fake_guard(monkeypatch, decide)
    config = write_hook_config(tmp_path)
    code, streams = run(monkeypatch, tmp_path, ["--config", config, "--mcp-server", "z"])
    assert code == 0
    assert streams.answer()["additionalContext"] == "cp 7"
    assert seen[0] == {"init": {"rewind_tool": "mcp__z__zerto_recovery_plan"}}
    call = seen[1]["call"]
    assert (call.tool_name, call.tool_input, call.session_id, call.tool_use_id) == (
        TOOL,
        {"name": "vm-1"},
        "sess-9",
        "toolu_9",
    )
    assert seen[2] == {"closed": True}
    (line,) = log_lines(tmp_path)
    assert (line["row"], line["vms"], line["session_id"]) == ("confirmed", ["vm-1"], "sess-9")


def test_a_guard_that_raises_is_closed_and_denies_with_the_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def decide(call: ToolCall) -> Decision:
        raise KeyError("boom")

    seen = fake_guard(monkeypatch, decide)
    code, streams = run(monkeypatch, tmp_path, ["--config", write_hook_config(tmp_path)])
    assert code == 0
    assert seen[-1] == {"closed": True}
    assert streams.answer()["permissionDecisionReason"] == (
        f"zerto-rewind hit an internal error (KeyError: 'boom') while guarding {TOOL}; the call "
        "was not run. Run `zerto-rewind doctor`; retry once fixed."
    )
    assert log_lines(tmp_path)[0]["row"] == "error"


def test_a_bad_vm_arg_pattern_denies_as_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The guarded path validates the catalog's patterns: a broken regex denies, fix the
    config, before any guard exists."""
    seen = fake_guard(monkeypatch, lambda call: pytest.fail("no guard on a broken config"))
    tools = {TOOL: {"vm_arg": {"path": "c", "pattern": "ssh (\\S+"}}}
    config = write_hook_config(tmp_path, tools=tools)
    code, streams = run(monkeypatch, tmp_path, ["--config", config])
    reason = streams.answer()["permissionDecisionReason"]
    assert (code, seen) == (0, [])
    assert f"{config}: tools.{TOOL}.vm_arg.pattern" in reason
    assert log_lines(tmp_path)[0]["row"] == "config_error"


def test_an_unset_secret_denies_a_mutating_call_naming_what_to_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With client_secret_env's variable unset the guard is never asked (whatever token it
    has cached): the call is denied as a config error naming the key and the variable;
    a read-only call is not touched."""
    seen = fake_guard(monkeypatch, lambda call: pytest.fail("no guard without its secret"))
    config = write_hook_config(tmp_path)
    code, streams = run(monkeypatch, tmp_path, ["--config", config], NOPE="")
    reason = streams.answer()["permissionDecisionReason"]
    assert (code, seen) == (0, [])
    assert streams.answer()["permissionDecision"] == "deny"
    assert f"{config}: zvm.client_secret_env" in reason
    assert "NOPE, which is empty or unset" in reason
    assert "`zerto-rewind doctor`" in reason
    assert log_lines(tmp_path)[0]["row"] == "config_error"
    read_only = {**PAYLOAD, "tool_name": "mcp__vsphere__list_vms", "tool_input": {}}
    code, streams = run(monkeypatch, tmp_path, ["--config", config], read_only, NOPE="")
    assert (code, streams.out.getvalue()) == (0, "")


def test_the_watchdog_is_armed_at_the_budget_less_its_margin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    armed: list[float] = []
    monkeypatch.setattr(hook._Answer, "arm_watchdog", lambda self, at: armed.append(at))
    fake_guard(monkeypatch, lambda call: Decision(Row.READ_ONLY, Outcome.NONE, call.tool_name))
    ticks = iter([1000.0, 1000.0, 1000.0])
    monkeypatch.setattr(hook.time, "monotonic", lambda: next(ticks, 1000.0))
    streams = Io(monkeypatch, json.dumps(PAYLOAD).encode())
    env = env_of(tmp_path, ZERTO_HOOK_GUARD_TIMEOUT="12")
    assert hook.main(["--config", write_hook_config(tmp_path)], env) == 0
    assert armed == [pytest.approx(1000.0 + 12.0 - 0.3)]
    assert streams.out.getvalue() == ""
    Io(monkeypatch, json.dumps(PAYLOAD).encode())
    assert hook.main(["--config", write_hook_config(tmp_path)], env, watchdog=False) == 0
    assert len(armed) == 1


# ---------------------------------------------------------------- the watchdog's answer


def test_the_watchdog_denies_naming_the_budget_and_the_zvm_then_exits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from zerto_rewind.config import load_settings

    exits: list[int] = []
    monkeypatch.setattr(hook.os, "_exit", exits.append)
    streams = Io(monkeypatch, b"")
    env = env_of(tmp_path, ZERTO_HOOK_GUARD_TIMEOUT="2.5")
    settings = load_settings(env, path=write_hook_config(tmp_path))
    monkeypatch.setattr(hook.time, "time", lambda: 1000.0)
    call = ToolCall(TOOL, {}, session_id="s", started_at=998.0)
    answer = hook._Answer(settings, call)
    answer._timeout()
    assert exits == [0]
    reason = streams.answer()["permissionDecisionReason"]
    assert reason == (
        f"zerto-rewind could not decide on {TOOL} within its 2.5 s budget (the "
        "ZVM at https://127.0.0.1:9 did not answer in time); the call was not run. An operator "
        "can check the ZVM with `zerto-rewind doctor`, then retry."
    )
    (line,) = log_lines(tmp_path)
    assert (line["row"], line["decision"], line["tool"]) == ("error", "deny", TOOL)
    assert line["elapsed_ms"] == 2000


def test_the_answer_renders_prompts_as_configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """guard.prompt_as reaches the rendering: a prompt becomes a deny when so configured."""
    from zerto_rewind.config import load_settings

    for prompt_as, expected in (("ask", "ask"), ("deny", "deny")):
        streams = Io(monkeypatch, b"")
        config = write_hook_config(tmp_path, guard={"prompt_as": prompt_as})
        settings = load_settings(env_of(tmp_path), path=config)
        answer = hook._Answer(settings, ToolCall(TOOL, {}))
        prompt = Decision(Row.VM_UNKNOWN, Outcome.PROMPT, TOOL, reason="who?")
        assert answer.give(prompt) == 0
        assert streams.answer()["permissionDecision"] == expected
        assert answer.give(prompt) == 0  # a second answer is never written
        assert len(streams.out.getvalue().splitlines()) == 1


def test_an_armed_watchdog_past_its_time_answers_at_once_from_a_daemon_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No answer by the watchdog's time: it denies and exits, promptly, from a daemon thread
    (a stuck guard must never keep the process alive)."""
    import threading
    import time

    from zerto_rewind.config import load_settings

    exits: list[int] = []
    monkeypatch.setattr(hook.os, "_exit", exits.append)
    streams = Io(monkeypatch, b"")
    settings = load_settings(env_of(tmp_path), path=write_hook_config(tmp_path))
    answer = hook._Answer(settings, ToolCall(TOOL, {}, started_at=time.time()))
    started: list[threading.Thread] = []

    class Recorded(threading.Thread):
        def start(self) -> None:
            started.append(self)
            super().start()

    monkeypatch.setattr(threading, "Thread", Recorded)
    answer.arm_watchdog(time.monotonic() - 1.0)
    (watchdog,) = started
    assert (watchdog.name, watchdog.daemon) == ("zerto-rewind-watchdog", True)
    watchdog.join(timeout=0.5)
    assert (watchdog.is_alive(), exits) == (False, [0])
    assert streams.answer()["permissionDecision"] == "deny"
    assert answer.given is True


def test_the_config_denial_logs_its_elapsed_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = iter([1000.0, 1002.5])
    monkeypatch.setattr(hook.time, "time", lambda: next(clock, 1002.5))
    code, _streams = run(monkeypatch, tmp_path, ["--config", str(tmp_path / "nope.json")])
    assert code == 0
    assert log_lines(tmp_path)[0]["elapsed_ms"] == 2500


def test_help_wins_over_what_follows_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, streams = run(monkeypatch, tmp_path, ["--help", "--config", "x"])
    assert (code, streams.out.getvalue()) == (0, hook._USAGE)


def test_without_argv_the_process_arguments_are_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("sys.argv", ["zerto-rewind", "--help"])
    streams = Io(monkeypatch, b"")
    assert hook.main(None, env_of(tmp_path), watchdog=False) == 0
    assert streams.out.getvalue() == hook._USAGE


def test_a_server_name_may_use_every_allowed_character(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    name = "".join(sorted(hook._NAME_CHARS))
    run(monkeypatch, tmp_path, ["--mcp-server", name, "--config", write_hook_config(tmp_path)])
    assert guarded[0]["rewind_tool"] == f"mcp__{name}__zerto_recovery_plan"


def test_the_call_carries_the_hooks_start_time_and_the_guard_its_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The guard gets the settings, and the call the wall time the hook started at (a tag
    that lands after it covers the call)."""
    from zerto_rewind.core import guard as guard_module

    given: list[Any] = []

    class FakeGuard:
        def __init__(self, settings: Any, **kwargs: Any) -> None:
            given.append(settings)

        def decide(self, call: ToolCall, **kwargs: Any) -> Decision:
            given.append(call.started_at)
            return Decision(Row.READ_ONLY, Outcome.NONE, call.tool_name)

        def close(self) -> None:
            pass

    monkeypatch.setattr(guard_module, "Guard", FakeGuard)
    monkeypatch.setattr(hook.time, "time", lambda: 1234.5)
    config = write_hook_config(tmp_path)
    run(monkeypatch, tmp_path, ["--config", config])
    assert given[0].path == config
    assert given[1] == 1234.5


def test_the_guarded_paths_denials_name_the_tool_in_the_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_guard(monkeypatch, lambda call: (_ for _ in ()).throw(KeyError("x")))
    run(monkeypatch, tmp_path, ["--config", write_hook_config(tmp_path)])
    tools = {"t": {"vm_arg": {"path": "c", "pattern": "ssh (\\S+"}}, TOOL: {"vm_arg": "name"}}
    run(monkeypatch, tmp_path, ["--config", write_hook_config(tmp_path, tools=tools)])
    assert [(x["row"], x["tool"]) for x in log_lines(tmp_path)] == [
        ("error", TOOL),
        ("config_error", TOOL),
    ]


def test_the_last_resort_denial_says_what_broke_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("settings loader broke")

    monkeypatch.setattr(hook, "load_settings", broken)
    code, streams = run(monkeypatch, tmp_path, [])
    answer = streams.answer()
    assert (code, answer["permissionDecision"]) == (0, "deny")
    assert answer["permissionDecisionReason"] == (
        "zerto-rewind hook failed unexpectedly (RuntimeError: settings loader broke); the call "
        "was not run. Run `zerto-rewind doctor`, and report this if it persists."
    )


@pytest.mark.parametrize(
    ("tool", "tool_input", "how"),
    [
        ("Write", {"file_path": "CONFIG", "content": "{}"}, "it would write the guard's config"),
        (
            "Bash",
            {"command": "echo {} > CONFIG"},
            "the command names the guard's config (",
        ),
    ],
)
def test_a_write_to_the_guards_own_config_is_denied_and_logged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tool: str, tool_input: dict[str, str], how: str
) -> None:
    """In-process view of the self-protection path (tests/unit/claude_code/test_protect.py
    has the path rules): deny, say what it would write, log row protected with the tool."""
    config = write_hook_config(tmp_path)
    tool_input = {k: v.replace("CONFIG", config) for k, v in tool_input.items()}
    payload = {**PAYLOAD, "tool_name": tool, "tool_input": tool_input}
    clock = iter([1000.0, 1000.75])
    monkeypatch.setattr(hook.time, "time", lambda: next(clock, 1000.75))
    code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    answer = streams.answer()
    assert (code, answer["permissionDecision"]) == (0, "deny")
    reason = answer["permissionDecisionReason"]
    assert reason.startswith(f"zerto-rewind denied {tool}: {how}")
    assert config in reason
    assert "the call was not run" in reason
    (line,) = log_lines(tmp_path)
    assert (line["row"], line["decision"], line["tool"], line["session_id"]) == (
        "protected",
        "deny",
        tool,
        "sess-9",
    )
    assert (line["tool_use_id"], line["elapsed_ms"]) == ("toolu_9", 750)


# ---------------------------------------------------------------- pinning, self-protection


def test_a_pinned_config_that_changed_is_denied_as_possible_tampering(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    import hashlib

    config = write_hook_config(tmp_path)
    good = hashlib.sha256(Path(config).read_bytes()).hexdigest()
    code, streams = run(monkeypatch, tmp_path, ["--config", config, "--config-sha256", good])
    assert (code, streams.out.getvalue(), len(guarded)) == (0, "", 1)
    code, streams = run(monkeypatch, tmp_path, ["--config", config, "--config-sha256", "0" * 64])
    reason = streams.answer()["permissionDecisionReason"]
    assert reason.startswith(
        f"zerto-rewind denied {TOOL}: the guard's config {config} changed since the guard was "
        "installed ("
    )
    assert "treat it as tampering." in reason
    assert (len(guarded), log_lines(tmp_path)[-1]["row"]) == (1, "config_error")


def test_an_unlisted_host_tool_is_only_checked_for_the_guards_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    """Bash reaches the hook to be checked for writes to the guard's files: a harmless
    command passes silently, unless --all-tools says the hook guards every tool."""
    config = write_hook_config(tmp_path)
    payload = {**PAYLOAD, "tool_name": "Bash", "tool_input": {"command": "ls -la"}}
    code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    assert (code, streams.out.getvalue(), guarded) == (0, "", [])
    code, streams = run(monkeypatch, tmp_path, ["--all-tools", "--config", config], payload)
    assert (code, [g["tool"] for g in guarded]) == (0, ["Bash"])
    assert guarded[0]["settings"].path == config


def test_all_tools_is_a_flag_not_an_option_with_a_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, streams = run(monkeypatch, tmp_path, ["--all-tools", "--bogus", "x"])
    assert code == 2
    assert "unexpected arguments ['--bogus', 'x']" in streams.err.getvalue()


def test_the_hosts_settings_file_named_on_the_command_line_is_protected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = write_hook_config(tmp_path)
    settings_file = tmp_path / "project" / "hooks.json"
    settings_file.parent.mkdir()
    payload = {
        **PAYLOAD,
        "tool_name": "Write",
        "tool_input": {"file_path": str(settings_file), "content": "{}"},
    }
    argv = ["--config", config, "--settings", str(settings_file)]
    code, streams = run(monkeypatch, tmp_path, argv, payload)
    reason = streams.answer()["permissionDecisionReason"]
    assert (code, streams.answer()["permissionDecision"]) == (0, "deny")
    assert str(settings_file) in reason
    code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    assert (code, streams.out.getvalue()) == (0, "")  # not named: an ordinary file


def hook_input(tool: str, tool_input: Any) -> Any:
    from zerto_rewind.hooks import claude_code as host

    return host.parse_input(
        json.dumps({**PAYLOAD, "tool_name": tool, "tool_input": tool_input}).encode()
    )


@pytest.mark.parametrize(
    ("tool", "tool_input", "settings_file", "may"),
    [
        ("Write", {"file_path": "x"}, None, True),  # every file tool is looked at
        ("Bash", {"command": "ls -la"}, None, False),  # no "/" and no name of ours: spared
        ("Bash", {"command": "cat /etc/hosts"}, None, True),  # a path: looked at
        ("Bash", {}, None, True),  # odd input: looked at
        ("Bash", {"command": 3}, None, True),
        ("Bash", {"command": "vi settings.json"}, None, True),  # a host settings name
        ("Bash", {"command": "vi config.json"}, None, True),  # the config's own name
        ("Bash", {"command": "rm log"}, None, True),  # the decision log's name
        ("Bash", {"command": "vi hooks.json"}, "/p/.claude/hooks.json", True),
        ("Bash", {"command": "vi hooks.json"}, None, False),
        ("Bash", {"command": "vi notes.txt"}, "/p/.claude/hooks.json", False),
    ],
)
def test_which_calls_may_name_the_guards_files(
    tmp_path: Path, tool: str, tool_input: Any, settings_file: str | None, may: bool
) -> None:
    from zerto_rewind.config import load_settings

    settings = load_settings(env_of(tmp_path), path=write_hook_config(tmp_path))
    payload = hook_input(tool, tool_input)
    assert hook._may_name_own_files(payload, settings, settings_file) is may


def test_a_relative_path_is_resolved_from_the_calls_folder_or_the_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = write_hook_config(tmp_path)
    write = {"file_path": "config.json", "content": "{}"}
    with_cwd = {**PAYLOAD, "tool_name": "Write", "tool_input": write, "cwd": str(tmp_path)}
    _code, streams = run(monkeypatch, tmp_path, ["--config", config], with_cwd)
    assert streams.answer()["permissionDecision"] == "deny"
    (tmp_path / "x").mkdir()
    without = {**PAYLOAD, "tool_name": "Write", "tool_input": write, "cwd": str(tmp_path / "x")}
    _code, streams = run(monkeypatch, tmp_path, ["--config", config], without)
    assert "guard's own files" not in streams.out.getvalue()  # another folder: another file
    del without["cwd"]
    _code, streams = run(
        monkeypatch, tmp_path, ["--config", config], without, CLAUDE_PROJECT_DIR=str(tmp_path)
    )
    assert streams.answer()["permissionDecision"] == "deny"


def test_a_shell_path_under_home_is_resolved_with_the_hooks_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = write_hook_config(tmp_path)
    payload = {**PAYLOAD, "tool_name": "Bash", "tool_input": {"command": "echo {} > ~/config.json"}}
    _code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    answer = streams.answer()
    assert answer["permissionDecision"] == "deny"
    assert answer["permissionDecisionReason"].endswith(
        "The guard does not let the agent session it watches change the guard's own files, so "
        "the call was not run. If the change is wanted, a person makes it outside the agent "
        "session."
    )


def test_self_protection_can_be_switched_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = write_hook_config(tmp_path, guard={"protect_self": False})
    payload = {**PAYLOAD, "tool_name": "Write", "tool_input": {"file_path": config}}
    code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    answer = streams.answer()  # an ordinary unlisted tool: the catalog's rule (prompt)
    assert (code, answer["permissionDecision"]) == (0, "ask")
    assert "guard's own files" not in answer["permissionDecisionReason"]


# ---------------------------------------------------------------- words and odd corners


def test_config_denial_reasons_word_for_word() -> None:
    """What the human who approves reads: a changed (pinned) config, or a broken one."""
    from zerto_rewind.config.loader import ConfigChanged
    from zerto_rewind.errors import ConfigError

    changed = ConfigChanged("its SHA-256 no longer matches", path="/etc/zr.json")
    assert config_denial_reason("T", changed) == (
        "zerto-rewind denied T: the guard's config /etc/zr.json changed since the guard was "
        "installed (its SHA-256 no longer matches), so the guard does not trust it and blocks "
        "every call it watches; the call was not run. If the change was intended, whoever "
        "administers the guard accepts it by running `zerto-rewind install claude-code …` "
        "again and starting a new session; if nobody meant to change it, treat it as tampering."
    )
    broken = ConfigError("not a number; fix it", path="/etc/zr.json", key="guard.timeout_s")
    assert config_denial_reason("T", broken) == (
        "zerto-rewind denied T: the guard's config cannot be used (/etc/zr.json: "
        "guard.timeout_s: not a number), so the guard blocks every call it watches; the call "
        "was not run. An operator can see the problem with `zerto-rewind doctor`."
    )


def test_run_exits_with_mains_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook, "main", lambda: 2)
    with pytest.raises(SystemExit) as info:
        hook.run()
    assert info.value.code == 2


def test_without_env_the_process_environment_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    for key, value in env_of(tmp_path).items():
        monkeypatch.setenv(key, value)
    config = write_hook_config(tmp_path)
    Io(monkeypatch, json.dumps(PAYLOAD).encode())
    assert hook.main(["--config", config], None, watchdog=False) == 0
    assert guarded[0]["settings"].path == config


def test_every_option_at_once_is_accepted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, guarded: list[dict[str, Any]]
) -> None:
    import hashlib

    config = write_hook_config(tmp_path)
    pin = hashlib.sha256(Path(config).read_bytes()).hexdigest()
    argv = ["--config", config, "--config-sha256", pin, "--mcp-server", "z"]
    argv += ["--settings", str(tmp_path / "s.json")]
    code, _streams = run(monkeypatch, tmp_path, argv)
    assert (code, guarded[0]["rewind_tool"]) == (0, "mcp__z__zerto_recovery_plan")


def test_the_guarded_paths_config_denial_is_the_configs_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tools = {TOOL: {"vm_arg": {"path": "c", "pattern": "ssh (\\S+"}}}
    config = write_hook_config(tmp_path, tools=tools)
    _code, streams = run(monkeypatch, tmp_path, ["--config", config])
    answer = streams.answer()
    assert answer["permissionDecision"] == "deny"
    assert answer["permissionDecisionReason"].startswith(
        f"zerto-rewind denied {TOOL}: the guard's config cannot be used ({config}: "
    )


def test_a_protected_write_logs_its_reason_and_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = write_hook_config(tmp_path)
    payload = {**PAYLOAD, "tool_name": "Write", "tool_input": {"file_path": config}}
    clock = iter([1000.0, 1002.5])
    monkeypatch.setattr(hook.time, "time", lambda: next(clock, 1002.5))
    _code, streams = run(monkeypatch, tmp_path, ["--config", config], payload)
    (line,) = log_lines(tmp_path)
    assert line["reason"] == streams.answer()["permissionDecisionReason"]
    assert line["elapsed_ms"] == 2500


def test_a_shell_write_to_the_settings_file_by_its_bare_name_is_denied(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`echo … > hooks.json` has no "/": only the --settings file's own name tells the hook
    to look closer, and the look finds the write."""
    config = write_hook_config(tmp_path)
    settings_file = tmp_path / "p" / ".claude" / "hooks.json"
    payload = {**PAYLOAD, "tool_name": "Bash", "tool_input": {"command": "echo x > hooks.json"}}
    argv = ["--config", config, "--settings", str(settings_file)]
    _code, streams = run(monkeypatch, tmp_path, argv, payload)
    assert streams.answer()["permissionDecision"] == "deny"
