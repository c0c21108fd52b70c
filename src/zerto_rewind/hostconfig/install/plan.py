"""What ``install claude-code`` will write and say, planned without touching a file.

One pure planner per install path: :func:`plan_hook` (the hook, which reads the
config), :func:`plan_thin_hook` (``--service``: the thin hook, matched on the
service's catalog) and :func:`plan_managed_config` (``--managed``: the root-owned
copy of the config). Each takes the parsed :class:`InstallOptions` and what the
files hold now, and returns a plan; :func:`.install.apply_plan` carries it out.
A path that must not be installed raises :class:`InstallRefused`.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

from ...config.settings import Settings
from ...errors import ConfigError, UsageError
from ..claude import McpSource, defined_servers
from ..entries import zerto_rewind_role
from .catalog_client import ServiceCatalog, thin_budget
from .managed import config_credentials, with_policy
from .matcher import SELF_TOOLS, compile_matcher, covered_servers
from .plugin import MCP_SERVER_NAME
from .settings_file import (
    DEFAULT_TIMEOUT_S,
    POST_EVENTS,
    build_entry,
    build_post_entry,
    build_thin_entry,
    mcp_server_entry,
    merge,
    plan_timeout,
    render,
)

__all__ = [
    "ConfigPlacement",
    "CurrentFile",
    "FileChange",
    "InstallOptions",
    "InstallPlan",
    "InstallRefused",
    "InstallTarget",
    "ServiceTrust",
    "check_service_options",
    "check_service_url",
    "plan_hook",
    "plan_managed_config",
    "plan_thin_hook",
]


class InstallRefused(UsageError):
    """Install writes nothing, for the reason given; the command prints it after
    ``zerto-rewind install:`` and exits 1."""


@dataclass(frozen=True, kw_only=True)
class InstallTarget:
    """Which of the host's files an installer writes: a project's (``project``, its
    directory) or the user's (``cli.install_options.add_target_arguments``)."""

    project: str | None = None
    user: bool = False


@dataclass(frozen=True, kw_only=True)
class ServiceTrust:
    """How a thin hook trusts the guard service it asks: the flags that go with ``--service``
    (``cli.install_options.add_service_arguments``), which both hook installers take."""

    service_user: str | None = None
    agent_user: str | None = None
    token_file: str | None = None
    ca_file: str | None = None


@dataclass(frozen=True, kw_only=True)
class InstallOptions(InstallTarget, ServiceTrust):
    """``install claude-code``'s options, as the command parsed them."""

    managed: bool = False
    config: str | None = None
    dry_run: bool = False
    all_tools: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    mcp_config: tuple[str, ...] = ()
    with_mcp_server: bool = False
    force: bool = False
    service: str | None = None
    allow_managed_hooks_only: bool = False
    managed_file: str | None = None
    root: str | None = None


@dataclass(frozen=True)
class CurrentFile:
    """A JSON settings file as install found it: its object, and its text (None: absent)."""

    path: str
    data: dict[str, Any]
    text: str | None


@dataclass(frozen=True)
class FileChange:
    """One file install writes: the new text and what the file held (None: absent)."""

    path: str
    text: str
    original: str | None

    @property
    def changed(self) -> bool:
        return self.text != self.original


@dataclass(frozen=True)
class InstallPlan:
    """What one install writes and reports.

    ``before`` is written first, even when the settings need no change (the MCP
    server's entry); ``check`` is the closing "check it with" line, if any.
    """

    what: str
    settings: FileChange
    summary: tuple[str, ...]
    before: tuple[FileChange, ...] = ()
    check: str | None = None


@dataclass(frozen=True)
class ConfigPlacement:
    """``--managed``: the config copied to ``dest`` with this owner and mode, and its note."""

    source: str
    dest: str
    uid: int
    gid: int
    mode: int
    note: str


# ------------------------------------------------------------------ the hook


def plan_hook(
    options: InstallOptions,
    settings: Settings,
    *,
    config: str,
    python: str,
    pin: str,
    sources: list[McpSource],
    current: CurrentFile,
    mcp: CurrentFile | None = None,
) -> InstallPlan:
    """The hook that loads ``config`` (pinned to ``pin``), merged into ``current``.

    ``mcp`` is the MCP config that ``--with-mcp-server`` registers the server in.
    """
    timeout, note = plan_timeout(options.timeout, settings.guard.timeout_s)
    matcher = _config_matcher(options, settings, config)
    _refuse_undefined(sources, covered_servers(settings.catalog), options)
    # The rewind hint names zerto-rewind's MCP tool only where the host has that server.
    server = MCP_SERVER_NAME if options.with_mcp_server else _installed_server(sources)
    entry = build_entry(
        python=python,
        config=config,
        matcher=matcher,
        timeout_s=timeout,
        mcp_server=server,
        config_sha256=pin,
        settings=current.path,
        all_tools=options.all_tools,
    )
    summary = [
        f"settings: {current.path}",
        f"matcher:  {matcher}",
        f"command:  {entry['hooks'][0]['command']}",
        f"pin:      config SHA-256 {pin} (a changed config denies every call until "
        "install is run again)",
        f"timeout:  {timeout} s (guard budget {settings.guard.timeout_s:g} s), onFailure: block",
    ]
    if note:
        summary.append(f"note:     {note}")
    summary.append(f"results:  {', '.join(POST_EVENTS)} record each change's result")
    summary.append(_mcp_line(mcp, server))
    # The same command after the call: no self tools (the hook records no result for them).
    matched = compile_matcher(settings.catalog, all_tools=options.all_tools)
    post = build_post_entry(matched, entry["hooks"][0]["command"])
    before = () if mcp is None else (_server_change(mcp, python, config),)
    return InstallPlan(
        what="the zerto-rewind hook",
        settings=_settings_change(options, current, entry, post),
        summary=tuple(summary),
        before=before,
        check="check it with: zerto-rewind doctor " + _doctor_args(options, config),
    )


def _config_matcher(options: InstallOptions, settings: Settings, config: str) -> str:
    """The matcher compiled from the config's catalog; InstallRefused naming the config."""
    self_tools = SELF_TOOLS if settings.guard.protect_self else ()
    try:
        return compile_matcher(settings.catalog, all_tools=options.all_tools, self_tools=self_tools)
    except ConfigError as exc:
        msg = f"{config}: {exc.detail}"
        raise InstallRefused(msg) from None


def _mcp_line(mcp: CurrentFile | None, server: str | None) -> str:
    """What the summary says of zerto-rewind's MCP server (and so of the rewind hint)."""
    if mcp is not None:
        return f"mcp:      server {MCP_SERVER_NAME!r} (zerto-rewind serve) in {mcp.path}"
    if server:
        return f"mcp:      the rewind hint names mcp__{server}__zerto_recovery_plan"
    return "mcp:      not installed; the rewind hint names the CLI (--with-mcp-server)"


# ------------------------------------------------------------------ the thin hook


def check_service_url(service: str) -> None:
    """InstallRefused unless ``service`` is ``unix:/absolute/path`` or ``https://…``.

    Every thin hook's installer (``claude-code --service``, ``host-hook``) checks it.
    """
    if service.startswith("unix:"):
        if not os.path.isabs(service[5:]):
            msg = f"--service {service}: the socket path must be absolute"
            raise InstallRefused(msg)
    elif not service.startswith("https://"):
        msg = (
            f"--service {service}: give unix:/path/to/socket (a local service) or "
            "https://host:port (a remote gateway); plain http would carry the calls and the "
            "token in clear text"
        )
        raise InstallRefused(msg)


def check_service_options(options: InstallOptions) -> None:
    """InstallRefused when ``--service`` is malformed or comes with an option it excludes."""
    check_service_url(options.service or "")
    if options.config and not options.managed:
        msg = (
            "--config does not go with --service here: the thin hook reads no config (the "
            "service holds it, as another user); with --managed, --config names the service's "
            "config to install under /etc/zerto-rewind/"
        )
        raise InstallRefused(msg)
    if options.with_mcp_server:
        msg = (
            "--with-mcp-server does not go with --service: zerto-rewind's MCP server would need "
            "the config and the ZVM credentials, which the thin hook's user must not hold"
        )
        raise InstallRefused(msg)


def plan_thin_hook(
    options: InstallOptions,
    remote: ServiceCatalog,
    *,
    python: str,
    current: CurrentFile,
    sources: list[McpSource] | None,
    service_uid: int | None = None,
    identity: str = "",
) -> InstallPlan:
    """The thin hook for ``options.service``, matched on the service's catalog ``remote``.

    ``sources`` are the MCP configs checked for the catalog's servers (None: not
    checked, as for ``--managed``); ``service_uid`` is the uid the hook demands of
    a unix socket's server, ``identity`` the summary line saying so.
    """
    service = options.service or ""
    budget = thin_budget(remote.guard_timeout_s)
    timeout, note = plan_timeout(options.timeout, budget)
    try:
        matcher = compile_matcher(remote.catalog, all_tools=options.all_tools)
    except ConfigError as exc:
        msg = f"the service's catalog: {exc.detail}"
        raise InstallRefused(msg) from None
    if sources is not None:
        _refuse_undefined(sources, covered_servers(remote.catalog), options)
    entry = build_thin_entry(
        python=python,
        service=service,
        matcher=matcher,
        timeout_s=timeout,
        budget_s=budget,
        token_file=_absolute(options.token_file),
        ca_file=_absolute(options.ca_file),
        service_user=None if service_uid is None else str(service_uid),
    )
    summary = [
        f"settings: {current.path}",
        f"service:  {service} (its catalog compiled into the matcher; no config, no credential "
        "and no guard state on this side)",
        f"matcher:  {matcher}",
        f"command:  {entry['hooks'][0]['command']}",
        f"timeout:  {timeout} s (hook budget {budget} s, service guard budget "
        f"{remote.guard_timeout_s:g} s), onFailure: block",
    ]
    if identity:
        summary.insert(2, f"identity: {identity}")
    if note:
        summary.append(f"note:     {note}")
    summary.append(f"results:  {', '.join(POST_EVENTS)} post each change's result to the service")
    # After the call: the same command, for the catalog's mutating tools only.
    post = build_post_entry(matcher, entry["hooks"][0]["command"])
    return InstallPlan(
        what="the zerto-rewind thin hook",
        settings=_settings_change(options, current, entry, post),
        summary=tuple(summary),
        check=None if options.managed else _thin_check(options),
    )


def _thin_check(options: InstallOptions) -> str:
    """The doctor command that checks a thin hook in a project's or the user's settings."""
    project = shlex.quote(os.path.abspath(options.project or ""))
    where = "--user" if options.user else f"--project {project}"
    return f"check it with: zerto-rewind doctor {where}"


# ------------------------------------------------------------------ the managed config


def plan_managed_config(
    options: InstallOptions,
    settings: Settings,
    *,
    source: str,
    dest: str,
    owner: tuple[int, int, int, str] | None = None,
) -> ConfigPlacement:
    """Where ``--managed`` puts the config, with which owner and mode.

    With ``--service`` the config is the service's: ``owner`` is (uid, gid, mode,
    why) for ``--service-user`` (see :func:`.install_managed.service_owner`), else
    it is root's, 0600. Without, the hook reads it as the agent's user: root's,
    0644, and refused when it holds a credential.
    """
    if options.service:
        uid, gid, mode, how = owner or (0, 0, 0o600, "root's, 0600 (the service runs as root)")
        return ConfigPlacement(
            source, dest, uid, gid, mode, f"config:   {dest}, the service's: {how}"
        )
    held = config_credentials(settings)
    if held:
        msg = (
            f"{source} holds {', '.join(held)}. With --managed and no --service the hook "
            "runs as each agent's user and must read the config, so the agent could read "
            "them too (and the parser refuses such a config readable by others). Name the "
            "secret by zvm.client_secret_env / _file, or run the guard as a service "
            "(zerto-rewind gateway --socket) and install with --managed --service."
        )
        raise InstallRefused(msg)
    if options.dry_run:
        note = f"config:   would copy {source} to {dest} (root's, 0644)"
    else:
        note = f"config:   {dest} (root's, 0644: the hook reads it as the agent's user)"
    return ConfigPlacement(source, dest, 0, 0, 0o644, note)


# ------------------------------------------------------------------ shared parts


def _settings_change(
    options: InstallOptions,
    current: CurrentFile,
    entry: dict[str, Any],
    post: dict[str, Any] | None = None,
) -> FileChange:
    """``current`` with ``entry`` merged in, and ``post`` under each post event (None: our
    post entries removed), and the managed policy."""
    try:
        merged = merge(current.data, entry)
        for event in POST_EVENTS:
            merged = merge(merged, post, event)
    except ConfigError as exc:
        raise ConfigError(exc.detail, path=current.path, key=exc.key) from None
    text = render(with_policy(merged, managed_hooks_only=options.allow_managed_hooks_only))
    return FileChange(current.path, text, current.text)


def _server_change(mcp: CurrentFile, python: str, config: str) -> FileChange:
    """zerto-rewind's MCP server put into the ``mcpServers`` of ``mcp``."""
    servers = mcp.data.get("mcpServers", {})
    if not isinstance(servers, dict):
        msg = "must be an object of server name -> entry"
        raise ConfigError(msg, path=mcp.path, key="mcpServers")
    updated = {
        **mcp.data,
        "mcpServers": {**servers, MCP_SERVER_NAME: mcp_server_entry(python, config)},
    }
    return FileChange(mcp.path, render(updated), mcp.text)


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(path) if path else None


def _installed_server(sources: list[McpSource]) -> str | None:
    """The name under which a read MCP config already runs ``zerto-rewind serve``."""
    for source in sources:
        for name, entry in source.servers.items():
            if zerto_rewind_role(entry) == "serve":
                return name
    return None


def _refuse_undefined(
    sources: list[McpSource], servers: list[str], options: InstallOptions
) -> None:
    """InstallRefused when the matcher would guard servers no MCP config defines (unless
    ``--force``)."""
    undefined = _undefined_servers(sources, servers)
    if undefined and not options.force:
        raise InstallRefused(undefined + _FORCE_HINT)


def _undefined_servers(sources: list[McpSource], servers: list[str]) -> str:
    """Why the matcher would guard servers that no MCP config of this project or user defines.

    The catalog's tool names hold the server's registered name; a server the host
    registers under another name runs unguarded. Empty when every server is defined.
    """
    if not servers:
        return ""
    defined = defined_servers(sources)
    missing = [s for s in servers if s not in defined]
    if not missing:
        return ""
    read = [
        f"  {s.where}: " + (", ".join(sorted(s.servers)) or "no servers")
        for s in sources
        if s.state == "read"
    ]
    unreadable = [f"  {s.where}: {s.problem}" for s in sources if s.state == "unreadable"]
    lines = [
        f"the catalog guards MCP server(s) {', '.join(missing)} (tools mcp__<server>__…), but "
        "no MCP config of this project or user defines a server of that name, so the hook "
        "would never start for the server the agent really uses.",
        "MCP configs read:" if read else "no MCP config was found.",
        *read,
    ]
    if unreadable:
        lines += ["could not read (nothing concluded from them):", *unreadable]
    lines.append(
        "Register the server under the catalog's name, or rename the catalog's "
        "mcp__<server>__ entries to the name the host uses; for a config given to claude "
        "with --mcp-config, pass it here with --mcp-config FILE."
    )
    return "\n".join(lines)


_FORCE_HINT = "\nNot installed; or install anyway with --force."


def _doctor_args(options: InstallOptions, config: str) -> str:
    if options.managed:
        return f"--managed-file {shlex.quote(options.managed_file or '')} --as-user AGENT_USER"
    project = os.path.abspath(os.path.expanduser(options.project or "."))
    where = "--user" if options.user else f"--project {shlex.quote(project)}"
    return f"--config {shlex.quote(config)} {where}"
