"""Codex, Gemini CLI and Copilot CLI, headless and offline, against one scripted model.

Each :class:`HostCLI` knows how to drive one pinned real CLI (see ``package.json``) offline:

- **Codex** (``codex exec --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check
  --ephemeral --json``): a custom model provider in ``$CODEX_HOME/config.toml`` with
  ``wire_api = "responses"`` pointing at ``fake_models`` (``…/v1``), the key in
  ``SCRIPTED_API_KEY``; MCP servers in ``[mcp_servers.NAME]`` of the same file. Output: one
  JSON event per line (``item.completed`` with ``mcp_tool_call`` / ``agent_message``).
- **Gemini CLI** (``gemini -p … --yolo --skip-trust -o json``): ``GOOGLE_GEMINI_BASE_URL`` and
  ``GEMINI_API_KEY``, plus ``security.auth.selectedType = "gemini-api-key"`` in
  ``~/.gemini/settings.json`` (without it the non-interactive auth check fails, exit 41);
  MCP servers in ``mcpServers`` of that file. Output: one JSON object (``response``,
  ``stats``).
- **Copilot CLI** (``copilot -p … --yolo --output-format json``): ``COPILOT_OFFLINE`` and a
  Chat Completions provider (``COPILOT_PROVIDER_BASE_URL`` …); MCP servers in
  ``~/.copilot/mcp-config.json`` (stdio is ``"type": "local"``). Output: one JSON event per
  line, ending ``{"type": "result", "exitCode": 0}``.

A :class:`HostHome` is one host's throwaway ``HOME`` (and ``CODEX_HOME``, XDG dirs,
``TMPDIR``) and project directory: ``add_server`` writes a plain stdio entry with the host's
own ``mcp add`` command (as a user would), ``install_gateway`` runs the real
``zerto-rewind install mcp-host`` on it, ``entry`` / ``edit_entry`` read and change the
entry through the product's own host-config reader, and ``run`` runs the CLI once
(:class:`HostRun`: exit code, output, parsed events, the final answer).

Nothing is inherited from the caller's environment but ``PATH``; the API key is not ``x``
because Copilot masks the key's value wherever it appears in its output ("e******itCode").
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.fake_models import FakeModels, call
from e2e.gateway_e2e import DEFAULT_VMS, GatewayRig
from e2e.harness import E2E_DIR, INSTALL_COMMAND, parse_events, write_json
from zerto_rewind.hostconfig.files import read_host_config, render_host_config
from zerto_rewind.hostconfig.specs import HOSTS as HOST_SPECS
from zerto_rewind.hostconfig.specs import HostFile

__all__ = [
    "API_KEY",
    "HOSTS",
    "HostCLI",
    "HostHome",
    "HostMissing",
    "HostRun",
    "HostSession",
    "host_path",
    "list_vms_reaches_the_model",
    "only",
    "remote_peers",
]

NODE_BIN = E2E_DIR / "node_modules" / ".bin"
API_KEY = "scripted-model-key"
PROMPT = "Do the scripted VM work."
RUN_TIMEOUT_S = 120.0


# What a host's output says: (the final answer, the host finished, its MCP calls).
Parsed = tuple[str | None, bool, list[tuple[str, bool]]]


class HostMissing(RuntimeError):
    """A pinned host CLI is not installed (or does not run)."""


def _events(stdout: str) -> list[dict[str, Any]]:
    """Every JSON object on a line of its own, or the one object the whole output is."""
    found = parse_events(stdout)
    start = stdout.find("{")
    if found or start < 0:
        return found
    try:
        whole = json.loads(stdout[start:])
    except ValueError:
        return []
    return [whole] if isinstance(whole, dict) else []


@dataclass
class HostRun:
    """One finished headless run of a host CLI."""

    host: str
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration: float
    events: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None  # the model's final text, as the host reported it
    finished: bool = False  # the host's own "done" event (or object) was printed
    # Each MCP call as the host itself reported it: (tool as the model named it, succeeded).
    host_calls: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.finished

    def describe(self) -> str:
        """For assertion messages: the command, exit code and the tails of both streams."""
        return (
            f"[{self.host}] $ {shlex.join(self.args)}\nexit {self.returncode} after "
            f"{self.duration:.1f}s\n--- stdout ---\n{self.stdout[-4000:]}\n"
            f"--- stderr ---\n{self.stderr[-4000:]}"
        )


@dataclass(frozen=True)
class HostCLI:
    """One pinned host CLI: its package, binary, config files, flags and output."""

    name: str  # codex | gemini | copilot
    package: str
    version: str
    binary: str
    target: str  # the ``install mcp-host`` target (its ``--user`` file is ``config_file``)
    tool_name: Callable[[str, str], str]  # (server, tool) -> the name the model calls
    config_file: Callable[[HostHome], Path]  # where the host keeps its MCP servers
    run_args: Callable[[HostHome, str], list[str]]
    env: Callable[[HostHome, str], dict[str, str]]  # (home, model url) -> host variables
    prepare: Callable[[HostHome, str], None]  # write the model provider's settings
    add_server_args: Callable[[str, Sequence[str], Mapping[str, str]], list[str]]
    parse: Callable[[list[dict[str, Any]]], Parsed]

    @property
    def path(self) -> Path:
        return NODE_BIN / self.binary

    def tool(self, tool: str, server: str = "vsphere") -> str:
        return self.tool_name(server, tool)

    def spec_file(self, home: HostHome) -> HostFile:
        """The product's view of the host file (its ``install mcp-host`` target's format)."""
        return HostFile(HOST_SPECS[self.target], str(self.config_file(home)))


def host_path(host: HostCLI, *, check_version: bool = True) -> Path:
    """The pinned binary, checked to run; a loud error (never a skip) if it cannot."""
    path = host.path
    if not path.exists():
        raise HostMissing(
            f"{host.package}@{host.version} is not installed at {path}; install it with:\n\n"
            f"    {INSTALL_COMMAND}\n"
        )
    if check_version:
        try:
            with tempfile.TemporaryDirectory(prefix="zr-e2e-version-") as scratch:
                env = _base_env(Path(scratch), {"CODEX_HOME": scratch})
                out = _run([str(path), "--version"], Path(scratch), env, 60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HostMissing(f"{path} does not run ({exc}); reinstall: {INSTALL_COMMAND}") from exc
        if out.returncode != 0 or host.version not in out.stdout:
            raise HostMissing(
                f"{path} --version gave exit {out.returncode}, {out.stdout!r}; expected "
                f"{host.version}. Reinstall with:\n\n    {INSTALL_COMMAND}\n"
            )
    return path


def _run(
    args: list[str], cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """One child, stdin closed, output captured; raises only past ``timeout``."""
    return subprocess.run(
        args,
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _base_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    env.update(extra)
    return env


@dataclass
class HostHome:
    """One host's throwaway HOME and project directory, and its runs."""

    host: HostCLI
    root: Path
    runs: list[HostRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.project = self.root / "project"
        # Gemini CLI writes its error reports to the temp directory: keep them in the test's.
        self.tmp = self.root / "tmp"
        self.codex_home = self.home / ".codex"
        self.xdg_config = self.home / ".config"
        for path in (self.home, self.project, self.tmp, self.codex_home, self.xdg_config):
            path.mkdir(parents=True, exist_ok=True)

    def environment(self, model_url: str, extra: Mapping[str, str] | None = None) -> dict[
        str, str
    ]:  # fmt: skip
        """The whole child environment: nothing leaks in from the caller's session."""
        env = _base_env(
            self.home,
            {
                "TMPDIR": str(self.tmp),
                "XDG_CONFIG_HOME": str(self.xdg_config),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "CODEX_HOME": str(self.codex_home),
            },
        )
        env.update(self.host.env(self, model_url))
        env.update(extra or {})
        return env

    # -- the host's MCP config ---------------------------------------------------------------

    @property
    def config_file(self) -> Path:
        return self.host.config_file(self)

    def add_server(
        self, name: str, command: Sequence[str], env: Mapping[str, str], *, model_url: str
    ) -> None:
        """A plain stdio entry, written by the host's own ``mcp add`` (as a user would)."""
        args = [str(self.host.path), *self.host.add_server_args(name, command, env)]
        done = _run(args, self.project, self.environment(model_url), 60)
        if done.returncode != 0:
            raise AssertionError(f"{shlex.join(args[:3])} … failed: {done.stderr[-2000:]}")

    def entry(self, name: str) -> dict[str, Any]:
        """The server's entry as the product reads the host file."""
        servers = read_host_config(self.host.spec_file(self)).servers
        return dict(servers[name])

    def edit_entry(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Change one entry in place, keeping the rest of the file (TOML comments too)."""
        config = read_host_config(self.host.spec_file(self))
        change(config.servers[name])
        self.config_file.write_text(render_host_config(config), encoding="utf-8")

    def install_gateway(
        self, name: str, gateway_config: str, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        """``zerto-rewind install mcp-host <target> --server NAME --user``, as a user would."""
        return self.zerto_rewind(
            "install", "mcp-host", self.host.target, "--server", name, "--user",
            "--gateway-config", gateway_config, *extra,
        )  # fmt: skip

    def install_hook(self, service: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """``zerto-rewind install host-hook <host> --user --service URL``, as a user would."""
        return self.zerto_rewind(
            "install", "host-hook", self.host.name, "--user", "--service", service, *extra
        )

    def zerto_rewind(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The real CLI with this HOME (no ZERTO_* from the caller); fails loudly on exit != 0."""
        argv = [sys.executable, "-m", "zerto_rewind", *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
        env.update(HOME=str(self.home), CODEX_HOME=str(self.codex_home),
                   XDG_CONFIG_HOME=str(self.xdg_config))  # fmt: skip
        done = _run(argv, self.project, env, 60)
        if done.returncode != 0:
            raise AssertionError(
                f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done

    # -- one run -----------------------------------------------------------------------------

    def run(
        self,
        model_url: str,
        prompt: str = PROMPT,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = RUN_TIMEOUT_S,
        trace: Path | None = None,
        flags: Sequence[str] = (),
    ) -> HostRun:
        """Run the CLI headless once; never raises on a non-zero exit (it does past timeout).

        ``flags`` go after the host's own (e.g. Codex's ``--dangerously-bypass-hook-trust``).
        ``trace``: run it under ``strace -f`` and write every socket address it (or any
        child: MCP servers, the gateway) connected or sent to there (see :func:`remote_peers`).
        """
        args = [str(self.host.path), *self.host.run_args(self, prompt), *flags]
        if trace is not None:
            args = ["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg",
                    "-o", str(trace), *args]  # fmt: skip
        started = time.monotonic()
        proc = _run(args, self.project, self.environment(model_url, env), timeout)
        events = _events(proc.stdout)
        answer, finished, calls = self.host.parse(events)
        run = HostRun(
            self.host.name, args, proc.returncode, proc.stdout, proc.stderr,
            time.monotonic() - started, events, answer, finished, calls,
        )  # fmt: skip
        self.runs.append(run)
        return run


def _env_flags(env: Mapping[str, str]) -> list[str]:
    """``mcp add``'s ``--env=KEY=VALUE`` flags (the same spelling in all three CLIs)."""
    return [f"--env={k}={v}" for k, v in env.items()]


# strace prints sin_addr=inet_addr("A") for IPv4 and inet_pton(AF_INET6, "A", …) for IPv6.
_INET = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6?, "([^"]+)"')


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def remote_peers(trace: Path) -> list[str]:
    """Every address in a ``strace`` log of socket calls that is not loopback (DNS too)."""
    text = trace.read_text(encoding="utf-8", errors="replace")
    found = {v4 or v6 for v4, v6 in _INET.findall(text)}
    return sorted(a for a in found if not _loopback(a))


@dataclass
class HostSession:
    """One host's HOME, the module's VM side (``GatewayRig``) and scripted model: a test runs
    a script and reads back the decisions logged since."""

    host: HostCLI
    home: HostHome
    rig: GatewayRig
    model: FakeModels
    flags: tuple[str, ...] = ()  # for every run (HostHome.run)
    installed: dict[str, Any] = field(default_factory=dict)  # the entry install wrote
    log_start: int = 0

    def tool(self, name: str) -> str:
        return self.host.tool(name)

    def run(self, script: list[Any]) -> HostRun:
        """A fresh script, one run that must finish; the decision log is read from here on."""
        self.model.reset(script)
        self.log_start = len(self.rig.log())
        run = self.home.run(self.model.url, flags=self.flags)
        assert run.ok, run.describe()
        return run

    def decisions(self) -> list[dict[str, Any]]:
        return self.rig.log_since(self.log_start)


def list_vms_reaches_the_model(session: HostSession) -> None:
    """Run mcvsphere's ``list_vms`` (read-only; its structuredContent is a JSON array): no
    tag; Codex and Copilot pass the listing on, Gemini CLI rejects it itself."""
    tags_before = session.rig.box.tag_requests()

    session.run([call(session.tool("list_vms"))])

    assert session.rig.box.tag_requests() == tags_before
    told = only(session.model.tool_results())
    if session.host.name == "gemini":
        assert "expected record, received array" in told.text, told
    else:
        assert all(vm in told.text for vm in DEFAULT_VMS), told


def only(items: Sequence[Any]) -> Any:
    """The one item of ``items`` (an assertion names them all otherwise)."""
    assert len(items) == 1, items
    return items[0]


# ---- Codex ---------------------------------------------------------------------------------


def _codex_prepare(home: HostHome, model_url: str) -> None:
    # The provider block is the host's "model"; MCP entries are added below it by `mcp add`.
    (home.codex_home / "config.toml").write_text(
        "\n".join([
            'model = "scripted"',
            'model_provider = "scripted"',
            "check_for_update_on_startup = false",
            "",
            # Without these Codex looks up chatgpt.com and github.com (`git ls-remote` of
            # its plugin marketplace) on every run.
            "[analytics]",
            "enabled = false",
            "",
            "[features]",
            "plugins = false",
            "apps = false",
            "",
            "[model_providers.scripted]",
            'name = "scripted"',
            f'base_url = "{model_url}/v1"',
            'wire_api = "responses"',
            'env_key = "SCRIPTED_API_KEY"',
            "",
        ]),
        encoding="utf-8",
    )  # fmt: skip


def _codex_parse(events: list[dict[str, Any]]) -> Parsed:
    items = [e["item"] for e in events if e.get("type") == "item.completed" and e.get("item")]
    said = [str(i.get("text", "")) for i in items if i.get("type") == "agent_message"]
    calls = [
        (f"mcp__{i.get('server')}__{i.get('tool')}", i.get("status") == "completed")
        for i in items
        if i.get("type") == "mcp_tool_call"
    ]
    finished = any(e.get("type") == "turn.completed" for e in events)
    return (said[-1] if said else None), finished, calls


CODEX = HostCLI(
    name="codex",
    package="@openai/codex",
    version="0.169.0",
    binary="codex",
    target="codex",
    tool_name=lambda server, tool: f"mcp__{server}__{tool}",
    config_file=lambda home: home.codex_home / "config.toml",
    run_args=lambda home, prompt: [
        "exec",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        "--ephemeral",
        "--json",
        prompt,
    ],
    env=lambda home, url: {"SCRIPTED_API_KEY": API_KEY},
    prepare=_codex_prepare,
    add_server_args=lambda name, command, env: [
        "mcp",
        "add",
        name,
        *_env_flags(env),
        "--",
        *command,
    ],
    parse=_codex_parse,
)


# ---- Gemini CLI ----------------------------------------------------------------------------


def _gemini_prepare(home: HostHome, model_url: str) -> None:
    write_json(
        home.home / ".gemini" / "settings.json",
        {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            # Else it looks up play.googleapis.com (usage statistics) on every run.
            "privacy": {"usageStatisticsEnabled": False},
        },
    )


def _gemini_parse(events: list[dict[str, Any]]) -> Parsed:
    results = [e for e in events if "response" in e or "error" in e]
    if not results:
        return None, False, []
    last = results[-1]
    answer = last.get("response")
    # Gemini's JSON output counts calls per tool, not one by one.
    by_name = ((last.get("stats") or {}).get("tools") or {}).get("byName") or {}
    calls = [
        (str(name), ok)
        for name, counts in by_name.items()
        for ok, n in ((True, counts.get("success", 0)), (False, counts.get("fail", 0)))
        for _ in range(int(n))
    ]
    return (None if answer is None else str(answer)), "error" not in last, calls


GEMINI = HostCLI(
    name="gemini",
    package="@google/gemini-cli",
    version="0.61.0",
    binary="gemini",
    target="gemini",
    tool_name=lambda server, tool: f"mcp_{server}_{tool}",
    config_file=lambda home: home.home / ".gemini" / "settings.json",
    run_args=lambda home, prompt: ["-p", prompt, "--yolo", "--skip-trust", "-o", "json"],
    env=lambda home, url: {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": API_KEY},
    prepare=_gemini_prepare,
    add_server_args=lambda name, command, env: [
        "mcp",
        "add",
        "--scope",
        "user",
        *_env_flags(env),
        name,
        *command,
    ],
    parse=_gemini_parse,
)


# ---- Copilot CLI ---------------------------------------------------------------------------


def _copilot_parse(events: list[dict[str, Any]]) -> Parsed:
    def data(event: dict[str, Any]) -> dict[str, Any]:
        return event.get("data") or {}

    said = [
        str(data(e).get("content", ""))
        for e in events
        if e.get("type") == "assistant.message" and data(e).get("content")
    ]
    names = {
        data(e).get("toolCallId"): str(data(e).get("toolName"))
        for e in events
        if e.get("type") == "tool.execution_start"
    }
    calls = [
        (names.get(data(e).get("toolCallId"), "?"), bool(data(e).get("success")))
        for e in events
        if e.get("type") == "tool.execution_complete"
    ]
    done = [e for e in events if e.get("type") == "result"]
    return (said[-1] if said else None), bool(done) and done[-1].get("exitCode") == 0, calls


COPILOT = HostCLI(
    name="copilot",
    package="@github/copilot",
    version="1.0.102",
    binary="copilot",
    target="copilot",
    tool_name=lambda server, tool: f"{server}-{tool}",
    config_file=lambda home: home.home / ".copilot" / "mcp-config.json",
    run_args=lambda home, prompt: ["-p", prompt, "--yolo", "--output-format", "json"],
    env=lambda home, url: {
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
        "COPILOT_PROVIDER_API_KEY": API_KEY,
        "COPILOT_MODEL": "scripted",
        "COPILOT_AUTO_UPDATE": "false",
    },
    prepare=lambda home, url: None,
    add_server_args=lambda name, command, env: [
        "mcp",
        "add",
        *_env_flags(env),
        name,
        "--",
        *command,
    ],
    parse=_copilot_parse,
)

HOSTS: dict[str, HostCLI] = {h.name: h for h in (CODEX, GEMINI, COPILOT)}
