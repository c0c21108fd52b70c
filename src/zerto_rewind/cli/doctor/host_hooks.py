"""The doctor's checks of the Codex, Gemini CLI and Copilot CLI hooks (``install host-hook``).

Each is a thin client of the guard service, like Claude Code's thin hook: the
service holds the config and credentials. So, per hook found in the host's user
or project hook file: does its command name a service, does the socket belong
to its ``--service-user``, does the service answer, and does the host's own
timeout exceed the hook's budget? All three hosts let the call run when *their*
timeout fires first, so a host timeout at or below the budget is a failure. And is
the hook registered for the host's after events ("hook results"), so each change's
result is recorded?
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ...errors import ConfigError
from ...hooks.thin import DEFAULT_BUDGET_S
from ...hostconfig.hook_command import HookCommand
from ...hostconfig.hooks import (
    HOOK_HOSTS,
    POST_EVENTS,
    InstalledHook,
    hook_file,
    installed_hooks,
    missing_post_events,
)
from ...hostconfig.install.catalog_client import ServiceCatalog, fetch_catalog
from ...hostconfig.specs import HOSTS
from .check import Check
from .sockets import socket_directory_checks
from .thin import identity_check

__all__ = ["find_host_hooks", "host_hook_checks"]

# The host must outlast the hook by this much: the hook's timer answers just before
# its budget, and the host needs a moment to read the answer.
_TIMEOUT_MARGIN_S = 2.0


def find_host_hooks(
    env: Mapping[str, str], project_dirs: Sequence[str], host: str | None
) -> tuple[list[InstalledHook], list[Check]]:
    """Our hooks in every hook host's user and project files (``host`` narrows).

    The second list holds a failure for each hook file that exists but cannot be read.
    """
    found: list[InstalledHook] = []
    problems: list[Check] = []
    for name in HOOK_HOSTS:
        if host not in (None, name):
            continue
        paths = [hook_file(name, project=None, env=env)]
        paths += [hook_file(name, project=p, env=env) for p in project_dirs]
        for path in dict.fromkeys(paths):
            if not os.path.isfile(path):
                continue
            try:
                found += installed_hooks(name, path)
            except ConfigError as exc:
                fix = "fix the file by hand, then re-run zerto-rewind install host-hook " + name
                problems.append(Check(f"{name} hook", "fail", f"{path}: {exc}", fix))
    return found, problems


def host_hook_checks(hook: InstalledHook) -> list[Check]:
    """Command, service identity, service and timeout of one installed host hook."""
    label = HOSTS[hook.host].label if hook.host in HOSTS else hook.host
    reinstall = f"re-run zerto-rewind install host-hook {hook.host} --service URL"
    name = f"{hook.host} hook"
    try:
        command = HookCommand.parse(hook.command)
    except ValueError:
        command = HookCommand(())
    opts = command.service_options()
    service = command.service or ""
    if not service:
        detail = (
            f"{hook.path}: the {label} hook's command names no --service, so it denies every call"
        )
        return [Check(name, "fail", detail, reinstall)]
    checks = [Check(name, "pass", f"{hook.path}: {label} hook, asks {service}")]
    ask = dict(opts)
    if service.startswith("unix:"):
        identity, ask = identity_check(hook.path, service[5:], opts, reinstall)
        checks.append(identity)
        checks += socket_directory_checks(service[5:], f"{hook.path}: the hook's {service}")
    remote: ServiceCatalog | None = None
    try:
        remote = fetch_catalog(ask)
    except ConfigError as exc:
        fix = "start the guard service (zerto-rewind gateway --socket PATH / --listen)"
        checks.append(Check("guard service", "fail", f"{hook.path}: {exc}", fix))
    else:
        detail = f"{hook.path}: {service} answers: {len(remote.catalog.tools)} tools"
        checks.append(Check("guard service", "pass", detail))
    budget = command.budget_s(DEFAULT_BUDGET_S)
    checks.append(_timeout_check(hook, label, budget, reinstall))
    checks.append(_results_check(hook, reinstall))
    if remote is not None and budget < remote.guard_timeout_s + 1.0:
        detail = (
            f"{hook.path}: the hook's budget {budget:g} s does not exceed the service's "
            f"guard budget {remote.guard_timeout_s:g} s, so the hook denies before the "
            "service answers"
        )
        checks.append(Check("hook budget", "fail", detail, reinstall))
    return checks


def _results_check(hook: InstalledHook, reinstall: str) -> Check:
    """Whether the hook is registered for the host's after events: a warning otherwise
    (the guard still guards; ``session show`` says ``not recorded``)."""
    events = POST_EVENTS[hook.host]
    try:
        missing = missing_post_events(hook.host, hook.path)
    except ConfigError as exc:
        return Check("hook results", "warn", f"{hook.path}: {exc}", reinstall)
    if not missing:
        detail = f"{hook.path}: {', '.join(events)} record each change's result"
        return Check("hook results", "pass", detail)
    detail = (
        f"{hook.path}: the hook is not registered for {', '.join(missing)}, so the results "
        "of the changes it lets through are not recorded (session show says 'not recorded')"
    )
    return Check("hook results", "warn", detail, reinstall)


def _timeout_check(hook: InstalledHook, label: str, budget: float, reinstall: str) -> Check:
    need = budget + _TIMEOUT_MARGIN_S
    if hook.timeout_s is None:
        detail = (
            f"{hook.path}: the {label} hook has no timeout, so {label}'s default applies, "
            "which may be below the hook's budget"
        )
        return Check("hook timeout", "warn", detail, reinstall)
    if hook.timeout_s >= need:
        detail = f"{hook.path}: timeout {hook.timeout_s:g} s > the hook's budget {budget:g} s"
        return Check("hook timeout", "pass", detail)
    detail = (
        f"{hook.path}: timeout {hook.timeout_s:g} s leaves the hook's budget {budget:g} s too "
        f"little room (needs ≥ {need:g} s): {label} lets the call run when its timeout fires"
    )
    return Check("hook timeout", "fail", detail, reinstall)
