"""``zerto-rewind install mcp-host HOST``: put the gateway between an MCP host and a VM server.

A thin command over :mod:`zerto_rewind.hostconfig`: it finds the VM
server's entry in the host's config, moves it (credentials included) into the
gateway config's ``upstreams``, and writes the gateway in its place: a stdio
command, or with ``--url`` an HTTP endpoint plus a fresh bearer token whose
digest joins ``gateway.clients``. Both files are backed up and replaced
atomically; the token is written only to the host file and printed once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from ..config.settings import config_path
from ..errors import ConfigError, UsageError
from ..hostconfig.entries import gateway_upstream_of
from ..hostconfig.files import (
    locate_server,
    read_gateway_config,
    render_host_config,
    write_gateway_config,
    write_host_config,
)
from ..hostconfig.move import (
    HttpGateway,
    StdioGateway,
    describe_move,
    gateway_endpoint,
    move_to_gateway,
    new_token,
)
from ..hostconfig.specs import HOSTS, candidate_files

__all__ = ["main"]

_PROG = "zerto-rewind install mcp-host"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=(
            "Move a VM MCP server's entry (credentials included) from an agent host's config "
            "into the gateway's, and point the host at the gateway instead. "
            "See docs/gateway.md, 'Wiring hosts to the gateway'."
        ),
    )
    parser.add_argument("host", choices=sorted(HOSTS), metavar="HOST", help=", ".join(HOSTS))
    parser.add_argument(
        "--server", required=True, metavar="NAME", help="the VM server entry to move"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="DIR", help="the host's project config in DIR")
    where.add_argument("--user", action="store_true", help="the host's user config")
    where.add_argument(
        "--file", metavar="PATH", help="this host config file (where the default path is wrong)"
    )
    parser.add_argument(
        "--gateway-config",
        metavar="PATH",
        help="the gateway's config, mode 0600 (default: ZERTO_REWIND_CONFIG)",
    )
    parser.add_argument(
        "--url",
        metavar="URL",
        help="the HTTP gateway, http(s)://HOST:PORT (default: run the gateway over stdio)",
    )
    parser.add_argument(
        "--client", metavar="NAME", help="with --url: the client name in gateway.clients"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would change (secrets hidden)"
    )
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install mcp-host``; returns the exit code."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    if args.gateway_config:
        env["ZERTO_REWIND_CONFIG"] = args.gateway_config
    if args.client and not args.url:
        msg = "--client names an HTTP client; give --url too"
        raise UsageError(msg)
    return _install(args, env)


def _install(args: argparse.Namespace, env: dict[str, str]) -> int:
    host = HOSTS[args.host]
    gateway = read_gateway_config(config_path(env))
    files = candidate_files(host, env, project=args.project, user=args.user, path=args.file)
    current = locate_server(files, args.server)
    entry = current.servers[args.server]
    urls = [gateway_endpoint(args.url, args.server)] if args.url else []
    if gateway_upstream_of(entry, args.server, urls) is not None:
        print(f"{current.file.where}: {args.server!r} already reaches the gateway; nothing to do")
        return 0
    via: StdioGateway | HttpGateway
    if args.url:
        url = gateway_endpoint(args.url, args.server)
        client = args.client or _default_client(host.name, env)
        via = HttpGateway(url, client, new_token())
    else:
        if not sys.executable:
            msg = (
                "cannot tell which Python runs zerto-rewind (sys.executable is empty); "
                "run it as `python3 -m zerto_rewind install mcp-host ...`"
            )
            raise ConfigError(msg)
        # abspath, not realpath: a venv's bin/python is a symlink, and only the
        # venv path makes the interpreter find the venv's site-packages.
        via = StdioGateway(os.path.abspath(sys.executable), gateway.path)
    moved, new_gateway = move_to_gateway(current, args.server, gateway.data, via=via)
    text = render_host_config(moved)
    summary = describe_move(args.server, current, moved, new_gateway, gateway.path, via)
    if args.dry_run:
        sys.stdout.write("\n".join(["dry run, nothing written", *summary]) + "\n")
        return 0
    # The gateway learns the upstream first: a host pointed at a gateway that
    # does not serve it yet would fail, the other order only leaves a spare upstream.
    backups = [write_gateway_config(gateway, new_gateway)]
    backup_dir = os.path.join(os.path.dirname(gateway.path), "host-backups")
    http = isinstance(via, HttpGateway)
    host_backup = write_host_config(moved, text, backup_dir=backup_dir, private=http)
    if host_backup:
        backups.append(host_backup)
    lines = [f"moved {args.server!r} behind the zerto-rewind gateway", *summary]
    lines += [f"backup:      {b}" for b in backups]
    if current.had_comments:
        lines.append("note:        the host file's comments were dropped (the backup keeps them)")
    lines.append(
        f"the credentials now live only in {gateway.path}; the host backup holding them is "
        f"in {backup_dir} (0600)"
    )
    if http and args.project is not None:
        lines.append(
            "note:        a project file now holds a bearer token: keep it out of version "
            "control (or use --user)"
        )
    if isinstance(via, HttpGateway):
        lines.append(
            f"token for client {via.client!r} (written only to {moved.file.path}; "
            f"shown once): {via.token}"
        )
    print("\n".join(lines))
    return 0


def _default_client(host: str, env: Mapping[str, str]) -> str:
    user = env.get("USER") or env.get("LOGNAME") or "agent"
    return f"{user}-{host}"


if __name__ == "__main__":
    sys.exit(main())
