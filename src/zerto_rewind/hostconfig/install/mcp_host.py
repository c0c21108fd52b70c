"""``install mcp-host``: put the gateway between an MCP host and a VM server.

It finds the VM server's entry in the host's config, moves it (credentials
included) into the gateway config's ``upstreams``, and writes the gateway in its
place: a stdio command, or with ``url`` an HTTP endpoint plus a fresh bearer
token whose digest joins ``gateway.clients``. Both files are backed up and
replaced atomically; the token is written only to the host file and printed once.

The gateway refuses to start a stdio upstream as root or as the owner of the
guard's files (:mod:`zerto_rewind.gateway.upstream_user`); ``upstream_user``
writes ``upstreams.NAME.user``, and without it the install says plainly when
the setup it wrote would be refused, and what to do. The command line is
:mod:`zerto_rewind.cli.install_mcp_host`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from ...config.parser import Parser
from ...config.settings import config_path
from ...errors import ConfigError
from ...gateway.upstream_user import ALLOW_FLAG, privileged_reason, upstream_identity
from ..entries import gateway_upstream_of
from ..files import (
    locate_server,
    read_gateway_config,
    render_host_text,
    write_gateway_config,
    write_host_config,
)
from ..move import (
    HttpGateway,
    StdioGateway,
    describe_move,
    gateway_endpoint,
    move_to_gateway,
    new_token,
)
from ..specs import HOSTS, candidate_files
from .next_steps import next_steps
from .plan import InstallTarget
from .report import InstallReport

__all__ = ["McpHostOptions", "install_mcp_host"]


@dataclass(frozen=True, kw_only=True)
class McpHostOptions(InstallTarget):
    """What ``install mcp-host`` was asked to do (the command line's options, checked)."""

    host: str
    server: str
    file: str | None = None
    url: str | None = None
    client: str | None = None
    upstream_user: str | None = None
    allow_privileged_upstream: bool = False
    dry_run: bool = False
    systemd_unit: str | None = None
    force: bool = False


def install_mcp_host(args: McpHostOptions, env: Mapping[str, str], report: InstallReport) -> int:
    """Move ``args.server`` behind the gateway (or, with ``dry_run``, say what would change)."""
    host = HOSTS[args.host]
    gateway = read_gateway_config(config_path(env))
    files = candidate_files(host, env, project=args.project, user=args.user, path=args.file)
    current = locate_server(files, args.server)
    entry = current.servers[args.server]
    urls = [gateway_endpoint(args.url, args.server)] if args.url else []
    if gateway_upstream_of(entry, args.server, urls) is not None:
        report.outcome = "unchanged"
        report.say(
            [f"{current.file.where}: {args.server!r} already reaches the gateway; nothing to do"]
        )
        return 0
    via = _gateway_entry(args, gateway.path, env)
    moved, new_gateway = move_to_gateway(
        current, args.server, gateway.data, via=via, upstream_user=args.upstream_user
    )
    text, kept = render_host_text(moved)
    summary = describe_move(args.server, current, moved, new_gateway, gateway.path, via)
    warnings = _start_warnings(args, new_gateway, gateway.path, env)
    # Before anything is written: a unit path holding another file refuses here.
    steps = next_steps(args, via, gateway.path, new_gateway, env)
    summary += [s for s in steps if not s.startswith("WARNING")]
    warnings += [s for s in steps if s.startswith("WARNING")]
    if args.dry_run:
        report.dry_run(gateway.path, None)
        report.dry_run(moved.file.path, None)
        report.say(["dry run, nothing written", *summary, *warnings])
        return 0
    # The gateway learns the upstream first: a host pointed at a gateway that
    # does not serve it yet would fail, the other order only leaves a spare upstream.
    backups = [write_gateway_config(gateway, new_gateway)]
    report.wrote(gateway.path, backups[0])
    backup_dir = os.path.join(os.path.dirname(gateway.path), "host-backups")
    http = isinstance(via, HttpGateway)
    host_backup = write_host_config(moved, text, backup_dir=backup_dir, private=http)
    report.wrote(moved.file.path, host_backup)
    if host_backup:
        backups.append(host_backup)
    lines = [f"moved {args.server!r} behind the zerto-rewind gateway", *summary]
    lines += [f"backup:      {b}" for b in backups]
    lines += _notes(args, gateway.path, backup_dir, dropped=current.had_comments and not kept)
    if args.systemd_unit:
        report.extra["systemd_unit"] = args.systemd_unit
    if isinstance(via, HttpGateway):
        report.extra["token"] = via.token
        lines.append(
            f"token for client {via.client!r} (written only to {moved.file.path}; "
            f"shown once): {via.token}"
        )
    report.say([*lines, *warnings])
    if warnings:
        sys.stderr.write("\n".join(warnings) + "\n")
    return 0


def _notes(args: McpHostOptions, gateway_path: str, backup_dir: str, *, dropped: bool) -> list[str]:
    """What a person must know about the files just written."""
    lines = []
    if dropped:
        lines.append("note:        the host file's comments were dropped (the backup keeps them)")
    lines.append(
        f"the credentials now live only in {gateway_path}; the host backup holding them is "
        f"in {backup_dir} (0600)"
    )
    if args.url and args.project is not None:
        lines.append(
            "note:        a project file now holds a bearer token: keep it out of version "
            "control (or use --user)"
        )
    return lines


def _gateway_entry(
    args: McpHostOptions, gateway_path: str, env: Mapping[str, str]
) -> StdioGateway | HttpGateway:
    """How the host will reach the gateway: an HTTP endpoint and a new token, or stdio."""
    if args.url:
        url = gateway_endpoint(args.url, args.server)
        client = args.client or _default_client(HOSTS[args.host].name, env)
        return HttpGateway(url, client, new_token())
    if not sys.executable:
        msg = (
            "cannot tell which Python runs zerto-rewind (sys.executable is empty); "
            "run it as `python3 -m zerto_rewind install mcp-host ...`"
        )
        raise ConfigError(msg)
    # abspath, not realpath: a venv's bin/python is a symlink, and only the
    # venv path makes the interpreter find the venv's site-packages.
    python = os.path.abspath(sys.executable)
    return StdioGateway(python, gateway_path, allow_privileged=args.allow_privileged_upstream)


def _start_warnings(
    args: McpHostOptions, new_gateway: dict[str, object], path: str, env: Mapping[str, str]
) -> list[str]:
    """What in the new setup the gateway will refuse to start, and what to do; [] when none.

    Judged as the gateway would (:mod:`zerto_rewind.gateway.upstream_user`),
    assuming it runs as the user running this install (the host's user, for a
    stdio gateway). An unknown ``--upstream-user`` is a ConfigError: nothing is
    written then.
    """
    settings = Parser(path, os.path.dirname(path)).settings(
        new_gateway, env, loose_permissions=False
    )
    spec = settings.upstreams[args.server]
    if spec.command is None:
        return []
    identity = upstream_identity(spec, path)
    me = os.geteuid()
    where = "the host runs the stdio gateway" if not args.url else "the gateway runs"
    if identity.switch and me not in (0, identity.uid):
        return [
            f"WARNING:     the gateway will not start {args.server!r}: {where} as uid {me} "
            f"(this user, assumed), which cannot switch to {identity.label}. Run the host (or "
            "the HTTP gateway) as root: the gateway drops to that user for the upstream only"
        ]
    reason = privileged_reason(settings, identity)
    if reason is None:
        return []
    if args.allow_privileged_upstream:
        return [f"note:        upstream {args.server!r}: {reason}; accepted by {ALLOW_FLAG}"]
    return [
        f"WARNING:     the gateway will refuse to start {args.server!r} as written: {reason} "
        f"(if {where} as this user). Re-run with --upstream-user NAME, a user of its own that "
        f"cannot read the guard's files (useradd --system --no-create-home NAME), or accept "
        f"the risk with {ALLOW_FLAG}"
    ]


def _default_client(host: str, env: Mapping[str, str]) -> str:
    user = env.get("USER") or env.get("LOGNAME") or "agent"
    return f"{user}-{host}"
