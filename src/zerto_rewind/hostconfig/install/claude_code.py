"""``zerto-rewind install claude-code``: merge the guard hook into Claude Code's settings.

Each install path reads what it needs (the config, the MCP configs, the settings
file, the service's catalog), plans with :mod:`.install_plan` and hands the plan to
:func:`apply_plan`, which backs up what it changes and writes atomically, or prints
the plan for ``--dry-run``. It refuses a config that does not load and a settings
file that is not JSON. The command's options are parsed in
:mod:`zerto_rewind.cli.install_claude_code`.

With ``--service unix:PATH`` it also refuses a socket that someone other than the
guard service could put in place (:mod:`.install_socket`); it writes the service's
uid into the hook command (``--service-user``), and the hook sends nothing to a
listener of any other uid.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Mapping

from ...config.loader import file_sha256, load_config
from ...config.settings import config_path, home_dir
from ...errors import ConfigError
from ..claude import McpSource, claude_json_path, read_sources
from .catalog_client import ServiceCatalog, fetch_catalog, service_options
from .managed import (
    managed_config_path,
    place_config,
    require_root,
    secure_root_file,
    service_owner,
)
from .plan import (
    ConfigPlacement,
    CurrentFile,
    FileChange,
    InstallOptions,
    InstallPlan,
    InstallRefused,
    check_service_options,
    plan_hook,
    plan_managed_config,
    plan_thin_hook,
)
from .report import InstallReport
from .settings_file import managed_settings_file, read_settings, settings_file, write_settings
from .socket_trust import socket_identity, user_name

__all__ = ["apply_plan", "install", "reach_service", "read_current"]


def install(
    options: InstallOptions, env: Mapping[str, str], report: InstallReport | None = None
) -> None:
    """Install the hook as ``options`` say; InstallRefused (or another ZertoRewindError) when not.

    ``env`` holds ``ZERTO_REWIND_CONFIG`` (the command puts ``--config`` there) and ``HOME``;
    ``report`` (default: lines on stdout) is told what was written.
    """
    report = report or InstallReport("claude-code")
    if options.managed:
        _install_managed(options, env, report)
    elif options.service:
        _install_thin(options, env, report)
    else:
        _install_hook(options, env, report)
    report.finish()


def apply_plan(plan: InstallPlan, *, dry_run: bool, report: InstallReport) -> None:
    """Write what ``plan`` changes (backing up each file it replaces) and report it.

    With ``dry_run``, print the new settings on stdout and the summary on stderr instead.
    """
    if dry_run:
        report.dry_run(plan.settings.path, plan.settings.text)
        report.say(["dry run, nothing written", *plan.summary], err=True)
        return
    earlier = [_write(change, report) for change in plan.before]
    if not plan.settings.changed:
        if not report.written:
            report.outcome = "unchanged"
        report.say(["already installed, nothing to change", *plan.summary])
        return
    backup = _write(plan.settings, report)
    lines = [f"installed {plan.what}", *plan.summary]
    lines += [f"backup:   {saved}" for saved in (backup, *earlier) if saved]
    if plan.check:
        lines.append(plan.check)
    report.say(lines)


def read_current(path: str) -> CurrentFile:
    """The JSON settings file at ``path`` as it is now (ConfigError when it is no JSON object)."""
    data, text = read_settings(path)
    return CurrentFile(path, data, text)


# ------------------------------------------------------------------ the paths


def _install_hook(options: InstallOptions, env: Mapping[str, str], report: InstallReport) -> None:
    config = config_path(env)  # absolute, from --config or ZERTO_REWIND_CONFIG
    try:
        settings = load_config(env)
    except ConfigError as exc:
        msg = f"{exc}\nNot installed: fix the config first (a broken one denies every call)."
        raise InstallRefused(msg) from None
    python = _python(options)
    mcp = None
    if options.with_mcp_server:
        project = os.path.abspath(os.path.expanduser(options.project or "."))
        mcp_path = claude_json_path(env) if options.user else os.path.join(project, ".mcp.json")
        mcp = read_current(mcp_path)
    plan = plan_hook(
        options,
        settings,
        config=config,
        python=python,
        pin=_pin(config),
        sources=_mcp_sources(options, env),
        current=read_current(_settings_path(options, env)),
        mcp=mcp,
    )
    apply_plan(plan, dry_run=options.dry_run, report=report)


def _install_thin(options: InstallOptions, env: Mapping[str, str], report: InstallReport) -> None:
    """``--service URL``: the thin hook, matched on the service's own catalog."""
    check_service_options(options)
    python = _python(options)
    _, remote, service_uid, identity = reach_service(
        options.service or "",
        service_user=options.service_user,
        agent_user=options.agent_user,
        token_file=options.token_file,
        ca_file=options.ca_file,
        managed=options.managed,
    )
    plan = plan_thin_hook(
        options,
        remote,
        python=python,
        current=read_current(_settings_path(options, env)),
        sources=None if options.managed else _mcp_sources(options, env),
        service_uid=service_uid,
        identity=identity,
    )
    apply_plan(plan, dry_run=options.dry_run, report=report)


def reach_service(
    service: str,
    *,
    service_user: str | None,
    agent_user: str | None,
    token_file: str | None,
    ca_file: str | None,
    managed: bool = False,
) -> tuple[dict[str, str], ServiceCatalog, int | None, str]:
    """(the client's options, the service's catalog, the uid it must run as, a summary line).

    Every thin hook's installer asks the service this way: on a unix socket its
    owner is checked (:func:`.install_socket.socket_identity`) before its catalog
    is read. InstallRefused, saying what to do, when it cannot be trusted or reached.
    """
    service_uid: int | None = None
    identity = ""
    if service.startswith("unix:"):
        try:
            service_uid, identity = socket_identity(
                service[5:], service_user=service_user, agent_user=agent_user
            )
        except InstallRefused as exc:
            msg = f"{exc}\nNot installed."
            raise InstallRefused(msg) from None
    elif service_user and not managed:
        msg = (
            "--service-user is checked on a unix socket only: an https service is told from "
            "another by its certificate (--ca-file)"
        )
        raise InstallRefused(msg)
    opts = service_options(
        service,
        token_file=os.path.abspath(token_file) if token_file else None,
        ca_file=os.path.abspath(ca_file) if ca_file else None,
        service_user=None if service_uid is None else str(service_uid),
    )
    try:
        remote = fetch_catalog(opts)
    except ConfigError as exc:
        msg = (
            f"{exc}\nNot installed: start the service (zerto-rewind gateway --socket PATH, or "
            "--listen), or check the URL, --service-user, --token-file and --ca-file."
        )
        raise InstallRefused(msg) from None
    return opts, remote, service_uid, identity


def _install_managed(
    options: InstallOptions, env: Mapping[str, str], report: InstallReport
) -> None:
    """``--managed``: the hook in Claude Code's managed settings, the config root's."""
    why = require_root()
    if why:
        raise InstallRefused(why)
    if options.with_mcp_server:
        msg = (
            "--with-mcp-server does not go with --managed: register zerto-rewind's MCP server "
            "per user, or reach the guard through the gateway"
        )
        raise InstallRefused(msg)
    root = os.path.abspath(options.root or "/")
    managed_file = (
        os.path.abspath(options.managed_file)
        if options.managed_file
        else managed_settings_file(root)
    )
    options = dataclasses.replace(options, managed_file=managed_file)
    dest = managed_config_path(root)
    notes: list[str] = []
    if options.service:
        if options.config:
            notes += _place_service_config(options, env, dest, report)
        _install_thin(options, env, report)
    else:
        if options.service_user:
            msg = "--service-user goes with --service (the service's config)"
            raise InstallRefused(msg)
        source = config_path(env)
        try:
            settings = load_config(env)
        except ConfigError as exc:
            msg = f"{exc}\nNot installed: fix the config first (a broken one denies every call)."
            raise InstallRefused(msg) from None
        placement = plan_managed_config(options, settings, source=source, dest=dest)
        notes += _place(placement, dry_run=options.dry_run, report=report)
        if not options.dry_run:  # the hook command names the root-owned copy
            env = {**env, "ZERTO_REWIND_CONFIG": dest}
        # The agents' MCP configs are in their own homes, not root's: doctor --as-user reads them.
        _install_hook(dataclasses.replace(options, force=True), env, report)
    if not options.dry_run and os.path.exists(managed_file):
        secure_root_file(os.path.dirname(managed_file), 0o755)
        secure_root_file(managed_file, 0o644)
    if options.allow_managed_hooks_only:
        notes.append("policy:   allowManagedHooksOnly: true (user and project hooks are off)")
    notes.append(
        "check it with: zerto-rewind doctor "
        f"--managed-file {shlex.quote(managed_file)} --as-user AGENT_USER"
    )
    report.say(notes, err=options.dry_run)


def _place_service_config(
    options: InstallOptions, env: Mapping[str, str], dest: str, report: InstallReport
) -> list[str]:
    """``--managed --service --config``: the service's config, root-owned at ``dest``."""
    try:
        settings = load_config(env)
    except ConfigError as exc:
        msg = f"{exc}\nNot installed: fix the service's config first."
        raise InstallRefused(msg) from None
    owner = None
    if options.service_user:
        name = user_name(options.service_user)
        if name is None:
            msg = f"--service-user {options.service_user}: no such user"
            raise InstallRefused(msg)
        owner = service_owner(name, settings)
    placement = plan_managed_config(
        options, settings, source=config_path(env), dest=dest, owner=owner
    )
    return _place(placement, dry_run=options.dry_run, report=report)


# ------------------------------------------------------------------ reading and writing


def _python(options: InstallOptions) -> str:
    """The interpreter the hook command names; refuses a missing ``--project`` first."""
    if options.project is not None and not os.path.isdir(os.path.expanduser(options.project)):
        msg = f"--project {options.project}: no such directory"
        raise InstallRefused(msg)
    if not sys.executable:
        msg = "cannot tell which Python runs zerto-rewind (sys.executable is empty)"
        raise InstallRefused(msg)
    # abspath, not realpath: a venv's bin/python is a symlink, and only the venv
    # path makes the interpreter find the venv's site-packages.
    return os.path.abspath(sys.executable)


def _settings_path(options: InstallOptions, env: Mapping[str, str]) -> str:
    return options.managed_file or settings_file(
        project=options.project, user=options.user, home=home_dir(env)
    )


def _pin(config: str) -> str:
    """The config's SHA-256, written into the hook command: the hook trusts only these bytes."""
    try:
        return file_sha256(config)
    except OSError as exc:
        msg = f"cannot read the config to pin it: {exc.strerror or exc}"
        raise ConfigError(msg, path=config) from None


def _mcp_sources(options: InstallOptions, env: Mapping[str, str]) -> list[McpSource]:
    """The MCP server configs of the project or user the hook is installed for."""
    return read_sources(
        env,
        projects=[options.project] if options.project else [],
        every_local_scope=bool(options.user),
        extra_files=list(options.mcp_config),
    )


def _place(placement: ConfigPlacement, *, dry_run: bool, report: InstallReport) -> list[str]:
    """Copy the config as planned (not for a dry run); its note, and its backup's."""
    placed = place_config(
        placement.source,
        placement.dest,
        uid=placement.uid,
        gid=placement.gid,
        mode=placement.mode,
        dry_run=dry_run,
    )
    if dry_run:
        report.would_write.append(placement.dest)
    else:
        report.wrote(placement.dest, placed.backup)
    return [placement.note, *([f"backup:   {placed.backup}"] if placed.backup else [])]


def _write(change: FileChange, report: InstallReport) -> str | None:
    """Back up and replace the file when its text changes; returns the backup path."""
    if not change.changed:
        return None
    backup = write_settings(change.path, change.text, original=change.original)
    report.wrote(change.path, backup)
    return backup
