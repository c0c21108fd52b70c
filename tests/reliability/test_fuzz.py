"""Property-based fuzzing of the hook's stdin and of config files: never a traceback, never open.

In-process properties run a bounded, derandomized example count; the
subprocess ones (the hook exactly as a host runs it) run far fewer.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability.reliability_helpers import POWER_OFF, READ_ONLY_TOOL, UNLISTED_TOOL, Bench
from support.config import write_config
from zerto_rewind.config import Settings, load_settings, validate_patterns
from zerto_rewind.core.catalog import READ_ONLY, UNLISTED, classify
from zerto_rewind.errors import ConfigError
from zerto_rewind.hooks import standalone as hook
from zerto_rewind.hooks.claude_code import HookInputError, parse_input
from zerto_rewind.hooks.protect import SELF_TOOLS
from zerto_rewind.testing import DEMO_CATALOG

IN_PROCESS = settings(max_examples=150, derandomize=True, deadline=None)
SUBPROCESS = settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ODD_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]) | st.sampled_from("\u202e\u200b\ufeff\x00é𝔘"),
    max_size=40,
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ODD_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ODD_TEXT, inner, max_size=4),
    max_leaves=25,
)
TOOLS = st.sampled_from(
    [POWER_OFF, READ_ONLY_TOOL, UNLISTED_TOOL, "mcp__vsphere__snapshot_vms",
     "mcp__vsphere__run_command", "mcp__vsphere__reconfigure_vm", "Bash", ""]
) | ODD_TEXT  # fmt: skip


def _payload(tool: Any, tool_input: Any, extra: dict[str, Any]) -> bytes:
    body = {"hook_event_name": "PreToolUse", "session_id": "fuzz", **extra}
    body.update(tool_name=tool, tool_input=tool_input)
    return json.dumps(body).encode()


STDIN = st.one_of(
    st.binary(max_size=300),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.builds(_payload, TOOLS, JSON_VALUES, st.dictionaries(ODD_TEXT, JSON_VALUES, max_size=3)),
    st.builds(_payload, TOOLS, st.dictionaries(ODD_TEXT, JSON_VALUES, max_size=5), st.just({})),
    st.integers(1, 3000).map(
        lambda n: (
            b'{"tool_name":"'
            + POWER_OFF.encode()
            + b'","tool_input":'
            + b'{"a":' * n
            + b"1"
            + b"}" * n
            + b"}"
        )
    ),
    st.integers(1, 3000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.integers(1, 4).map(lambda k: _payload(POWER_OFF, {"name": "x" * k * 700_000}, {})),
)


@pytest.fixture(scope="module")
def fuzz_settings(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Settings]:
    """A valid config file (the demo catalog, a ZVM that is never reached) and its settings."""
    path = tmp_path_factory.mktemp("fuzz") / "config.json"
    _write(path, {"zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret": "s"},
                  **DEMO_CATALOG})  # fmt: skip
    return str(path), load_settings({"ZERTO_REWIND_CONFIG": str(path)})


def _write(path: Path, data: Any) -> None:
    write_config(path.parent, data, name=path.name)


@contextlib.contextmanager
def _stdio(data: bytes) -> Iterator[io.StringIO]:
    stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        yield sys.stdout
    finally:
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr


@IN_PROCESS
@given(data=STDIN)
def test_stdin_parses_or_is_refused_with_a_reason(data: bytes) -> None:
    """Any stdin either parses into a call or raises HookInputError — nothing else."""
    try:
        payload = parse_input(data)
    except HookInputError as exc:
        message = str(exc)
    else:
        message = payload.tool_name.strip()
    assert message, "a refusal says why; a call has a tool name"


@IN_PROCESS
@given(data=STDIN)
def test_hook_main_never_passes_a_non_read_only_call_silently(
    fuzz_settings: tuple[str, Settings], data: bytes
) -> None:
    """hook.main on any stdin, with the real guard (its ZVM unreachable): blocked (exit 2),
    read-only silence, or the guard's own deny/ask with a reason — never allowed."""
    config, loaded = fuzz_settings
    scratch = Path(config).parent
    env = {
        "ZERTO_HOOK_LOG": str(scratch / "decisions.log"),
        "ZERTO_REWIND_STATE_DIR": str(scratch / "state"),
        "HOME": str(scratch),
    }
    with _stdio(data) as out:
        # In-process: no watchdog, it would end pytest; the ZVM refuses at once anyway.
        code = hook.main(["--config", config], env=env, watchdog=False)
    if code == 2:
        return
    assert code == 0
    text = out.getvalue()
    if not text:
        payload = parse_input(data)
        verdict = classify(payload.tool_name, payload.tool_input, loaded.catalog)
        # ... or for Claude Code's file and shell tools that the catalog does not list: with
        # guard.protect_self they reach the hook only to be checked for writes to the guard's
        # own files (hook.main without --all-tools), and none of these calls names one.
        own = (
            payload.tool_name in SELF_TOOLS
            and loaded.guard.protect_self
            and verdict.kind == UNLISTED
        )
        assert verdict.kind == READ_ONLY or own, "a silent exit 0 is only for read-only calls"
        return
    answer = json.loads(text)["hookSpecificOutput"]
    assert answer["permissionDecision"] in ("deny", "ask"), answer
    assert answer["permissionDecisionReason"].strip()


VALID_CONFIG: dict[str, Any] = {
    "zvm": {"url": "https://zvm.example:443", "client_id": "c", "client_secret_env": "SECRET"},
    **DEMO_CATALOG,
    "guard": {"timeout_s": 30},
}
CONFIG_KEYS = st.sampled_from(
    ["zvm", "read_only_tools", "tools", "vm_map", "guard", "unknown_tools", "state_dir", "log"]
)


def _mutate(base: dict[str, Any], key: str, value: Any, inner: str | None) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(json.dumps(base))
    if inner is not None and isinstance(config.get(key), dict):
        config[key][inner] = value
    else:
        config[key] = value
    return config


CONFIGS = st.one_of(
    st.binary(max_size=200),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.builds(_mutate, st.just(VALID_CONFIG), CONFIG_KEYS, JSON_VALUES, st.none() | ODD_TEXT
              | st.sampled_from(["url", "timeout_s", "ca_bundle", "mcp__vsphere__power_off_vm",
                                 "on_pending", "cadence_s", "vm_cache_ttl_s"])),
)  # fmt: skip


@IN_PROCESS
@given(content=CONFIGS)
def test_config_loads_or_raises_config_error(tmp_path_factory: pytest.TempPathFactory,
                                            content: Any) -> None:  # fmt: skip
    """Any config file content yields Settings or a ConfigError, never another exception."""
    path = tmp_path_factory.mktemp("cfg", numbered=True) / "config.json"
    _write(path, content)
    problem: str | None = None
    try:
        loaded = load_settings({"ZERTO_REWIND_CONFIG": str(path), "SECRET": "x"})
        validate_patterns(loaded)
    except ConfigError as exc:
        problem = str(exc)
    if problem is not None:
        assert str(path) in problem, "a ConfigError names the file and what is wrong"
    else:
        assert loaded.zvm.url, "a loaded config knows its ZVM"
        assert loaded.guard.timeout_s > 0


@SUBPROCESS
@given(data=STDIN)
def test_hook_process_on_fuzzed_stdin_fails_closed(bench: Bench, data: bytes) -> None:
    """The real hook process on fuzzed stdin: no traceback; only read-only calls exit silently."""
    run = bench.box.run_hook("unused", None, stdin=data, env=bench.env(), timeout_s=60)
    assert "Traceback" not in run.stderr
    assert run.elapsed_s < 7.0
    if run.returncode == 2:
        assert "blocked" in run.stderr
        return
    assert run.returncode == 0
    if run.decision == "none":
        payload = parse_input(data)
        tool = payload.tool_name
        assert (
            tool == READ_ONLY_TOOL
            or tool.startswith("mcp__vsphere__get_")
            or (tool == "mcp__vsphere__list_vms")
        )
    else:
        assert run.decision in ("deny", "ask", "context")
        assert run.reason


MUTATIONS = st.none() | st.tuples(
    CONFIG_KEYS,
    JSON_VALUES,
    st.none() | ODD_TEXT | st.sampled_from(["url", "timeout_s", "ca_bundle", "on_pending"]),
)


@SUBPROCESS
@given(mutation=MUTATIONS, tool=st.sampled_from([POWER_OFF, UNLISTED_TOOL, READ_ONLY_TOOL]))
def test_hook_process_with_a_fuzzed_live_config_allows_only_on_a_landed_tag(
    bench: Bench, mutation: tuple[str, Any, str | None] | None, tool: str
) -> None:
    """The sandbox's working config (a live simulator), one key fuzzed: a mutating call is
    allowed only with a landed, logged checkpoint; anything else is a deny or ask that says why."""
    config = bench.box.config()
    content = config if mutation is None else _mutate(config, *mutation)
    path = bench.root / "fuzzed-live-config.json"
    _write(path, content)
    run = bench.hook(tool, {"name": "jp-ubuntu"}, env=bench.env(ZERTO_REWIND_CONFIG=str(path)))
    assert "Traceback" not in run.stderr
    if tool == READ_ONLY_TOOL:
        assert run.decision in ("none", "deny"), run.stdout
        return
    assert run.decision in ("deny", "ask", "context"), run.stdout
    if run.decision == "context":
        assert tool == POWER_OFF
        with open(bench.log_path, encoding="utf-8") as fh:
            record = json.loads(fh.read().splitlines()[-1])
        assert (record["row"], bool(record["checkpoint_ids"])) == ("confirmed", True)
    else:
        assert run.reason


@SUBPROCESS
@given(content=CONFIGS, tool=st.sampled_from([POWER_OFF, UNLISTED_TOOL, READ_ONLY_TOOL]))
def test_hook_process_with_a_fuzzed_config_never_passes_a_mutating_call(
    bench: Bench, content: Any, tool: str
) -> None:
    """A broken config denies every call; a loadable one still never fails open."""
    path = bench.root / "fuzzed-config.json"
    _write(path, content)
    env = bench.env(ZERTO_REWIND_CONFIG=str(path), SECRET="x")
    run = bench.box.run_hook(tool, {"name": "jp-ubuntu"}, env=env, timeout_s=60)
    assert "Traceback" not in run.stderr
    assert run.elapsed_s < 7.0
    if tool != READ_ONLY_TOOL:
        assert run.decision in ("deny", "ask"), run.stdout
        assert run.reason
    else:  # a fuzzed config may no longer list it as read-only: unlisted, so "ask"
        assert run.decision in ("none", "deny", "ask"), run.stdout
