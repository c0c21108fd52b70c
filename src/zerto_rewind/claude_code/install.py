"""``zerto-rewind install claude-code``: merge the guard hook into Claude Code's settings.

A thin command over :mod:`.settings_file`: it refuses a config that does not
load and a settings file that is not JSON, backs up what it changes and writes
atomically.

With ``--service unix:PATH`` it also refuses a socket that someone other than the
guard service could put in place (a directory at or above it that the agent's user
can change, judged by :mod:`.fsaccess`), and one the agent's own user serves; it
writes the service's uid into the hook command (``--service-user``), and the hook
sends nothing to a listener of any other uid.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from ..config.loader import file_sha256, load_config
from ..config.settings import config_path, home_dir
from ..errors import ConfigError, ZertoRewindError
from .fsaccess import User, access_of, lookup_user, uid_of, user_label, users_except
from .install_managed import (
    config_credentials,
    managed_config_path,
    place_config,
    require_root,
    secure_root_file,
    service_owner,
    with_policy,
)
from .matcher import SELF_TOOLS, compile_matcher, covered_servers
from .mcp_config import (
    McpSource,
    claude_json_path,
    defined_servers,
    read_sources,
    zerto_rewind_role,
)
from .plugin import MCP_SERVER_NAME
from .service import fetch_catalog, service_options, thin_budget
from .settings_file import (
    DEFAULT_TIMEOUT_S,
    build_entry,
    build_thin_entry,
    managed_settings_file,
    mcp_server_entry,
    merge,
    plan_timeout,
    read_settings,
    render,
    settings_file,
    write_settings,
)

__all__ = ["main"]


# ------------------------------------------------------------------ command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind install",
        usage="zerto-rewind install claude-code (--project DIR | --user | --managed) "
        "[--service URL | --config PATH] [options]",
        description="Install the zerto-rewind PreToolUse hook into an agent host's settings.",
        epilog="Other targets: `zerto-rewind install --help`.",
    )
    parser.add_argument("host", choices=["claude-code"], help="the agent host")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--project", metavar="DIR", help="write DIR/.claude/settings.json")
    where.add_argument("--user", action="store_true", help="write ~/.claude/settings.json")
    where.add_argument(
        "--managed",
        action="store_true",
        help="as root: write Claude Code's managed settings (/etc/claude-code/"
        "managed-settings.json), which users and projects cannot override, and a root-owned "
        "config under /etc/zerto-rewind/",
    )
    parser.add_argument(
        "--config", metavar="PATH", help="the zerto-rewind config (default: ZERTO_REWIND_CONFIG)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resulting settings, write nothing"
    )
    parser.add_argument(
        "--all-tools",
        action="store_true",
        help="run the hook for every tool that is not read-only, not just the catalog's servers",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"the host's hook timeout in seconds (default {DEFAULT_TIMEOUT_S})",
    )
    parser.add_argument(
        "--mcp-config",
        action="append",
        default=[],
        metavar="FILE",
        help="an MCP config Claude Code is started with (claude --mcp-config FILE)",
    )
    parser.add_argument(
        "--with-mcp-server",
        action="store_true",
        help="also register zerto-rewind's MCP server (serve) in the project's .mcp.json "
        "(or, with --user, ~/.claude.json); the rewind hint then names its tools",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="install even when no MCP config defines a server the catalog names",
    )
    thin = parser.add_argument_group(
        "guard service", "a thin hook that asks the guard service (zerto-rewind gateway)"
    )
    thin.add_argument(
        "--service",
        metavar="URL",
        help="unix:/path/to/socket (a local service) or https://host:port (a remote gateway): "
        "install the thin hook, which holds no ZVM credential and keeps no guard state",
    )
    thin.add_argument(
        "--service-user",
        metavar="NAME|UID",
        help="the user the guard service runs as (default: the owner of the socket): the thin "
        "hook sends nothing to a socket served by any other uid. With --managed --config, the "
        "service's config is also given to it to read",
    )
    thin.add_argument(
        "--agent-user",
        metavar="NAME",
        help="with unix:PATH: the user who runs the agent; install refuses a socket whose "
        "directory (or any above it) that user can change, or that it serves itself (default: "
        "the user running install; as root, every user but root and the service's)",
    )
    thin.add_argument("--token-file", metavar="F", help="with https: the bearer token's file")
    thin.add_argument("--ca-file", metavar="F", help="with https: the CA bundle to trust")
    managed = parser.add_argument_group("managed install (--managed, as root)")
    managed.add_argument(
        "--allow-managed-hooks-only",
        action="store_true",
        help="also set allowManagedHooksOnly: hooks of user and project settings stop running",
    )
    managed.add_argument(
        "--managed-file",
        metavar="PATH",
        help="the managed settings file (default /etc/claude-code/managed-settings.json)",
    )
    managed.add_argument(
        "--root", metavar="DIR", help="take /etc/... under DIR (tests, image builds; default /)"
    )
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["claude-plugin"]:
        from .plugin import main as plugin_main

        return plugin_main(argv[1:], env)
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.managed:
        managed_only = {
            "--allow-managed-hooks-only": args.allow_managed_hooks_only,
            "--managed-file": args.managed_file,
            "--root": args.root,
        }
        given = [flag for flag, value in managed_only.items() if value]
        if given:
            parser.error(f"{', '.join(given)} go(es) with --managed only")
    for flag, value in (("--service-user", args.service_user), ("--agent-user", args.agent_user)):
        if value and not args.service:
            parser.error(f"{flag} goes with --service")
    env = dict(os.environ if env is None else env)
    if args.config:
        env["ZERTO_REWIND_CONFIG"] = args.config
    try:
        return _install_managed(args, env) if args.managed else _install(args, env)
    except ZertoRewindError as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1


def _install(args: argparse.Namespace, env: dict[str, str]) -> int:
    if args.service:
        return _install_thin(args, env)
    config = config_path(env)  # absolute, from --config or ZERTO_REWIND_CONFIG
    try:
        settings = load_config(env)
    except ConfigError as exc:
        return _refuse(
            f"{exc}\nNot installed: fix the config first (a broken one denies every call)."
        )
    if args.project is not None and not os.path.isdir(os.path.expanduser(args.project)):
        return _refuse(f"--project {args.project}: no such directory")
    if not sys.executable:
        return _refuse("cannot tell which Python runs zerto-rewind (sys.executable is empty)")
    # abspath, not realpath: a venv's bin/python is a symlink, and only the venv
    # path makes the interpreter find the venv's site-packages.
    python = os.path.abspath(sys.executable)
    timeout, note = plan_timeout(args.timeout, settings.guard.timeout_s)
    self_tools = SELF_TOOLS if settings.guard.protect_self else ()
    try:
        matcher = compile_matcher(settings.catalog, all_tools=args.all_tools, self_tools=self_tools)
    except ConfigError as exc:
        return _refuse(f"{config}: {exc.detail}")
    sources = _mcp_sources(args, env)
    undefined = _undefined_servers(sources, covered_servers(settings.catalog))
    if undefined and not args.force:
        return _refuse(undefined + _FORCE_HINT)
    # The rewind hint names zerto-rewind's MCP tool only where the host has that server.
    server = MCP_SERVER_NAME if args.with_mcp_server else _installed_server(sources)
    home = home_dir(env)
    path = args.managed_file or settings_file(project=args.project, user=args.user, home=home)
    pin = _pin(config)
    entry = build_entry(
        python=python,
        config=config,
        matcher=matcher,
        timeout_s=timeout,
        mcp_server=server,
        config_sha256=pin,
        settings=path,
        all_tools=args.all_tools,
    )
    current, original = read_settings(path)
    try:
        merged = merge(current, entry)
    except ConfigError as exc:
        raise ConfigError(exc.detail, path=path, key=exc.key) from None
    text = render(with_policy(merged, managed_hooks_only=args.allow_managed_hooks_only))
    summary = [
        f"settings: {path}",
        f"matcher:  {matcher}",
        f"command:  {entry['hooks'][0]['command']}",
        f"pin:      config SHA-256 {pin} (a changed config denies every call until "
        "install is run again)",
        f"timeout:  {timeout} s (guard budget {settings.guard.timeout_s:g} s), onFailure: block",
    ]
    if note:
        summary.append(f"note:     {note}")
    mcp_path = ""
    if args.with_mcp_server:
        mcp_path = (
            claude_json_path(env)
            if args.user
            else os.path.join(os.path.abspath(os.path.expanduser(args.project)), ".mcp.json")
        )
        summary.append(f"mcp:      server {MCP_SERVER_NAME!r} (zerto-rewind serve) in {mcp_path}")
    elif server:
        summary.append(f"mcp:      the rewind hint names mcp__{server}__zerto_recovery_plan")
    else:
        summary.append("mcp:      not installed; the rewind hint names the CLI (--with-mcp-server)")
    if args.dry_run:
        sys.stdout.write(text)
        sys.stderr.write("\n".join(["dry run, nothing written", *summary]) + "\n")
        return 0
    mcp_backup = _register_server(mcp_path, python, config) if mcp_path else None
    if text == original:
        print("\n".join(["already installed, nothing to change", *summary]))
        return 0
    backup = write_settings(path, text, original=original)
    lines = ["installed the zerto-rewind hook", *summary]
    for saved in (backup, mcp_backup):
        if saved:
            lines.append(f"backup:   {saved}")
    lines.append("check it with: zerto-rewind doctor " + _doctor_args(args, config))
    print("\n".join(lines))
    return 0


def _install_thin(args: argparse.Namespace, env: dict[str, str]) -> int:
    """``--service URL``: the thin hook, matched on the service's own catalog."""
    service = args.service
    if service.startswith("unix:"):
        if not os.path.isabs(service[5:]):
            return _refuse(f"--service {service}: the socket path must be absolute")
    elif not service.startswith("https://"):
        return _refuse(
            f"--service {service}: give unix:/path/to/socket (a local service) or "
            "https://host:port (a remote gateway); plain http would carry the calls and the "
            "token in clear text"
        )
    if args.config and not args.managed:
        return _refuse(
            "--config does not go with --service here: the thin hook reads no config (the "
            "service holds it, as another user); with --managed, --config names the service's "
            "config to install under /etc/zerto-rewind/"
        )
    if args.with_mcp_server:
        return _refuse(
            "--with-mcp-server does not go with --service: zerto-rewind's MCP server would need "
            "the config and the ZVM credentials, which the thin hook's user must not hold"
        )
    if args.project is not None and not os.path.isdir(os.path.expanduser(args.project)):
        return _refuse(f"--project {args.project}: no such directory")
    if not sys.executable:
        return _refuse("cannot tell which Python runs zerto-rewind (sys.executable is empty)")
    python = os.path.abspath(sys.executable)
    token_file = os.path.abspath(args.token_file) if args.token_file else None
    ca_file = os.path.abspath(args.ca_file) if args.ca_file else None
    service_uid: int | None = None
    identity = ""
    if service.startswith("unix:"):
        try:
            service_uid, identity = _socket_identity(args, service[5:])
        except _Refused as exc:
            return _refuse(f"{exc}\nNot installed.")
    elif args.service_user and not args.managed:
        return _refuse(
            "--service-user is checked on a unix socket only: an https service is told from "
            "another by its certificate (--ca-file)"
        )
    opts = service_options(
        service,
        token_file=token_file,
        ca_file=ca_file,
        service_user=None if service_uid is None else str(service_uid),
    )
    try:
        remote = fetch_catalog(opts)
    except ConfigError as exc:
        return _refuse(
            f"{exc}\nNot installed: start the service (zerto-rewind gateway --socket PATH, or "
            "--listen), or check the URL, --service-user, --token-file and --ca-file."
        )
    budget = thin_budget(remote.guard_timeout_s)
    timeout, note = plan_timeout(args.timeout, budget)
    try:
        matcher = compile_matcher(remote.catalog, all_tools=args.all_tools)
    except ConfigError as exc:
        return _refuse(f"the service's catalog: {exc.detail}")
    if not args.managed:
        undefined = _undefined_servers(_mcp_sources(args, env), covered_servers(remote.catalog))
        if undefined and not args.force:
            return _refuse(undefined + _FORCE_HINT)
    entry = build_thin_entry(
        python=python,
        service=service,
        matcher=matcher,
        timeout_s=timeout,
        budget_s=budget,
        token_file=token_file,
        ca_file=ca_file,
    )
    if service_uid is not None:
        _add_service_user(entry, service_uid)
    home = home_dir(env)
    path = args.managed_file or settings_file(project=args.project, user=args.user, home=home)
    current, original = read_settings(path)
    try:
        merged = merge(current, entry)
    except ConfigError as exc:
        raise ConfigError(exc.detail, path=path, key=exc.key) from None
    text = render(with_policy(merged, managed_hooks_only=args.allow_managed_hooks_only))
    summary = [
        f"settings: {path}",
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
    if args.dry_run:
        sys.stdout.write(text)
        sys.stderr.write("\n".join(["dry run, nothing written", *summary]) + "\n")
        return 0
    if text == original:
        print("\n".join(["already installed, nothing to change", *summary]))
        return 0
    backup = write_settings(path, text, original=original)
    lines = ["installed the zerto-rewind thin hook", *summary]
    if backup:
        lines.append(f"backup:   {backup}")
    if not args.managed:
        where = "--user" if args.user else f"--project {shlex.quote(os.path.abspath(args.project))}"
        lines.append(f"check it with: zerto-rewind doctor {where}")
    print("\n".join(lines))
    return 0


def _install_managed(args: argparse.Namespace, env: dict[str, str]) -> int:
    """``--managed``: the hook in Claude Code's managed settings, the config root's."""
    why = require_root()
    if why:
        return _refuse(why)
    if args.with_mcp_server:
        return _refuse(
            "--with-mcp-server does not go with --managed: register zerto-rewind's MCP server "
            "per user, or reach the guard through the gateway"
        )
    root = os.path.abspath(args.root or "/")
    args.managed_file = (
        os.path.abspath(args.managed_file) if args.managed_file else managed_settings_file(root)
    )
    dest = managed_config_path(root)
    notes: list[str] = []
    if args.service:
        if args.config:
            try:
                settings = load_config(env)
            except ConfigError as exc:
                return _refuse(f"{exc}\nNot installed: fix the service's config first.")
            if args.service_user:
                name = _user_name(args.service_user)
                if name is None:
                    return _refuse(f"--service-user {args.service_user}: no such user")
                uid, gid, mode, how = service_owner(name, settings)
            else:
                uid, gid, mode, how = 0, 0, 0o600, "root's, 0600 (the service runs as root)"
            placed = place_config(
                config_path(env), dest, uid=uid, gid=gid, mode=mode, dry_run=args.dry_run
            )
            notes.append(f"config:   {dest}, the service's: {how}")
            if placed.backup:
                notes.append(f"backup:   {placed.backup}")
        code = _install_thin(args, env)
    else:
        if args.service_user:
            return _refuse("--service-user goes with --service (the service's config)")
        source = config_path(env)
        try:
            settings = load_config(env)
        except ConfigError as exc:
            return _refuse(
                f"{exc}\nNot installed: fix the config first (a broken one denies every call)."
            )
        held = config_credentials(settings)
        if held:
            return _refuse(
                f"{source} holds {', '.join(held)}. With --managed and no --service the hook "
                "runs as each agent's user and must read the config, so the agent could read "
                "them too (and the parser refuses such a config readable by others). Name the "
                "secret by zvm.client_secret_env / _file, or run the guard as a service "
                "(zerto-rewind gateway --socket) and install with --managed --service."
            )
        placed = place_config(source, dest, mode=0o644, dry_run=args.dry_run)
        if args.dry_run:
            notes.append(f"config:   would copy {source} to {dest} (root's, 0644)")
        else:
            env["ZERTO_REWIND_CONFIG"] = dest  # the hook command names the root-owned copy
            notes.append(f"config:   {dest} (root's, 0644: the hook reads it as the agent's user)")
        if placed.backup:
            notes.append(f"backup:   {placed.backup}")
        # The agents' MCP configs are in their own homes, not root's: doctor --as-user reads them.
        args.force = True
        code = _install(args, env)
    if code == 0 and not args.dry_run and os.path.exists(args.managed_file):
        secure_root_file(os.path.dirname(args.managed_file), 0o755)
        secure_root_file(args.managed_file, 0o644)
    if code == 0:
        if args.allow_managed_hooks_only:
            notes.append("policy:   allowManagedHooksOnly: true (user and project hooks are off)")
        notes.append(
            "check it with: zerto-rewind doctor "
            f"--managed-file {shlex.quote(args.managed_file)} --as-user AGENT_USER"
        )
        print("\n".join(notes), file=sys.stderr if args.dry_run else sys.stdout)
    return code


class _Refused(Exception):
    """Why install refuses the service's socket (for the operator)."""


def _socket_identity(args: argparse.Namespace, path: str) -> tuple[int, str]:
    """(the uid the service must run as, a summary) for the socket at ``path``.

    _Refused when the socket is missing, when the agent's user serves it, or when a
    directory at or above it lets the agent's user put its own socket there (a
    world-writable sticky directory too: the agent can create the path before the
    service does). ``--force`` does not override any of these.
    """
    try:
        owner = os.stat(path).st_uid
    except OSError as exc:
        msg = (
            f"cannot find the guard service's socket {path} ({exc.strerror or exc}): start the "
            "service (zerto-rewind gateway --socket PATH) first"
        )
        raise _Refused(msg) from None
    if args.service_user:
        uid = uid_of(args.service_user)
        if uid is None:
            msg = f"--service-user {args.service_user}: no such user"
            raise _Refused(msg)
    else:
        uid = owner
    agents, who = _agent_users(args.agent_user, uid)
    label = user_label(uid)
    if any(agent.uid == uid for agent in agents):  # as root, by default, it is left out
        msg = (
            f"the socket {path} is served by {label}, the agent's own user: a guard the agent "
            "runs can answer allow for itself. Run the guard service as another user (root, or "
            "its own, e.g. zerto-rewind) and install again"
        )
        if not args.agent_user:
            msg += "; if the agent runs as another user, name it with --agent-user NAME"
        raise _Refused(msg)
    if not args.agent_user and not args.service_user and os.geteuid() == 0 and owner != 0:
        msg = (
            f"the socket {path} belongs to {label}, not root: name the guard service's user "
            f"with --service-user {_user_name(str(uid)) or uid} to confirm it is the service's "
            "(or the agent's user with --agent-user NAME), so that install does not trust a "
            "socket the agent made"
        )
        raise _Refused(msg)
    directories = dict.fromkeys([os.path.dirname(path), os.path.dirname(os.path.realpath(path))])
    for directory in directories:
        for agent in agents:
            access = access_of(directory, agent)
            if access.write:
                msg = (
                    f"the socket {path} is in a directory that {agent.name} (the agent's user) "
                    f"can change: {access.why}. Whoever can write there can put its own socket "
                    "in the guard service's place and answer allow (a sticky directory such as "
                    "/tmp does not help: the agent can create the path before the service "  # noqa: S108
                    "starts), so --force does not override this. Serve the socket from a "
                    "directory only root or the service's user can write, every directory "
                    "above it too (e.g. /run/zerto-rewind, 0755), and install again"
                )
                raise _Refused(msg)
    summary = (
        f"{path} must be served by {label} (--service-user {uid}): the hook sends nothing to "
        f"any other listener; no directory at or above it can be changed by {who}"
    )
    return uid, summary


def _agent_users(name: str | None, service_uid: int) -> tuple[list[User], str]:
    """Who may run the agent: ``--agent-user``, else the user running install; as root, all but
    root and the service's user."""
    if name:
        try:
            user = lookup_user(name)
        except KeyError:
            msg = f"--agent-user {name}: no such user"
            raise _Refused(msg) from None
        return [user], user.name
    euid = os.geteuid()
    if euid == 0:
        return users_except({0, service_uid}), "any user but root and the service's"
    try:
        user = lookup_user(pwd.getpwuid(euid).pw_name)
    except KeyError:
        user = User(f"uid {euid}", euid, frozenset({os.getegid(), *os.getgroups()}))
    return [user], user.name


def _user_name(user: str) -> str | None:
    """The name of ``user`` (a name or a uid), None when the passwd database has no such user."""
    try:
        return pwd.getpwuid(int(user)).pw_name if user.isdigit() else pwd.getpwnam(user).pw_name
    except KeyError:
        return None


def _add_service_user(entry: dict[str, Any], uid: int) -> None:
    """Append ``--service-user UID`` to the thin hook's command (a uid: no lookup in the hook)."""
    handler = entry["hooks"][0]
    handler["command"] = f"{handler['command']} --service-user {uid}"


def _pin(config: str) -> str:
    """The config's SHA-256, written into the hook command: the hook trusts only these bytes."""
    try:
        return file_sha256(config)
    except OSError as exc:
        msg = f"cannot read the config to pin it: {exc.strerror or exc}"
        raise ConfigError(msg, path=config) from None


def _installed_server(sources: list[McpSource]) -> str | None:
    """The name under which a read MCP config already runs ``zerto-rewind serve``."""
    for source in sources:
        for name, entry in source.servers.items():
            if zerto_rewind_role(entry) == "serve":
                return name
    return None


def _register_server(path: str, python: str, config: str) -> str | None:
    """Put zerto-rewind's MCP server into the ``mcpServers`` of ``path``; returns the backup."""
    current, original = read_settings(path)
    servers = current.get("mcpServers", {})
    if not isinstance(servers, dict):
        msg = "must be an object of server name -> entry"
        raise ConfigError(msg, path=path, key="mcpServers")
    updated = {
        **current,
        "mcpServers": {**servers, MCP_SERVER_NAME: mcp_server_entry(python, config)},
    }
    text = render(updated)
    if text == original:
        return None
    return write_settings(path, text, original=original)


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


def _mcp_sources(args: argparse.Namespace, env: dict[str, str]) -> list[McpSource]:
    """The MCP server configs of the project or user the hook is installed for."""
    return read_sources(
        env,
        projects=[args.project] if args.project else [],
        every_local_scope=bool(args.user),
        extra_files=args.mcp_config,
    )


def _refuse(message: str) -> int:
    sys.stderr.write(f"zerto-rewind install: {message}\n")
    return 1


def _doctor_args(args: argparse.Namespace, config: str) -> str:
    if args.managed:
        return f"--managed-file {shlex.quote(args.managed_file)} --as-user AGENT_USER"
    project = os.path.abspath(os.path.expanduser(args.project or "."))
    where = "--user" if args.user else f"--project {shlex.quote(project)}"
    return f"--config {shlex.quote(config)} {where}"


if __name__ == "__main__":
    sys.exit(main())
