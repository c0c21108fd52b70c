"""The hook's read-only fast path stays light: no json, re, httpx before a call is mutating."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("json", "re", "typing", "dataclasses", "httpx", "enum", "pathlib")
# Project modules kept off the read-only path: the whole hook command and every module of
# hostconfig, its package included (the path reads its options with the base module
# hook_flags alone), and the hooks' shared protocol bits as a module of their own (they
# live in the package's). A secret is read only on the mutating path: its file reader
# stays off the path too.
OFF_THE_PATH = (
    "zerto_rewind.hostconfig",
    "zerto_rewind.hostconfig.hook_command",
    "zerto_rewind.hooks.protocol",
    "zerto_rewind.config.secret_file",
)
READ_ONLY_CALL = {
    "session_id": "0f3c9a1e-77aa-4bd0-9d8e-123456789abc",
    "transcript_path": "/tmp/t.jsonl",
    "cwd": "/work",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "mcp__vsphere__list_vms",
    "tool_input": {"filter": "web*", "limit": 50},
    "tool_use_id": "toolu_01",
}


@pytest.fixture
def hook_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment for a hook child: its own HOME, log and state, no ZERTO_* leaks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
    env.update(
        HOME=str(tmp_path / "home"),
        ZERTO_HOOK_LOG=str(tmp_path / "decisions.log"),
        ZERTO_REWIND_STATE_DIR=str(tmp_path / "state"),
        ZVM_SECRET="unused",
    )
    return env


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    """A valid config with a dummy ZVM, read-only names and patterns, and mutating tools."""
    config = {
        "zvm": {
            "url": "https://127.0.0.1:9",
            "client_id": "zerto-rewind",
            "client_secret_env": "ZVM_SECRET",
        },
        "read_only_tools": ["mcp__vsphere__list_vms", "mcp__vsphere__get_*", "Read"],
        "tools": {
            "mcp__vsphere__power_off": {"vm_arg": "name"},
            "mcp__ssh__exec": {"vm_arg": {"path": "command", "pattern": r"ssh (?P<vm>\S+)"}},
        },
        "vm_map": {"strip_domain": True},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return str(path)


def imported_modules(importtime_stderr: str) -> set[str]:
    """Module names from `-X importtime` output (the last column of each line)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def silent_run_modules(
    argv: list[str], payload: bytes, env: dict[str, str], cwd: Path | None = None
) -> set[str]:
    """Run a hook command (``argv[0]`` the interpreter) under ``-X importtime``: it must exit
    0 and print nothing; the modules it imported."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        input=payload,
        capture_output=True,
        env=env,
        timeout=60,
        cwd=cwd,
    )
    stderr = proc.stderr.decode()
    assert (proc.returncode, proc.stdout) == (0, b""), stderr
    return imported_modules(stderr)


def test_hook_modules_import_nothing_heavy() -> None:
    """Importing hook, config, catalog and the Claude Code adapter loads no heavy module."""
    code = (
        "import sys; from zerto_rewind.hooks import standalone, claude_code; "
        "from zerto_rewind import config; from zerto_rewind.core import catalog; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("tool", ["mcp__vsphere__list_vms", "mcp__vsphere__get_vm", "Read"])
def test_read_only_hook_call_is_silent_and_light(
    tool: str, config_file: str, hook_env: dict[str, str]
) -> None:
    """A read-only call (exact or glob) exits 0, prints nothing, and never imports json/re/httpx."""
    payload = json.dumps({**READ_ONLY_CALL, "tool_name": tool}).encode()
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "zerto_rewind", "hook", "--config", config_file],
        input=payload,
        capture_output=True,
        env=hook_env,
        timeout=60,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    assert proc.stdout == b""
    modules = imported_modules(stderr)
    # The CLI loads the hook with importlib (not logged by -X importtime); the hook's
    # own import statements are, which shows the instrumentation covers its path.
    assert {"zerto_rewind.core.catalog", "zerto_rewind.hooks.claude_code"} <= modules
    assert modules.isdisjoint({"json", "re", "httpx"}), sorted(modules & {"json", "re", "httpx"})
    assert not any(m.startswith(("json.", "httpx.", "mcp")) for m in modules)
    assert modules.isdisjoint(OFF_THE_PATH), sorted(modules & set(OFF_THE_PATH))
    assert not os.path.exists(hook_env["ZERTO_HOOK_LOG"])  # read-only calls are not logged


def test_read_only_via_console_script_and_env(config_file: str, hook_env: dict[str, str]) -> None:
    """The installed `zerto-rewind hook`, configured by ZERTO_REWIND_CONFIG, also stays silent."""
    script = Path(sys.executable).with_name("zerto-rewind")
    if not script.exists():
        pytest.skip("the zerto-rewind console script is not installed next to the interpreter")
    proc = subprocess.run(
        [str(script), "hook"],
        input=json.dumps(READ_ONLY_CALL).encode(),
        capture_output=True,
        env={**hook_env, "ZERTO_REWIND_CONFIG": config_file},
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


@pytest.mark.parametrize("pattern", [r"ssh (\S+", r"ssh (\S+)"])
def test_bad_vm_arg_pattern_denies_instead_of_crashing(
    pattern: str, tmp_path: Path, hook_env: dict[str, str]
) -> None:
    """A mutating call whose vm_arg pattern is invalid or lacks (?P<vm>) is denied with exit 0."""
    config = {
        "zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "ZVM_SECRET"},
        "tools": {"mcp__ssh__exec": {"vm_arg": {"path": "command", "pattern": pattern}}},
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    call = {"tool_name": "mcp__ssh__exec", "tool_input": {"command": "ssh web01 reboot"}}
    proc = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "hook", "--config", str(path)],
        input=json.dumps(call).encode(),
        capture_output=True,
        env=hook_env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-300:]
    decision = json.loads(proc.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "tools.mcp__ssh__exec.vm_arg.pattern" in decision["permissionDecisionReason"]


@pytest.mark.parametrize(("command", "scanned"), [("ls -la", False), ("ls -la /tmp", True)])
def test_a_harmless_bash_call_under_protect_self_is_silent_and_light(
    config_file: str, hook_env: dict[str, str], tmp_path: Path, command: str, scanned: bool
) -> None:
    """protect_self sends every Bash call to the hook (pinned, as install writes it): one that
    names none of the guard's files exits 0, prints nothing, loads nothing heavy."""
    from zerto_rewind.config.loader import file_sha256

    payload = json.dumps(
        {**READ_ONLY_CALL, "tool_name": "Bash", "tool_input": {"command": command}}
    ).encode()
    pin = file_sha256(config_file)
    settings = str(tmp_path / "project" / ".claude" / "settings.json")
    launch = "from zerto_rewind.hooks.standalone import run; run()"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", launch, "hook", "--config", config_file,
         "--config-sha256", pin, "--settings", settings],
        input=payload,
        capture_output=True,
        env=hook_env,
        timeout=60,
    )  # fmt: skip
    stderr = proc.stderr.decode()
    assert (proc.returncode, proc.stdout) == (0, b""), stderr
    modules = imported_modules(stderr)
    # a command with no "/" and none of the guard's file names never loads the scan
    assert ("zerto_rewind.hooks.protect" in modules) == scanned
    assert modules.isdisjoint({"json", "re", "httpx", "hashlib"}), sorted(
        modules & {"json", "re", "httpx", "hashlib"}
    )
    assert not os.path.exists(hook_env["ZERTO_HOOK_LOG"])


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure"])
def test_a_read_only_post_event_is_as_light_as_its_pre_event(
    event: str, config_file: str, hook_env: dict[str, str]
) -> None:
    """After a read-only call: exit 0, silent, nothing logged, nothing heavy imported."""
    payload = json.dumps(
        {**READ_ONLY_CALL, "hook_event_name": event, "tool_response": {"content": []}}
    ).encode()
    launch = "from zerto_rewind.hooks.standalone import run; run()"
    argv = [sys.executable, "-c", launch, "hook", "--config", config_file]
    modules = silent_run_modules(argv, payload, hook_env)
    assert "zerto_rewind.core.catalog" in modules
    assert modules.isdisjoint({"json", "re", "httpx", "hashlib"}), sorted(
        modules & {"json", "re", "httpx", "hashlib"}
    )
    assert not any(m.startswith(("json.", "httpx.", "mcp", "zerto_rewind.hooks.post"))
                   for m in modules)  # fmt: skip
    assert not os.path.exists(hook_env["ZERTO_HOOK_LOG"])


@pytest.mark.parametrize("tool", ["mcp__vsphere__list_vms", "Bash"])
def test_the_installed_command_loads_no_module_it_can_do_without(
    tool: str, config_file: str, hook_env: dict[str, str], tmp_path: Path
) -> None:
    """The command install writes (``python -S -P -c …``), for a read-only call and a
    harmless Bash call: silent; of the hooks it loads the package module and the runner's
    own only, and nothing of hostconfig (the options' reader is the base module
    hook_flags). Each module more costs start-up (docs/performance.md)."""
    import shlex

    from zerto_rewind.config.loader import file_sha256
    from zerto_rewind.hostconfig.install.settings_file import hook_command

    settings = str(tmp_path / "project" / ".claude" / "settings.json")
    command = hook_command(
        sys.executable, config_file, config_sha256=file_sha256(config_file), settings=settings
    )
    call = {**READ_ONLY_CALL, "tool_name": tool}
    if tool == "Bash":
        call["tool_input"] = {"command": "ls -la"}
    modules = silent_run_modules(shlex.split(command), json.dumps(call).encode(), hook_env)
    assert {"zerto_rewind.hook_flags", "zerto_rewind.hooks.standalone"} <= modules
    assert modules.isdisjoint(OFF_THE_PATH), sorted(modules & set(OFF_THE_PATH))
    ours = sorted(
        m for m in modules if m.startswith(("zerto_rewind.hostconfig", "zerto_rewind.hooks."))
    )
    assert ours == ["zerto_rewind.hooks.claude_code", "zerto_rewind.hooks.standalone"]
    assert modules.isdisjoint({*HEAVY, "shlex", "inspect", "hashlib"}), sorted(
        modules & {*HEAVY, "shlex", "inspect", "hashlib"}
    )
    assert not os.path.exists(hook_env["ZERTO_HOOK_LOG"])


def test_the_installed_command_runs_nothing_from_the_working_directory(
    config_file: str, hook_env: dict[str, str], tmp_path: Path
) -> None:
    """The host runs the hook in the agent's working directory, which the agent can write:
    a ``__future__.py``, ``_json.py`` or ``zerto_rewind/`` there is never imported (``-P``),
    so it cannot answer in the guard's place."""
    import shlex

    from zerto_rewind.config.loader import file_sha256
    from zerto_rewind.hostconfig.install.settings_file import hook_command

    planted = tmp_path / "project"
    (planted / "zerto_rewind").mkdir(parents=True)
    marker = tmp_path / "ran.txt"
    body = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("__future__.py", "_json.py", "zerto_rewind/__init__.py"):
        (planted / name).write_text(body)
    command = hook_command(sys.executable, config_file, config_sha256=file_sha256(config_file))
    modules = silent_run_modules(
        shlex.split(command), json.dumps(READ_ONLY_CALL).encode(), hook_env, cwd=planted
    )
    assert "zerto_rewind.hooks.standalone" in modules
    assert not marker.exists(), marker.read_text()
