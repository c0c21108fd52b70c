"""Run the real Claude Code CLI headless against the scripted API and the stand-in VM server.

Pieces (see README.md beside this file):

- ``claude_path()`` – the pinned CLI in ``tests/e2e/node_modules``; raises ``ClaudeMissing``
  (tests FAIL, never skip) with the install command when it is not there.
- ``make_home(home, project_dir)`` – a throwaway ``HOME`` with a ``.claude.json`` that skips
  onboarding, trust and API-key questions.
- ``mcp_config(path, actions_log=…, sim_url=…, sim_ca=…)`` – an MCP config that starts
  ``vm_mcp_server.py`` (server ``vsphere``) with ``sys.executable``; its ``env`` block carries
  the ``E2E_*`` variables, because Claude Code starts stdio servers with that block.
- ``hook_settings(...)`` / ``write_json(...)`` – a settings file with a PreToolUse command hook,
  for throwaway hooks (real tests take the file ``zerto-rewind install claude-code`` writes).
- ``claude_env(api_url, home)`` and ``run_claude(prompt, …) -> ClaudeRun`` – one ``claude -p``
  run with a clean environment and a timeout, its JSON result parsed.
- ``read_actions(actions_log)`` – what reached the VM server.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

E2E_DIR = Path(__file__).resolve().parent
CLAUDE_BIN = E2E_DIR / "node_modules" / ".bin" / "claude"
CLAUDE_VERSION = "2.1.328"
INSPECTOR_BIN = E2E_DIR / "node_modules" / ".bin" / "mcp-inspector"
VM_SERVER = E2E_DIR / "vm_mcp_server.py"
VM_SERVER_NAME = "vsphere"
INSTALL_COMMAND = f"cd {E2E_DIR} && npm ci"
DEFAULT_TIMEOUT = 60.0

__all__ = [
    "CLAUDE_BIN",
    "CLAUDE_VERSION",
    "DEFAULT_TIMEOUT",
    "E2E_DIR",
    "INSPECTOR_BIN",
    "INSTALL_COMMAND",
    "VM_SERVER",
    "VM_SERVER_NAME",
    "ClaudeMissing",
    "ClaudeRun",
    "E2ESession",
    "claude_env",
    "claude_path",
    "hook_settings",
    "make_home",
    "mcp_config",
    "mcp_tool",
    "parse_events",
    "read_actions",
    "run_claude",
    "write_json",
    "write_plugin",
]


class ClaudeMissing(RuntimeError):
    """The pinned Claude Code CLI is not installed (or does not run)."""


def claude_path(path: Path = CLAUDE_BIN, *, check_version: bool = True) -> Path:
    """The pinned ``claude`` binary, checked to run offline; a loud error if it cannot."""
    if not path.exists():
        raise ClaudeMissing(
            f"Claude Code CLI not found at {path}. The e2e tests need the pinned "
            f"@anthropic-ai/claude-code@{CLAUDE_VERSION}; install it with:\n\n"
            f"    {INSTALL_COMMAND}\n"
        )
    if check_version:
        try:
            out = subprocess.run(
                [str(path), "--version"],
                capture_output=True,
                text=True,
                timeout=30,
                env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")},
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClaudeMissing(
                f"{path} does not run ({exc}); reinstall with:\n\n    {INSTALL_COMMAND}\n"
            ) from exc
        if out.returncode != 0 or CLAUDE_VERSION not in out.stdout:
            raise ClaudeMissing(
                f"{path} --version gave exit {out.returncode}, stdout {out.stdout!r}, "
                f"stderr {out.stderr[-500:]!r}; expected {CLAUDE_VERSION}. Reinstall with:\n\n"
                f"    {INSTALL_COMMAND}\n"
            )
    return path


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def make_home(home: Path, project_dir: Path | None = None, api_key: str = "x") -> Path:
    """A throwaway HOME whose ``.claude.json`` answers every first-run question."""
    home.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {
        "hasCompletedOnboarding": True,
        "bypassPermissionsModeAccepted": True,
        # The interactive "use this API key?" question stores the key's last 20 characters.
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
        "projects": {},
    }
    if project_dir is not None:
        state["projects"][str(project_dir)] = {
            "hasTrustDialogAccepted": True,
            "hasCompletedProjectOnboarding": True,
        }
    write_json(home / ".claude.json", state)
    return home


def mcp_tool(tool: str, server: str = VM_SERVER_NAME) -> str:
    """``mcp__vsphere__power_off_vm`` from ``power_off_vm``."""
    return f"mcp__{server}__{tool}"


def mcp_config(
    path: Path,
    *,
    actions_log: Path,
    sim_url: str | None = None,
    sim_ca: Path | str | None = None,
    server_name: str = VM_SERVER_NAME,
    extra_env: Mapping[str, str] | None = None,
) -> Path:
    """Write an MCP config that starts the stand-in VM server; returns ``path``."""
    env = {"E2E_VM_ACTIONS_LOG": str(actions_log), "PYTHONDONTWRITEBYTECODE": "1"}
    if sim_url:
        env["E2E_SIM_URL"] = sim_url
    if sim_ca:
        env["E2E_SIM_CA"] = str(sim_ca)
    env.update(extra_env or {})
    config = {
        "mcpServers": {
            server_name: {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(VM_SERVER)],
                "env": env,
            }
        }
    }
    return write_json(path, config)


def hook_settings(
    command: Sequence[str] | str,
    *,
    matcher: str = f"mcp__{VM_SERVER_NAME}__.*",
    timeout: float | None = None,
    on_failure: str | None = None,
    event: str = "PreToolUse",
) -> dict[str, Any]:
    """Settings with one command hook. A sequence is exec form (``command`` + ``args``)."""
    handler: dict[str, Any] = {"type": "command"}
    if isinstance(command, str):
        handler["command"] = command
    else:
        handler["command"], *args = command
        handler["args"] = list(args)
    if timeout is not None:
        handler["timeout"] = timeout
    if on_failure is not None:
        handler["onFailure"] = on_failure
    return {"hooks": {event: [{"matcher": matcher, "hooks": [handler]}]}}


def write_plugin(
    plugin_dir: Path, hooks: Mapping[str, Any], name: str = "zerto-rewind-e2e"
) -> Path:
    """A minimal plugin for ``--plugin-dir``: ``.claude-plugin/plugin.json`` + ``hooks/hooks.json``.

    ``hooks`` has the settings shape, ``{"hooks": {"PreToolUse": [...]}}``.
    """
    write_json(
        plugin_dir / ".claude-plugin" / "plugin.json",
        {"name": name, "version": "0.0.0", "description": "zerto-rewind e2e test plugin"},
    )
    write_json(plugin_dir / "hooks" / "hooks.json", dict(hooks))
    return plugin_dir


def claude_env(
    api_url: str, home: Path, extra: Mapping[str, str] | None = None, api_key: str = "x"
) -> dict[str, str]:
    """A clean environment for a headless run: nothing leaks in from the caller's session."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": api_key,
        # No telemetry, error reports, auto-update or release-notes fetches.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # Lets the CLI run as root with --permission-mode bypassPermissions.
        "IS_SANDBOX": "1",
    }
    env.update(extra or {})
    return env


@dataclass
class ClaudeRun:
    """One finished ``claude -p`` run."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration: float
    data: dict[str, Any] | None = field(default=None)  # the (last) result object
    events: list[dict[str, Any]] = field(default_factory=list)  # stream-json only

    @property
    def results(self) -> list[dict[str, Any]]:
        """Every ``type: result`` object: one per model turn chain (stream-json shows all)."""
        found = [e for e in self.events if e.get("type") == "result"]
        return found or ([self.data] if self.data else [])

    @property
    def all_permission_denials(self) -> list[dict[str, Any]]:
        return [d for r in self.results for d in (r.get("permission_denials") or [])]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.data is not None

    def get(self, key: str, default: Any = None) -> Any:
        return (self.data or {}).get(key, default)

    def _str(self, key: str) -> str | None:
        value = self.get(key)
        return None if value is None else str(value)

    @property
    def result(self) -> str | None:
        return self._str("result")

    @property
    def session_id(self) -> str | None:
        return self._str("session_id")

    @property
    def stop_reason(self) -> str | None:
        return self._str("stop_reason")

    @property
    def is_error(self) -> bool:
        return bool(self.get("is_error"))

    @property
    def permission_denials(self) -> list[dict[str, Any]]:
        return list(self.get("permission_denials") or [])

    @property
    def denied_tools(self) -> list[str]:
        return [d.get("tool_name", "") for d in self.permission_denials]

    @property
    def deferred_tool_use(self) -> dict[str, Any] | None:
        value = self.get("deferred_tool_use")
        return dict(value) if isinstance(value, dict) else None

    def describe(self) -> str:
        """For assertion messages: the command, exit code and the tails of both streams."""
        return (
            f"$ {shlex.join(self.args)}\nexit {self.returncode} after {self.duration:.1f}s\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """Every JSON object printed on a line of its own."""
    events = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _parse_result(stdout: str) -> dict[str, Any] | None:
    """The JSON result object (the last JSON line; the CLI prints one object)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        for line in reversed(text.splitlines()):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            break
        else:
            return None
    if isinstance(data, list):  # --output-format json --verbose prints the message list
        results = [m for m in data if isinstance(m, dict) and m.get("type") == "result"]
        return results[-1] if results else None
    return data if isinstance(data, dict) else None


def run_claude(
    prompt: str | None,
    *,
    api_url: str,
    home: Path,
    cwd: Path,
    settings: Path | None = None,
    mcp_config: Path | None = None,
    permission_mode: str | None = "bypassPermissions",
    resume: str | None = None,
    plugin_dirs: Sequence[Path] = (),
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    claude: Path | None = None,
    output_format: str = "json",
) -> ClaudeRun:
    """``claude -p PROMPT --output-format json …`` against ``api_url``; never raises on exit≠0.

    ``permission_mode=None`` passes no ``--permission-mode`` (the CLI's default mode).
    ``output_format="stream-json"`` (adds ``--verbose``) keeps every event in ``.events``; plain
    ``json`` prints only the last result object, which hides earlier ones (see README).
    ``prompt=None`` passes no prompt (with ``resume``: the CLI sends "Continue from where you
    left off."). A run that outlives ``timeout`` is killed and raises
    ``subprocess.TimeoutExpired``.
    """
    binary = claude or claude_path(check_version=False)
    args = [str(binary), "-p", *([prompt] if prompt is not None else [])]
    args += ["--output-format", output_format]
    if output_format == "stream-json":
        args.append("--verbose")
    if settings is not None:
        args += ["--settings", str(settings)]
    if mcp_config is not None:
        args += ["--mcp-config", str(mcp_config), "--strict-mcp-config"]
    if permission_mode is not None:
        args += ["--permission-mode", permission_mode]
    if resume is not None:
        args += ["--resume", resume]
    for plugin_dir in plugin_dirs:
        args += ["--plugin-dir", str(plugin_dir)]
    args += list(extra_args)
    started = time.monotonic()
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=claude_env(api_url, home, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    events = parse_events(proc.stdout) if output_format == "stream-json" else []
    results = [e for e in events if e.get("type") == "result"]
    return ClaudeRun(
        args=args,
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        duration=time.monotonic() - started,
        data=results[-1] if results else _parse_result(proc.stdout),
        events=events,
    )


def read_actions(actions_log: Path) -> list[dict[str, Any]]:
    """The calls that reached the stand-in VM server (one dict per recorded action)."""
    if not actions_log.exists():
        return []
    lines = actions_log.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@dataclass
class E2ESession:
    """Everything one test needs, bound together: see the ``e2e`` fixture in conftest.py."""

    claude: Path
    api: Any  # fake_anthropic.FakeAnthropic (kept loose so this module imports on its own)
    project_dir: Path
    home: Path
    actions_log: Path
    mcp_config: Path
    runs: list[ClaudeRun] = field(default_factory=list)

    def script(self, turns: list[Any]) -> E2ESession:
        self.api.set_script(turns)
        return self

    def write_settings(self, data: Mapping[str, Any], name: str = "settings.json") -> Path:
        return write_json(self.project_dir / ".e2e" / name, data)

    def run(
        self,
        prompt: str | None = "Do the scripted VM work.",
        *,
        settings: Path | None = None,
        permission_mode: str | None = "bypassPermissions",
        resume: str | None = None,
        plugin_dirs: Sequence[Path] = (),
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        output_format: str = "json",
    ) -> ClaudeRun:
        run = run_claude(
            prompt,
            api_url=self.api.url,
            home=self.home,
            cwd=self.project_dir,
            settings=settings,
            mcp_config=self.mcp_config,
            permission_mode=permission_mode,
            resume=resume,
            plugin_dirs=plugin_dirs,
            extra_args=extra_args,
            env=env,
            timeout=timeout,
            claude=self.claude,
            output_format=output_format,
        )
        self.runs.append(run)
        return run

    def actions(self) -> list[dict[str, Any]]:
        return read_actions(self.actions_log)
