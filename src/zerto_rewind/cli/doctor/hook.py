"""The doctor's checks of the host settings files: is the hook installed so that it guards?

For each Claude Code settings file: the hook is there once, hooks are not
disabled, its command starts (``--help`` is run to prove it), its timeout
leaves the guard its budget, ``onFailure`` blocks, its matcher sends every
mutating tool of the catalog to the hook, and it is registered for the post events
that record each change's result.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...config.loader import file_sha256
from ...config.settings import DEFAULT_GUARD_TIMEOUT_S, CatalogSettings, Settings
from ...core.catalog import MUTATING, UNLISTED, classify
from ...errors import ConfigError
from ...hooks.standalone import LEGACY_LAUNCH_CODE
from ...hostconfig.install.matcher import SELF_TOOLS, compile_matcher, covered_servers
from ...hostconfig.install.settings_file import (
    POST_EVENTS,
    find_our_hooks,
    handler_command,
    is_thin_hook,
    read_settings,
    required_margin,
)
from .check import Check

__all__ = [
    "COMMAND_PROBE_TIMEOUT_S",
    "SettingsFile",
    "hook_config",
    "host_checks",
    "installed_matchers",
    "interpreter_problems",
    "matcher_test",
    "on_failure_check",
    "results_check",
    "timeout_check",
    "unlisted_past_matcher",
]

# Claude Code's default timeout for a command hook when the entry sets none.
HOST_DEFAULT_TIMEOUT_S = 600.0
# The command is run with --help to prove the interpreter finds the package.
COMMAND_PROBE_TIMEOUT_S = 30.0
_EXACT_LIST = re.compile(r"^[A-Za-z0-9_\- ,|]*$")
_INSTALL = "zerto-rewind install claude-code --project DIR (or --user) --config CONFIG"


@dataclass
class SettingsFile:
    """One host settings file: its JSON, why it cannot be read, and our hooks in it."""

    path: str
    explicit: bool
    data: dict[str, Any] | None
    problem: str
    hooks: list[tuple[dict[str, Any], dict[str, Any]]]

    @classmethod
    def read(cls, path: str, *, explicit: bool) -> SettingsFile:
        """Read ``path``; a missing or broken file is recorded in ``problem``, not raised."""
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            return cls(path, explicit, None, f"{path} does not exist", [])
        try:
            data, _text = read_settings(path)
        except ConfigError as exc:
            return cls(path, explicit, None, str(exc), [])
        return cls(path, explicit, data, "", find_our_hooks(data))


def installed_matchers(hosts: list[SettingsFile]) -> list[Callable[[str], bool]] | None:
    """How each installed hook's matcher tests a tool name; None when no hook is installed.

    A matcher that cannot be checked here counts as matching (its own check warns).
    """
    if not any(host.hooks for host in hosts):
        return None
    tests: list[Callable[[str], bool]] = []
    for host in hosts:
        for entry, _handler in host.hooks:
            test = matcher_test(entry.get("matcher"))
            tests.append((lambda _name: True) if isinstance(test, str) else test)
    return tests


def hook_config(hosts: list[SettingsFile]) -> tuple[str, str] | None:
    """(config, settings file) of the first installed hook that names its config."""
    for host in hosts:
        for _entry, handler in host.hooks:
            try:
                config = handler_command(handler).config_path
            except ValueError:
                continue
            if config:
                return config, host.path
    return None


def host_checks(
    hosts: list[SettingsFile],
    settings: Settings | None,
    config: str,
    thin: Callable[[str, dict[str, Any], dict[str, Any]], list[Check]] | None = None,
) -> list[Check]:
    """Whether the hook is installed, and each installed hook's command, timeout and matcher.

    ``thin`` checks a thin hook (one that asks the guard service; :mod:`.thin`).
    """
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
            if thin is not None and is_thin_hook(handler):
                checks += thin(host.path, entry, handler)
                continue
            checks += _hook_checks(host.path, entry, handler, settings, config)
        if host.hooks:  # standalone or thin: each records results after the call
            checks.append(results_check(host.path, host.data))
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


def results_check(path: str, data: dict[str, Any]) -> Check:
    """Whether the hook is registered for each post event, so each change's result is
    recorded; a warning otherwise (the guard still guards, ``session show`` shows
    ``not recorded``)."""
    name = "hook results"
    missing = [event for event in POST_EVENTS if not find_our_hooks(data, event)]
    if not missing:
        return Check(name, "pass", f"{path}: {', '.join(POST_EVENTS)} record each change's result")
    detail = (
        f"{path}: the hook is not registered for {', '.join(missing)}, so the results of the "
        "changes it lets through are not recorded (session show says 'not recorded')"
    )
    return Check(name, "warn", detail, f"re-run {_INSTALL}")


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
        timeout_check(path, handler, budget, assumed=settings is None),
        on_failure_check(path, handler),
    ]
    if settings is not None:
        checks.append(_matcher_check(path, entry.get("matcher"), settings))
    return checks


def _command_check(path: str, handler: dict[str, Any], config: str) -> Check:
    name = "hook command"
    if handler.get("type", "command") != "command":
        return Check(name, "fail", f"{path}: hook type is {handler.get('type')!r}", "reinstall")
    if handler.get("async") is True:
        detail = f"{path}: the hook is async, so it cannot stop a call"
        return Check(name, "fail", detail, 'remove "async": true (or reinstall)')
    reinstall = f"re-run {_INSTALL}"
    try:
        parsed = handler_command(handler)
    except ValueError as exc:
        return Check(name, "fail", f"{path}: {exc}", reinstall)
    argv = parsed.argv()
    config_used = parsed.config_path
    if LEGACY_LAUNCH_CODE in argv:
        # Checked before the probe, which would only say that the module is missing.
        detail = (
            f"{path}: the hook uses the old import path zerto_rewind.hook, which this version "
            "no longer has: the hook cannot start, and guards nothing"
        )
        return Check(name, "fail", detail, reinstall)
    problems = interpreter_problems(parsed.launcher)
    if config_used is not None and not os.path.isabs(config_used):
        problems.append(f"the config {config_used!r} is not an absolute path")
    elif config_used is not None and not os.path.isfile(config_used):
        problems.append(f"the config {config_used} does not exist")
    if problems:
        detail = f"{path}: " + "; ".join(problems) + " — a hook that cannot start guards nothing"
        return Check(name, "fail", detail, reinstall)
    probe = _probe(argv)
    if probe:
        return Check(name, "fail", f"{path}: {probe}", reinstall)
    if config_used is None:
        detail = (
            f"{path}: the command names no --config, so it depends on ZERTO_REWIND_CONFIG "
            "being set in Claude Code's environment"
        )
        return Check(name, "warn", detail, reinstall)
    if os.path.abspath(config_used) != os.path.abspath(config):
        detail = f"{path}: the hook uses {config_used}, but this report checked {config}"
        return Check(name, "warn", detail, f"run zerto-rewind doctor --config {config_used}")
    pinned = _pin_check(path, config_used, parsed.config_sha256)
    if pinned is not None:
        return pinned
    detail = f"{path}: {shlex.join(argv)} starts; the config matches its pin"
    return Check(name, "pass", detail)


def interpreter_problems(launcher: Sequence[str]) -> list[str]:
    """Why the hook command's interpreter cannot start the hook safely, if it cannot (else none).

    ``launcher``: the command's words before its options (``python -S -P -c CODE hook``).
    """
    program = launcher[0] if launcher else ""
    if not os.path.isabs(program):
        return [f"the interpreter {program!r} is not an absolute path (it depends on PATH)"]
    if not os.access(program, os.X_OK):
        return [f"the interpreter {program} does not exist or is not executable"]
    if "-c" in launcher and not _safe_path(launcher[1 : launcher.index("-c")]):
        # The host runs the hook in the agent's working directory; without -P (or -I)
        # Python imports from there first, so a file the agent plants runs as the guard.
        return [
            "the interpreter starts without -P, so a module in the agent's working "
            "directory would be imported before the guard's own"
        ]
    return []


def _safe_path(flags: Sequence[str]) -> bool:
    """Whether Python's short flags include -P or -I (no working directory on sys.path)."""
    short = (flag[1:] for flag in flags if flag.startswith("-") and not flag.startswith("--"))
    return any("P" in letters or "I" in letters for letters in short)


def _pin_check(path: str, config: str, pin: str | None) -> Check | None:
    """A hook without a pin trusts any config; one whose pin differs denies every call."""
    name = "hook command"
    if pin is None:
        detail = (
            f"{path}: the hook does not pin its config (installed by an older zerto-rewind), "
            "so whoever can write the config can switch the guard off mid-session"
        )
        return Check(name, "warn", detail, f"re-run {_INSTALL}; it writes the pin")
    try:
        actual = file_sha256(config)
    except OSError as exc:
        actual = f"unreadable ({exc.strerror or exc})"
    if actual != pin.lower():
        detail = (
            f"{path}: the config {config} changed since install (SHA-256 {actual}, the hook "
            f"pins {pin}), so the hook denies every call it sees"
        )
        fix = f"if the change is intended, re-run {_INSTALL} to accept it; else restore the config"
        return Check(name, "fail", detail, fix)
    return None


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


def timeout_check(path: str, handler: dict[str, Any], budget: float, *, assumed: bool) -> Check:
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


def on_failure_check(path: str, handler: dict[str, Any]) -> Check:
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
    test = matcher_test(matcher)
    if isinstance(test, str):
        return Check(name, "warn" if "cannot check" in test else "fail", f"{path}: {test}")
    catalog = settings.catalog
    missed = [n for n in _mutating_probes(settings) if not test(n)]
    if missed:
        detail = (
            f"{path}: matcher {matcher!r} lets mutating tools skip the hook: {', '.join(missed)}"
        )
        return Check(name, "fail", detail, f"re-run {_INSTALL}")
    unguarded = unlisted_past_matcher(catalog, test)
    if unguarded:
        detail = (
            f"{path}: unlisted tools of {', '.join(unguarded)} skip the hook, so a tool the "
            "catalog does not know runs unguarded"
        )
        return Check(name, "warn", detail, f"re-run {_INSTALL}")
    unwatched = [t for t in SELF_TOOLS if not test(t)]
    if settings.guard.protect_self and unwatched:
        detail = (
            f"{path}: guard.protect_self is on, but {', '.join(unwatched)} calls skip the hook, "
            "so nothing stops them writing the guard's own files"
        )
        return Check(name, "warn", detail, f"re-run {_INSTALL}")
    current = {
        compile_matcher(catalog, all_tools=every, self_tools=own)
        for every in (False, True)
        for own in ((), SELF_TOOLS)
    }
    same = "" if matcher in current else "; differs from what install writes now (still safe)"
    return Check(name, "pass", f"{path}: every mutating tool starts the hook{same}")


def unlisted_past_matcher(catalog: CatalogSettings, test: Callable[[str], bool]) -> list[str]:
    """The catalog's servers whose unlisted tools the matcher ``test`` lets skip the hook."""
    return [
        server
        for server in covered_servers(catalog)
        if classify(probe := f"mcp__{server}__zerto_rewind_probe", {}, catalog).kind == UNLISTED
        and not test(probe)
    ]


def matcher_test(matcher: Any) -> Callable[[str], bool] | str:
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
