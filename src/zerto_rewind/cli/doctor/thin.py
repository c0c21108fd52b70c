"""The doctor's checks of a thin hook: does it start, and does the guard service answer?

A thin hook (``install claude-code --service URL``) names no config: the service
classifies and tags with its own. So its command is probed by importing the
thin hook with the command's interpreter, the service is asked for its catalog
(``GET /v1/catalog``, through the hook's own client), the hook's budget must
exceed the service's guard budget, the host's timeout the hook's budget, and the
matcher must start the hook for every tool the service's catalog calls mutating.

On a unix socket the hook sends nothing to a listener that does not run as its
``--service-user``: a hook without one denies every call, and so does one whose
socket another user owns (the guard service moved to another user, or someone
else's socket in its place). Both fail here; the listener's own uid is checked
again by the catalog request, through the hook's own client.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from typing import Any

from ...config.settings import CatalogSettings
from ...core.catalog import MUTATING, classify
from ...errors import ConfigError
from ...fsaccess import uid_of, user_label
from ...hooks.claude_code import PROTOCOL
from ...hostconfig.hook_command import HookCommand
from ...hostconfig.install.catalog_client import THIN_MARGIN_S, ServiceCatalog, fetch_catalog
from ...hostconfig.install.matcher import compile_matcher
from ...hostconfig.install.settings_file import handler_command
from .check import Check
from .hook import (
    COMMAND_PROBE_TIMEOUT_S,
    interpreter_problems,
    matcher_test,
    on_failure_check,
    timeout_check,
    unlisted_past_matcher,
)
from .sockets import socket_directory_checks

__all__ = ["identity_check", "thin_hook_checks"]

_REINSTALL = (
    "re-run zerto-rewind install claude-code --service URL (--project DIR, --user or --managed)"
)


def thin_hook_checks(path: str, entry: dict[str, Any], handler: dict[str, Any]) -> list[Check]:
    """Command, service, timeout, onFailure and matcher of one thin hook."""
    try:
        command: HookCommand | None = handler_command(handler)
    except ValueError:
        command = None
    checks = [_command_check(path, handler, command)]
    remote: ServiceCatalog | None = None
    service = command.service if command else None
    opts = command.service_options() if command else {}
    ask = opts
    if service and service.startswith("unix:"):
        identity, ask = identity_check(path, service[5:], opts)
        checks.append(identity)
        checks += socket_directory_checks(service[5:], f"{path}: the hook's {service}")
    if service:
        try:
            remote = fetch_catalog(ask)
        except ConfigError as exc:
            fix = (
                "start the service (zerto-rewind gateway --socket PATH / --listen), and check "
                "the socket's group and mode or the token and CA files"
            )
            checks.append(Check("guard service", "fail", f"{path}: {exc}", fix))
        else:
            detail = (
                f"{path}: {service} answers: {len(remote.catalog.tools)} tools, "
                f"{len(remote.catalog.read_only)} read-only entries, guard budget "
                f"{remote.guard_timeout_s:g} s"
            )
            checks.append(Check("guard service", "pass", detail))
    budget = command.budget_s(PROTOCOL.budget_s) if command else PROTOCOL.budget_s
    checks.append(timeout_check(path, handler, budget, assumed=False))
    if remote is not None and budget < remote.guard_timeout_s + 1.0:
        detail = (
            f"{path}: the hook's budget {budget:g} s does not exceed the service's guard budget "
            f"{remote.guard_timeout_s:g} s, so the hook gives up before the service answers"
        )
        fix = f"{_REINSTALL} (it sets --budget to the service's budget + {THIN_MARGIN_S:g} s)"
        checks.append(Check("hook budget", "fail", detail, fix))
    checks.append(on_failure_check(path, handler))
    if remote is not None:
        checks.append(_matcher_check(path, entry.get("matcher"), remote.catalog))
    return checks


def identity_check(
    path: str, socket: str, opts: dict[str, str], reinstall: str = _REINSTALL
) -> tuple[Check, dict[str, str]]:
    """Does the socket belong to the hook's ``--service-user``? And the options to ask it with.

    Without ``--service-user`` the catalog is still read, from the socket's owner, so
    the remaining checks can run; the hook itself denies every call then.
    """
    name = "service identity"
    try:
        owner: int | None = os.stat(socket).st_uid
    except OSError:
        owner = None  # the guard service check says it cannot connect
    expected = opts.get("service_user", "")
    if not expected:
        detail = (
            f"{path}: the hook names no --service-user, so it cannot tell the guard service "
            f"from another listener on {socket} and denies every call"
        )
        ask = opts if owner is None else {**opts, "service_user": str(owner)}
        return Check(name, "fail", detail, f"{reinstall}: it records the service's user"), ask
    uid = uid_of(expected)
    if uid is None:
        detail = f"{path}: the hook's --service-user {expected!r} is no user of this machine"
        return Check(name, "fail", detail, reinstall), opts
    if owner is None:
        detail = f"{path}: cannot see who owns {socket}; the hook expects {user_label(uid)}"
        return Check(name, "warn", detail), opts
    if owner != uid:
        detail = (
            f"{path}: {socket} belongs to {user_label(owner)}, not to the hook's --service-user "
            f"{user_label(uid)}: the hook denies every call, or someone else's socket stands in "
            "the service's place"
        )
        fix = (
            "find who serves the socket; if it is not the guard service, stop it and check who "
            "can write the socket's directory (doctor --as-user NAME). If the service moved to "
            f"another user, {reinstall}"
        )
        return Check(name, "fail", detail, fix), opts
    detail = (
        f"{path}: {socket} belongs to the hook's --service-user {user_label(uid)}; the hook "
        "sends nothing to a listener of another uid"
    )
    return Check(name, "pass", detail), opts


def _command_check(path: str, handler: Mapping[str, Any], command: HookCommand | None) -> Check:
    name = "hook command"
    if handler.get("async") is True:
        return Check(
            name, "fail", f"{path}: the hook is async, so it cannot stop a call", _REINSTALL
        )
    if command is None:
        return Check(name, "fail", f"{path}: the command cannot be read", _REINSTALL)
    argv = command.argv()
    opts = command.service_options()
    program = command.program
    problems = interpreter_problems(command.launcher)
    service = opts.get("service", "")
    if not service:
        problems.append("it names no --service")
    elif not service.startswith(("unix:/", "https://")):
        problems.append(f"the service {service!r} is neither unix:/path nor https://host:port")
    for flag in ("token_file", "ca_file"):
        file = opts.get(flag)
        if file and not os.path.isfile(file):
            problems.append(f"the {flag.replace('_', ' ')} {file} does not exist")
    if problems:
        detail = f"{path}: " + "; ".join(problems) + " — a hook that cannot start guards nothing"
        return Check(name, "fail", detail, _REINSTALL)
    probe = [program, "-c", "import zerto_rewind.hooks.thin"]
    try:
        done = subprocess.run(
            probe, capture_output=True, text=True, timeout=COMMAND_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, "fail", f"{path}: cannot run {program}: {exc}", _REINSTALL)
    if done.returncode != 0:
        err = (done.stderr.strip().splitlines() or ["no output"])[-1]
        detail = f"{path}: {program} cannot import the thin hook ({err})"
        return Check(name, "fail", detail, _REINSTALL)
    return Check(name, "pass", f"{path}: thin hook, {shlex.join(argv)} starts")


def _matcher_check(path: str, matcher: Any, catalog: CatalogSettings) -> Check:
    """Every tool the service's catalog calls mutating, and its servers' unlisted tools, match."""
    name = "hook matcher"
    test = matcher_test(matcher)
    if isinstance(test, str):
        return Check(name, "warn" if "cannot check" in test else "fail", f"{path}: {test}")
    probes = []
    for key in catalog.tools:
        samples = [key.replace("?", "x").replace("*", fill) for fill in ("", "x", "_probe_")]
        probes += [s for s in dict.fromkeys(samples) if classify(s, {}, catalog).kind == MUTATING]
    missed = [n for n in probes if not test(n)]
    if missed:
        detail = (
            f"{path}: matcher {matcher!r} lets tools the service guards skip the hook: "
            + ", ".join(missed)
        )
        return Check(name, "fail", detail, _REINSTALL)
    unguarded = unlisted_past_matcher(catalog, test)
    if unguarded:
        detail = f"{path}: unlisted tools of {', '.join(unguarded)} skip the hook"
        return Check(name, "warn", detail, _REINSTALL)
    current = {compile_matcher(catalog), compile_matcher(catalog, all_tools=True)}
    same = "" if matcher in current else "; differs from the service's catalog now (still safe)"
    return Check(name, "pass", f"{path}: every tool the service guards starts the hook{same}")
