"""``zerto-rewind doctor``: is the guard really guarding?

Library first: :func:`run_checks` returns one :class:`Check` per question
(config, secret, ZVM, credentials, catalog, TLS, and each installed hook's
command, timeout, ``onFailure`` and matcher); :func:`main` prints them and
exits non-zero when any failed. Nothing is written anywhere.

One module per concern:

* :mod:`.config`: the config, its secret, the ZVM, TLS, pending, approvals;
* :mod:`.catalog`: ``vm_arg`` / ``vpgs`` / ``decision``, patterns no tool can match, and
  (live) the identity check;
* :mod:`.hook`: Claude Code settings files that hold the hook (command, pin, timeout,
  ``onFailure``, matcher);
* :mod:`.thin`: a thin hook and the guard service it asks;
* :mod:`.host_hooks`: the Codex, Gemini CLI and Copilot CLI hooks (``install
  host-hook``): command, service identity, the service, the host's timeout;
* :mod:`.mcp`: the MCP servers of Claude Code's configs, against catalog and matcher;
* :mod:`.gateway`: host configs that reach a VM server around the gateway (every
  host's files; with no hook installed and a gateway entry found, these and the
  gateway config's checks replace the Claude Code hook checks);
* :mod:`.sockets`: who can change a guard service socket's directory (a hook's
  ``--service unix:PATH``, ``ZERTO_REWIND_APPROVALS``);
* :mod:`.upstreams`: who each stdio VM server runs as, and what of the guard it can reach;
* :mod:`.live`: the catalog against a server's live ``tools/list``, and pattern ties;
* :mod:`.files` and :mod:`.access`: ``--as-user``, which guard files the agent's user
  can change and which credentials it can read.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...config.settings import Settings, config_path, home_dir
from ...hostconfig.bypass import Finding, bypass_findings
from ...hostconfig.claude import read_sources
from ...hostconfig.hooks import InstalledHook
from ...hostconfig.install.settings_file import MANAGED_SETTINGS, is_thin_hook
from ...hostconfig.specs import HOSTS, HostFile, known_files
from .access import User, lookup_user
from .catalog import pattern_check, vm_arg_check
from .check import Check
from .config import (
    ZVM_DEADLINE_S,
    approvals_check,
    config_checks,
    pending_check,
    secret_and_zvm_checks,
    tls_check,
)
from .gateway import doctor_bypass_checks
from .gateway_health import gateway_health_checks
from .hook import SettingsFile, hook_config, host_checks, installed_matchers
from .host_hooks import find_host_hooks, host_hook_checks
from .live import live_checks, tie_check
from .mcp import mcp_server_checks
from .redis_state import redis_checks
from .sockets import socket_directory_checks
from .thin import thin_hook_checks
from .upstreams import upstream_checks, upstream_start_checks

__all__ = ["Check", "default_settings_files", "main", "run_checks"]


def default_settings_files(home: str, cwd: str) -> list[str]:
    """Claude Code's project and user settings files that exist (checked when none are named)."""
    candidates = [
        os.path.join(cwd, ".claude", "settings.json"),
        os.path.join(cwd, ".claude", "settings.local.json"),
        os.path.join(home, ".claude", "settings.json"),
    ]
    return [p for p in dict.fromkeys(candidates) if os.path.isfile(p)]


def run_checks(
    *,
    config: str | None = None,
    settings_files: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    zvm_deadline_s: float = ZVM_DEADLINE_S,
    project_dirs: Sequence[str] | None = None,
    mcp_files: Sequence[str] = (),
    managed_files: Sequence[str] = (),
    as_user: User | None = None,
    allow_privileged_upstream: bool = False,
    host: str | None = None,
) -> list[Check]:
    """Run every check; ``settings_files=None`` looks in ./.claude and ~/.claude.

    ``project_dirs`` are the projects whose MCP configs are read (default: the
    directory holding each ``.claude/`` settings file checked, else the current one);
    ``mcp_files`` are configs the host is started with (``claude --mcp-config``);
    ``managed_files`` are Claude Code's managed settings, checked like the others.
    With ``as_user`` (the user who runs the agent), every guard file that user could
    change and every credential it could read is a failure (:mod:`.files`).
    ``allow_privileged_upstream``: the gateway runs with that flag (a root upstream warns).
    ``host`` (a :data:`~zerto_rewind.hostconfig.specs.HOSTS` name) narrows the
    doctor to that host's config files; the Claude Code hook checks run only for
    ``claude-code`` (or no ``host``). Without ``host``, an installed Claude Code hook
    narrows it to Claude Code's files alike; else every host's MCP files are scanned
    for servers that bypass the gateway; with no hook installed and a gateway entry
    found, the gateway checks replace the hook checks.
    """
    env = dict(os.environ if env is None else env)
    explicit = settings_files is not None
    home = home_dir(env)
    if settings_files is None:
        settings_files = default_settings_files(home, os.getcwd())
        if project_dirs is None:
            project_dirs = [os.getcwd()]
    if project_dirs is None:
        project_dirs = _projects_of(settings_files, home)
    setup = _Setup.find(env, host, project_dirs, settings_files, managed_files, explicit=explicit)
    checks, settings = _config_checks(env, config, setup)
    if settings is not None:
        checks += _settings_checks(settings, env, zvm_deadline_s, allow_privileged_upstream)
    for hook in setup.host_hooks:
        checks += host_hook_checks(hook)
    approvals_socket = env.get("ZERTO_REWIND_APPROVALS", "").strip()
    if approvals_socket.startswith("unix:"):  # the approvals CLI's socket
        where = f"ZERTO_REWIND_APPROVALS {approvals_socket}"
        checks += socket_directory_checks(approvals_socket[5:], where)
    checks += setup.hook_file_problems
    checks += _guarding_checks(setup, settings, env, project_dirs, mcp_files, host)
    if as_user is not None:
        from .files import access_report

        checks += access_report(
            as_user, settings=settings, hosts=setup.hosts, env=env, project_dirs=project_dirs
        )
    return checks


@dataclass(frozen=True)
class _Setup:
    """What is installed: the Claude Code hook's files, other hosts' hooks, gateway entries."""

    hosts: list[SettingsFile]
    handlers: list[dict[str, Any]]
    scope: str | None
    host_files: list[HostFile]
    through: list[Finding]
    host_hooks: list[InstalledHook]
    hook_file_problems: list[Check]

    @classmethod
    def find(
        cls,
        env: Mapping[str, str],
        host: str | None,
        project_dirs: Sequence[str],
        settings_files: Sequence[str],
        managed_files: Sequence[str],
        *,
        explicit: bool,
    ) -> _Setup:
        hosts = [SettingsFile.read(path, explicit=explicit) for path in settings_files]
        hosts += [SettingsFile.read(path, explicit=True) for path in managed_files]
        if not cls.hook_host(host):
            hosts = []  # only Claude Code has this hook
        handlers = [handler for h in hosts for _entry, handler in h.hooks]
        # The setup asked about: --host; else the Claude Code hook, when one is installed
        # (another host's files are no part of it: never read, never advised on); else every
        # host, to find what guards (a gateway entry, another host's hook).
        scope = host if host is not None else ("claude-code" if handlers else None)
        host_files = [f for f in known_files(env, project_dirs) if scope in (None, f.host.name)]
        through = [f for f in bypass_findings(env, files=host_files) if f.kind == "gateway"]
        host_hooks, hook_file_problems = find_host_hooks(env, project_dirs, scope)
        return cls(
            hosts, handlers, scope, host_files, through, list(host_hooks), list(hook_file_problems)
        )

    @staticmethod
    def hook_host(host: str | None) -> bool:
        return host in (None, "claude-code")

    def gateway_mode(self, host: str | None) -> bool:
        """No Claude Code hook: the gateway, or another host's hook, is what guards."""
        handlers, hook_host = self.handlers, self.hook_host(host)
        return not handlers and (bool(self.through) or bool(self.host_hooks) or not hook_host)

    @property
    def thin_only(self) -> bool:
        """Only thin hooks guard: the guard service holds config and credentials."""
        if self.handlers:
            return all(map(is_thin_hook, self.handlers))
        return bool(self.host_hooks) and not self.through


def _config_checks(
    env: dict[str, str], config: str | None, setup: _Setup
) -> tuple[list[Check], Settings | None]:
    """The config's checks, naming in ``env`` the config the installed hook or gateway uses."""
    origin = ""
    if config:
        env["ZERTO_REWIND_CONFIG"] = config
    elif not env.get("ZERTO_REWIND_CONFIG"):
        # No config named: check the one the installed hook (or gateway entry) uses.
        found = hook_config(setup.hosts) or _gateway_config(setup.through)
        if found:
            env["ZERTO_REWIND_CONFIG"] = found[0]
            by = "gateway entry" if not setup.handlers else "hook"
            origin = f" (named by the {by} in {found[1]})"
    if setup.thin_only and not env.get("ZERTO_REWIND_CONFIG"):
        # Thin hooks only, and no config named: the service holds config and credentials.
        detail = "the installed hooks are thin: the guard service holds the config"
        return [Check("config", "pass", detail)], None
    return config_checks(env, origin)


def _settings_checks(
    settings: Settings, env: Mapping[str, str], zvm_deadline_s: float, allow_privileged: bool
) -> list[Check]:
    """What a loaded config is checked for: secret, ZVM, catalog, TLS, approvals, upstreams."""
    checks = secret_and_zvm_checks(settings, env, zvm_deadline_s)
    checks += [vm_arg_check(settings), tls_check(settings), pending_check(settings)]
    if settings.upstreams or settings.guard.prompt_via == "approvals":
        checks.append(approvals_check(settings))
    checks += redis_checks(settings)
    checks += upstream_checks(settings, allow_privileged=allow_privileged)
    checks += upstream_start_checks(settings, allow_privileged=allow_privileged)
    checks += [tie_check(settings), pattern_check(settings.catalog)]
    return checks


def _guarding_checks(
    setup: _Setup,
    settings: Settings | None,
    env: Mapping[str, str],
    project_dirs: Sequence[str],
    mcp_files: Sequence[str],
    host: str | None,
) -> list[Check]:
    """What guards the agent: the Claude Code hook or the gateway, and what goes around it."""
    checks: list[Check] = []
    hosts, handlers = setup.hosts, setup.handlers
    if setup.gateway_mode(host):
        checks.append(_gateway_setup_check(setup.through, host, setup.host_hooks))
    else:
        checks += host_checks(hosts, settings, config_path(env), thin=thin_hook_checks)
        sources = read_sources(env, projects=project_dirs, extra_files=mcp_files)
        if settings is not None or not handlers or not all(map(is_thin_hook, handlers)):
            checks += mcp_server_checks(sources, settings, installed_matchers(hosts))
    # With a hook installed, Claude Code's own files are the MCP check's (the hook
    # guards the servers there); every other host has only the gateway.
    scanned = [f for f in setup.host_files if not handlers or f.host.name != "claude-code"]
    if scanned:
        checks += doctor_bypass_checks(env, settings=settings, files=scanned)
        checks += gateway_health_checks(scanned)
    if setup.scope == "claude-code" and host is None:
        detail = (
            "checked the Claude Code hook's setup only; another agent host's files are not "
            "read (for one, run zerto-rewind doctor --host HOST)"
        )
        checks.append(Check("hosts", "pass", detail))
    return checks


def _gateway_config(through: Sequence[Finding]) -> tuple[str, str] | None:
    """The config a stdio gateway entry names, and where: what a gateway-only doctor checks."""
    for finding in through:
        if finding.config:
            return finding.config, f"{finding.where} ({finding.server})"
    return None


def _gateway_setup_check(
    through: Sequence[Finding], host: str | None, host_hooks: Sequence[InstalledHook] = ()
) -> Check:
    """Why the doctor checks the gateway (or another host's hook) and not the Claude Code hook."""
    entries = [f"{f.where} {f.server}" for f in through]
    if host_hooks and not entries:
        shown = ", ".join(f"{HOSTS[h.host].label} ({h.path})" for h in host_hooks)
        detail = "no Claude Code hook; the host hooks installed are checked instead of it: " + shown
        return Check("gateway setup", "pass", detail)
    if entries:
        detail = (
            "no zerto-rewind hook installed; the gateway guards these host entries, so "
            "the gateway checks run instead of the hook checks: " + ", ".join(entries)
        )
        return Check("gateway setup", "pass", detail)
    label = HOSTS[host].label if host in HOSTS else str(host)
    detail = f"{label} has no zerto-rewind hook, and none of its config files reaches the gateway"
    fix = f"zerto-rewind install mcp-host {host} --server NAME (see docs/gateway.md)"
    return Check("gateway setup", "fail", detail, fix)


def _projects_of(settings_files: Sequence[str], home: str) -> list[str]:
    """The project directory of each ``DIR/.claude/settings*.json`` (not the user's own)."""
    projects = []
    for path in settings_files:
        parent = os.path.dirname(os.path.abspath(path))
        if os.path.basename(parent) == ".claude":
            project = os.path.dirname(parent)
            if os.path.abspath(project) != os.path.abspath(home):
                projects.append(project)
    return list(dict.fromkeys(projects))


# ------------------------------------------------------------------ command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind doctor",
        description="Check the config, the ZVM, the credentials and the installed hook.",
    )
    parser.add_argument("--config", metavar="PATH", help="the config (default: the hook's own)")
    parser.add_argument(
        "--settings", action="append", default=[], metavar="FILE", help="a host settings file"
    )
    parser.add_argument("--project", metavar="DIR", help="check DIR/.claude/settings.json")
    parser.add_argument("--user", action="store_true", help="check ~/.claude/settings.json")
    parser.add_argument(
        "--mcp-config",
        action="append",
        default=[],
        metavar="FILE",
        help="an MCP config the host is started with (claude --mcp-config FILE)",
    )
    live = parser.add_argument_group(
        "live tool list", "compare the catalog with a server's tools/list (`-- COMMAND [ARGS…]`)"
    )
    live.add_argument("--server", metavar="NAME", help="the name the host gives the server")
    live.add_argument("--url", metavar="URL", help="a streamable-HTTP server")
    live.add_argument(
        "--header", action="append", default=[], metavar="K:V", help="an HTTP header for --url"
    )
    live.add_argument("--tools-json", metavar="FILE", help="a saved tools/list result")
    live.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="for the server (default 30)"
    )
    parser.add_argument(
        "--managed-file",
        metavar="FILE",
        help=f"Claude Code's managed settings (default {MANAGED_SETTINGS}, when it exists)",
    )
    parser.add_argument(
        "--as-user",
        metavar="NAME",
        help="judge for the user who runs the agent: every guard file it can change and every "
        "credential it can read fails (default: the current user, unless root)",
    )
    parser.add_argument(
        "--allow-privileged-upstream",
        action="store_true",
        help="the gateway runs with this flag: an upstream as root or as the guard's owner warns",
    )
    parser.add_argument(
        "--host",
        choices=list(HOSTS),
        metavar="HOST",
        help="check only this agent host's files (" + ", ".join(HOSTS) + ")",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind doctor``; exit 1 when any check failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = _parser()
    args = parser.parse_args(argv)
    if (command or args.url or args.tools_json) and not args.server:
        parser.error("--server NAME is needed to compare with a live tool list")
    env = os.environ if env is None else env
    as_user, note = _agent_user(args.as_user)
    if args.as_user and as_user is None:
        parser.error(f"--as-user {args.as_user}: no such user")
    if as_user is not None and args.as_user:
        from .files import user_env

        env = user_env(env, _home_of(args.as_user), args.as_user)
    managed = args.managed_file or MANAGED_SETTINGS
    managed_files = [managed] if args.managed_file or os.path.isfile(managed) else []
    files: list[str] = list(args.settings)
    if args.project:
        files.append(os.path.join(args.project, ".claude", "settings.json"))
    if args.user:
        home = home_dir(env)
        files.append(os.path.join(home, ".claude", "settings.json"))
    checks = run_checks(
        config=args.config,
        settings_files=files or None,
        env=env,
        project_dirs=[args.project] if args.project else None,
        mcp_files=args.mcp_config,
        managed_files=managed_files,
        as_user=as_user,
        allow_privileged_upstream=args.allow_privileged_upstream,
        host=args.host,
    )
    if args.server:
        checks += _live(args, command, env)
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        report = {"ok": not failed, "checks": [c.to_json() for c in checks]}
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        _print(checks)
        if note:
            print(note)
    return 1 if failed else 0


def _agent_user(name: str | None) -> tuple[User | None, str]:
    """The user to judge access for: ``name``, else the current one (not root: root can do all)."""
    import pwd

    if name:
        try:
            return lookup_user(name), ""
        except KeyError:
            return None, ""
    if os.geteuid() == 0:
        note = (
            "access: not judged (running as root, who can change everything); run "
            "zerto-rewind doctor --as-user NAME for the user who runs the agent"
        )
        return None, note
    return lookup_user(pwd.getpwuid(os.geteuid()).pw_name), ""


def _home_of(name: str) -> str:
    import pwd

    return pwd.getpwnam(name).pw_dir


def _live(args: argparse.Namespace, command: list[str], env: Mapping[str, str]) -> list[Check]:
    """The live comparison: the server's tools/list against the config's catalog."""
    from ...config.loader import load_config
    from ...errors import ZertoRewindError
    from ..catalog_cmd import server_tools

    run_env = dict(env)
    if args.config:
        run_env["ZERTO_REWIND_CONFIG"] = args.config
    try:
        settings = load_config(run_env)
    except ZertoRewindError as exc:
        return [Check("live: tools read", "fail", f"the config did not load: {exc}")]
    source = args.url or args.tools_json or shlex.join(command) or "nothing"
    try:
        tools = server_tools(args, command)
    except (ZertoRewindError, OSError, ValueError) as exc:
        detail = f"could not read the tools/list of {args.server} from {source}: {exc}"
        return [Check("live: tools read", "fail", detail, "check the command, URL or file")]
    return live_checks(settings, args.server, tools, source)


def _print(checks: list[Check]) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
    marks = {"pass": "[green]✓ PASS[/green]", "warn": "[yellow]! WARN[/yellow]"}
    for check in checks:
        mark = marks.get(check.status, "[red]✗ FAIL[/red]")
        out.print(f"{mark}  [bold]{escape(check.name)}[/bold]: {escape(check.detail)}")
        if check.fix and check.status != "pass":
            out.print(f"        fix: {escape(check.fix)}")
    counts = {s: sum(c.status == s for c in checks) for s in ("pass", "warn", "fail")}
    out.print(
        f"\n{counts['pass']} passed, {counts['warn']} warnings, {counts['fail']} failed",
        style="red" if counts["fail"] else "green",
    )
