"""``zerto-rewind doctor``: is the guard really guarding?

Library first: :func:`run_checks` returns one :class:`Check` per question
(config, secret, ZVM, credentials, catalog, TLS, and each installed hook's
command, timeout, ``onFailure`` and matcher); :func:`main` prints them and
exits non-zero when any failed. Nothing is written anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .catalog import MUTATING, UNLISTED, classify
from .config import DEFAULT_GUARD_TIMEOUT_S, Settings, config_path
from .errors import (
    ApiError,
    AuthError,
    ConfigError,
    ZvmConnectionError,
    ZvmTimeout,
    ZvmTlsError,
)
from .install import find_our_hooks, load_config, read_settings, required_margin
from .matcher import compile_matcher, covered_servers

__all__ = ["Check", "default_settings_files", "main", "run_checks"]

Status = Literal["pass", "fail", "warn"]

ZVM_DEADLINE_S = 10.0
# Claude Code's default timeout for a command hook when the entry sets none.
HOST_DEFAULT_TIMEOUT_S = 600.0
# The command is run with --help to prove the interpreter finds the package.
COMMAND_PROBE_TIMEOUT_S = 30.0
_EXACT_LIST = re.compile(r"^[A-Za-z0-9_\- ,|]*$")
_INSTALL = "zerto-rewind install claude-code --project DIR (or --user) --config CONFIG"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report: what was checked, how it went, what to do."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        """The check as a JSON object."""
        return asdict(self)


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
) -> list[Check]:
    """Run every check; ``settings_files=None`` looks in ./.claude and ~/.claude."""
    env = dict(os.environ if env is None else env)
    explicit = settings_files is not None
    if settings_files is None:
        home = env.get("HOME") or os.path.expanduser("~")
        settings_files = default_settings_files(home, os.getcwd())
    hosts = [_HostFile.read(path, explicit=explicit) for path in settings_files]
    origin = ""
    if config:
        env["ZERTO_REWIND_CONFIG"] = config
    elif not env.get("ZERTO_REWIND_CONFIG"):
        # No config named: check the one the installed hook uses.
        found = _hook_config(hosts)
        if found:
            env["ZERTO_REWIND_CONFIG"] = found[0]
            origin = f" (named by the hook in {found[1]})"
    checks, settings = _config_checks(env, origin)
    if settings is not None:
        checks += _secret_and_zvm_checks(settings, env, zvm_deadline_s)
        checks += [_vm_arg_check(settings), _tls_check(settings)]
    checks += _host_checks(hosts, settings, config_path(env))
    return checks


def _hook_config(hosts: list[_HostFile]) -> tuple[str, str] | None:
    """(config, settings file) of the first installed hook that names its config."""
    for host in hosts:
        for _entry, handler in host.hooks:
            config = _parse_command(handler).config
            if config:
                return config, host.path
    return None


# ------------------------------------------------------------------ config and ZVM


def _config_checks(env: Mapping[str, str], origin: str) -> tuple[list[Check], Settings | None]:
    path = config_path(env)
    try:
        settings = load_config(env)
    except ConfigError as exc:
        fix = f"edit {path} (or point --config / ZERTO_REWIND_CONFIG at the right file)"
        return [Check("config", "fail", str(exc), fix)], None
    catalog = settings.catalog
    detail = (
        f"{path}{origin}: valid; {len(catalog.tools)} mutating tool entries, "
        f"{len(catalog.read_only)} read-only entries, guard budget {settings.guard.timeout_s:g} s"
    )
    return [Check("config", "pass", detail)], settings


def _secret_and_zvm_checks(
    settings: Settings, env: Mapping[str, str], deadline_s: float
) -> list[Check]:
    zvm = settings.zvm
    try:
        zvm.secret(env)
    except ConfigError as exc:
        fix = f"make the secret available where the hook runs ({zvm.secret_hint})"
        return [Check("secret", "fail", str(exc), fix)]
    checks = [Check("secret", "pass", f"found in {zvm.secret_hint}")]
    return checks + _zvm_checks(settings, env, deadline_s)


def _zvm_checks(settings: Settings, env: Mapping[str, str], deadline_s: float) -> list[Check]:
    """Get a fresh token (no cache: the credentials must really work) and make one cheap call."""
    from .zvm.client import ZvmClient

    zvm = settings.zvm
    started = time.monotonic()
    who = f"{zvm.grant} grant for client {zvm.client_id!r}" + (
        f", user {zvm.username!r}" if zvm.username else ""
    )
    try:
        with ZvmClient(_EnvSecret(zvm, env), retries=1, backoff_s=0.1) as client:
            site = client.local_site(deadline=started + deadline_s)
    except ZvmTlsError as exc:
        fix = "set zvm.ca_bundle to the PEM file of the CA that signed the ZVM's certificate"
        return [Check("zvm", "fail", str(exc), fix)]
    except (ZvmConnectionError, ZvmTimeout) as exc:
        fix = f"check zvm.url ({zvm.url}), that the ZVM is up, and the network path to it"
        return [Check("zvm", "fail", str(exc), fix)]
    except ConfigError as exc:
        return [Check("zvm", "fail", str(exc), "fix the zvm section of the config")]
    except AuthError as exc:
        reached = Check("zvm", "pass", f"{zvm.url} answered (its Keycloak refused the login)")
        fix = f"check zvm.client_id / zvm.username and the secret in {zvm.secret_hint}"
        return [reached, Check("credentials", "fail", str(exc), fix)]
    except ApiError as exc:
        reached = Check("zvm", "pass", f"{zvm.url} answered")
        fix = "give the account a Zerto role that may read the site (e.g. admin)"
        return [reached, Check("credentials", "fail", str(exc), fix)]
    elapsed_ms = int((time.monotonic() - started) * 1000)
    name = site.get("SiteName") or site.get("SiteIdentifier") or "unnamed site"
    version = site.get("DisplayVersion") or site.get("Version") or "unknown version"
    return [
        Check("zvm", "pass", f"{zvm.url} answered in {elapsed_ms} ms: {name} ({version})"),
        Check("credentials", "pass", f"token issued for the {who}; GET /v1/localsite accepted"),
    ]


class _EnvSecret:
    """ZvmSettings with ``secret()`` bound to the environment the doctor was given."""

    def __init__(self, settings: Any, env: Mapping[str, str]) -> None:
        self._settings = settings
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._settings, name)

    def secret(self) -> str:
        return str(self._settings.secret(self._env))


def _vm_arg_check(settings: Settings) -> Check:
    tools = settings.catalog.tools
    if not tools:
        detail = "the catalog lists no mutating tools: every call is read-only or unlisted"
        return Check("vm_arg", "warn", detail, "list the mutating tools under tools with vm_arg")
    missing = [name for name, spec in tools.items() if not spec.vm_arg]
    if missing:
        detail = (
            f"{len(missing)} of {len(tools)} tools have no vm_arg, so their VM is never known "
            f"and every call is prompted: {', '.join(missing)}"
        )
        fix = 'add "vm_arg": "<argument path>" to each of them in the config\'s tools'
        return Check("vm_arg", "fail", detail, fix)
    return Check("vm_arg", "pass", f"all {len(tools)} tools name their VM argument")


def _tls_check(settings: Settings) -> Check:
    zvm = settings.zvm
    if zvm.url.startswith("http://"):
        detail = f"zvm.url {zvm.url} is plain http: tokens and secrets cross the network in clear"
        return Check("tls", "warn", detail, "use the ZVM's https:// URL")
    if not zvm.verify_tls:
        detail = "zvm.verify_tls is false: anyone on the path can impersonate the ZVM"
        return Check("tls", "warn", detail, "drop verify_tls and set zvm.ca_bundle instead")
    via = f"against {zvm.ca_bundle}" if zvm.ca_bundle else "against the system CA store"
    return Check("tls", "pass", f"certificates verified {via}")


# ------------------------------------------------------------------ host settings files


@dataclass
class _HostFile:
    path: str
    explicit: bool
    data: dict[str, Any] | None
    problem: str
    hooks: list[tuple[dict[str, Any], dict[str, Any]]]

    @classmethod
    def read(cls, path: str, *, explicit: bool) -> _HostFile:
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            return cls(path, explicit, None, f"{path} does not exist", [])
        try:
            data, _text = read_settings(path)
        except ConfigError as exc:
            return cls(path, explicit, None, str(exc), [])
        return cls(path, explicit, data, "", find_our_hooks(data))


def _host_checks(hosts: list[_HostFile], settings: Settings | None, config: str) -> list[Check]:
    checks: list[Check] = []
    for host in hosts:
        if host.data is None:
            checks.append(Check("host settings", "fail", host.problem, "fix the file"))
            continue
        if host.data.get("disableAllHooks") is True:
            detail = f"{host.path}: disableAllHooks is true, so no hook runs"
            checks.append(Check("host settings", "fail", detail, "remove disableAllHooks"))
        if len(host.hooks) > 1:
            detail = (
                f"{host.path}: {len(host.hooks)} zerto-rewind hooks; each call is guarded twice"
            )
            fix = "re-run zerto-rewind install, which keeps one"
            checks.append(Check("hook installed", "warn", detail, fix))
        for entry, handler in host.hooks:
            checks += _hook_checks(host.path, entry, handler, settings, config)
    with_hook = [h.path for h in hosts if h.hooks]
    if with_hook:
        checks.insert(0, Check("hook installed", "pass", "in " + ", ".join(with_hook)))
    else:
        looked = (
            ", ".join(h.path for h in hosts) or "./.claude/settings.json, ~/.claude/settings.json"
        )
        detail = f"no zerto-rewind PreToolUse hook in {looked}"
        checks.insert(0, Check("hook installed", "fail", detail, f"run {_INSTALL}"))
    return checks


def _hook_checks(
    path: str,
    entry: dict[str, Any],
    handler: dict[str, Any],
    settings: Settings | None,
    config: str,
) -> list[Check]:
    budget = settings.guard.timeout_s if settings else DEFAULT_GUARD_TIMEOUT_S
    checks = [
        _command_check(path, handler, config),
        _timeout_check(path, handler, budget, assumed=settings is None),
        _on_failure_check(path, handler),
    ]
    if settings is not None:
        checks.append(_matcher_check(path, entry.get("matcher"), settings))
    return checks


class _Command:
    """What a hook command runs: the program, how, and with which config."""

    def __init__(self, argv: list[str], config: str | None, problem: str = "") -> None:
        self.argv = argv
        self.config = config
        self.problem = problem


def _parse_command(handler: Mapping[str, Any]) -> _Command:
    command = handler.get("command")
    if not isinstance(command, str) or not command.strip():
        return _Command([], None, "the hook has no command")
    args = handler.get("args")
    try:
        argv = [command, *map(str, args)] if isinstance(args, list) else shlex.split(command)
    except ValueError as exc:
        return _Command([], None, f"the command is not valid shell ({exc})")
    config = None
    while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
        name, _, value = argv.pop(0).partition("=")
        if name == "ZERTO_REWIND_CONFIG":
            config = value
    if "--config" in argv[:-1]:
        config = argv[argv.index("--config") + 1]
    return _Command(argv, config)


def _command_check(path: str, handler: dict[str, Any], config: str) -> Check:
    name = "hook command"
    if handler.get("type", "command") != "command":
        return Check(name, "fail", f"{path}: hook type is {handler.get('type')!r}", "reinstall")
    if handler.get("async") is True:
        detail = f"{path}: the hook is async, so it cannot stop a call"
        return Check(name, "fail", detail, 'remove "async": true (or reinstall)')
    parsed = _parse_command(handler)
    reinstall = f"re-run {_INSTALL}"
    if parsed.problem or not parsed.argv:
        return Check(name, "fail", f"{path}: {parsed.problem}", reinstall)
    program = parsed.argv[0]
    problems = []
    if not os.path.isabs(program):
        problems.append(f"the interpreter {program!r} is not an absolute path (it depends on PATH)")
    elif not os.access(program, os.X_OK):
        problems.append(f"the interpreter {program} does not exist or is not executable")
    if parsed.config is not None and not os.path.isabs(parsed.config):
        problems.append(f"the config {parsed.config!r} is not an absolute path")
    elif parsed.config is not None and not os.path.isfile(parsed.config):
        problems.append(f"the config {parsed.config} does not exist")
    if problems:
        detail = f"{path}: " + "; ".join(problems) + " — a hook that cannot start guards nothing"
        return Check(name, "fail", detail, reinstall)
    probe = _probe(parsed.argv)
    if probe:
        return Check(name, "fail", f"{path}: {probe}", reinstall)
    if parsed.config is None:
        detail = (
            f"{path}: the command names no --config, so it depends on ZERTO_REWIND_CONFIG "
            "being set in Claude Code's environment"
        )
        return Check(name, "warn", detail, reinstall)
    if os.path.abspath(parsed.config) != os.path.abspath(config):
        detail = f"{path}: the hook uses {parsed.config}, but this report checked {config}"
        return Check(name, "warn", detail, f"run zerto-rewind doctor --config {parsed.config}")
    return Check(name, "pass", f"{path}: {shlex.join(parsed.argv)} starts")


def _probe(argv: list[str]) -> str:
    """Run the hook command with --help: proves the interpreter finds zerto_rewind."""
    try:
        hook_at = argv.index("hook")
    except ValueError:
        return f"the command {shlex.join(argv)} does not run `zerto-rewind hook`"
    try:
        done = subprocess.run(
            [*argv[: hook_at + 1], "--help"],
            capture_output=True,
            text=True,
            timeout=COMMAND_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run the hook command: {exc}"
    if done.returncode != 0:
        err = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"`{shlex.join(argv[: hook_at + 1])} --help` failed ({done.returncode}): {err}"
    return ""


def _timeout_check(path: str, handler: dict[str, Any], budget: float, *, assumed: bool) -> Check:
    raw = handler.get("timeout")
    note = " (the default, the config did not load)" if assumed else ""
    if raw is None:
        timeout, source = HOST_DEFAULT_TIMEOUT_S, " (Claude Code's default)"
    elif isinstance(raw, bool) or not isinstance(raw, int | float):
        return Check(
            "hook timeout", "fail", f"{path}: timeout is {raw!r}", "set a number of seconds"
        )
    else:
        timeout, source = float(raw), ""
    need = budget + required_margin(budget)
    if timeout >= need:
        detail = f"{path}: timeout {timeout:g} s{source} > guard budget {budget:g} s{note}"
        return Check("hook timeout", "pass", detail)
    detail = (
        f"{path}: timeout {timeout:g} s{source} leaves the guard budget {budget:g} s{note} too "
        f"little room (needs ≥ {need:g} s): the host would cancel the hook before it answers"
    )
    fix = (
        f"set the hook's timeout to {need:g} or more (re-running install does), "
        "or lower guard.timeout_s"
    )
    return Check("hook timeout", "fail", detail, fix)


def _on_failure_check(path: str, handler: dict[str, Any]) -> Check:
    value = handler.get("onFailure")
    if value == "block":
        return Check("hook onFailure", "pass", f"{path}: a hook that fails or times out blocks")
    shown = f"is {value!r}" if value is not None else "is not set (Claude Code's default: continue)"
    detail = (
        f"{path}: onFailure {shown}: a hook that times out, crashes or cannot start lets the "
        "tool call run unguarded — the seed's silent failure"
    )
    fix = 'set "onFailure": "block" on the hook (zerto-rewind install writes it)'
    return Check("hook onFailure", "fail", detail, fix)


def _matcher_check(path: str, matcher: Any, settings: Settings) -> Check:
    name = "hook matcher"
    test = _matcher_test(matcher)
    if isinstance(test, str):
        return Check(name, "warn" if "cannot check" in test else "fail", f"{path}: {test}")
    catalog = settings.catalog
    missed = [n for n in _mutating_probes(settings) if not test(n)]
    if missed:
        detail = (
            f"{path}: matcher {matcher!r} lets mutating tools skip the hook: {', '.join(missed)}"
        )
        return Check(name, "fail", detail, f"re-run {_INSTALL}")
    unguarded = [
        server
        for server in covered_servers(catalog)
        if classify(probe := f"mcp__{server}__zerto_rewind_probe", {}, catalog).kind == UNLISTED
        and not test(probe)
    ]
    if unguarded:
        detail = (
            f"{path}: unlisted tools of {', '.join(unguarded)} skip the hook, so a tool the "
            "catalog does not know runs unguarded"
        )
        return Check(name, "warn", detail, f"re-run {_INSTALL}")
    current = {compile_matcher(catalog), compile_matcher(catalog, all_tools=True)}
    same = "" if matcher in current else "; differs from what install writes now (still safe)"
    return Check(name, "pass", f"{path}: every mutating tool starts the hook{same}")


def _matcher_test(matcher: Any) -> Callable[[str], bool] | str:
    """How Claude Code applies ``matcher`` to a tool name, or a problem."""
    if matcher is None or matcher in ("", "*"):
        return lambda _name: True
    if not isinstance(matcher, str):
        return f"the matcher is {matcher!r}, not a string"
    if _EXACT_LIST.match(matcher):
        names = {part.strip() for part in re.split(r"[,|]", matcher)}
        return lambda name: name in names
    try:
        compiled = re.compile(matcher)
    except re.error as exc:
        return f"cannot check the matcher {matcher!r} with Python's re ({exc}); check it by hand"
    return lambda name: compiled.search(name) is not None


def _mutating_probes(settings: Settings) -> list[str]:
    """Each tools name, and for a glob a few names it matches that classify() calls mutating."""
    probes: list[str] = []
    for key in settings.catalog.tools:
        samples = [key.replace("?", "x").replace("*", fill) for fill in ("", "x", "_probe_")]
        probes += [
            s for s in dict.fromkeys(samples) if classify(s, {}, settings.catalog).kind == MUTATING
        ]
    return probes


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
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind doctor``; exit 1 when any check failed."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    files: list[str] = list(args.settings)
    if args.project:
        files.append(os.path.join(args.project, ".claude", "settings.json"))
    if args.user:
        home = env.get("HOME") or os.path.expanduser("~")
        files.append(os.path.join(home, ".claude", "settings.json"))
    checks = run_checks(config=args.config, settings_files=files or None, env=env)
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        report = {"ok": not failed, "checks": [c.to_json() for c in checks]}
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        _print(checks)
    return 1 if failed else 0


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
