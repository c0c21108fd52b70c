"""``zerto-rewind install mcp-host HOST``: the command line of the mcp-host installer.

It parses and cross-checks the options; the move itself (the host's entry into
the gateway's ``upstreams``, the gateway in its place) is
:func:`zerto_rewind.hostconfig.install.mcp_host.install_mcp_host`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from ..errors import UsageError
from ..hostconfig.install.mcp_host import McpHostOptions, install_mcp_host
from ..hostconfig.install.report import InstallReport
from ..hostconfig.specs import HOSTS, default_paths
from .install_options import add_json_argument, add_target_arguments, options_from

__all__ = ["main"]

_PROG = "zerto-rewind install mcp-host"
_ALLOW = "--allow-privileged-upstream"


def _targets(env: Mapping[str, str]) -> str:
    """Every host target and its default file(s), from :data:`HOSTS` (for ``--help``)."""
    lines = ["hosts (HOST) and where each keeps its MCP servers by default:"]
    for host in HOSTS.values():
        paths = default_paths(host, env)
        lines.append(f"  {host.name:<15} {host.label}: {paths[0]}")
        lines += [f"  {'':<15} {' ' * len(host.label)}  {p}" for p in paths[1:]]
    lines.append("Give --file PATH for a file elsewhere (DIR: the --project directory).")
    return "\n".join(lines)


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=(
            "Move a VM MCP server's entry (credentials included) from an agent host's config "
            "into the gateway's, and point the host at the gateway instead. "
            "See docs/gateway.md, 'Wiring hosts to the gateway'."
        ),
        epilog=_targets(env),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("host", choices=list(HOSTS), metavar="HOST", help=", ".join(HOSTS))
    parser.add_argument(
        "--server", required=True, metavar="NAME", help="the VM server entry to move"
    )
    where = add_target_arguments(
        parser,
        required=False,
        project="the host's project config in DIR",
        user="the host's user config",
    )
    where.add_argument(
        "--file", metavar="PATH", help="this host config file (where the default path is wrong)"
    )
    _add_gateway_arguments(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would change (secrets hidden)"
    )
    parser.add_argument(
        "--systemd-unit",
        metavar="PATH",
        help="with --url: write a systemd unit that starts the gateway (hardened; "
        "LimitNOFILE) to PATH",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace a different file at --systemd-unit PATH"
    )
    add_json_argument(parser)
    return parser


def _add_gateway_arguments(parser: argparse.ArgumentParser) -> None:
    """Which gateway the host is pointed at, and how it runs a stdio server."""
    parser.add_argument(
        "--gateway-config",
        "--config",
        dest="gateway_config",
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
        "--upstream-user",
        metavar="NAME",
        help="a stdio server: the user the gateway starts it as (upstreams.NAME.user); "
        "a user of its own that cannot read the guard's files",
    )
    parser.add_argument(
        _ALLOW,
        action="store_true",
        help="stdio gateway: accept an upstream that runs as root or as the guard's owner "
        "(the host's gateway command gets this flag)",
    )


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install mcp-host``; returns the exit code."""
    env = dict(os.environ if env is None else env)
    args = _parser(env).parse_args(sys.argv[1:] if argv is None else argv)
    if args.gateway_config:
        env["ZERTO_REWIND_CONFIG"] = args.gateway_config
    if args.client and not args.url:
        msg = "--client names an HTTP client; give --url too"
        raise UsageError(msg)
    if args.systemd_unit and not args.url:
        msg = "--systemd-unit is for an HTTP gateway (--url): the host starts a stdio gateway"
        raise UsageError(msg)
    if args.allow_privileged_upstream and args.url:
        msg = (
            f"{_ALLOW} goes on the command of the HTTP gateway you start yourself "
            "(zerto-rewind gateway --http ...), not into the host's config"
        )
        raise UsageError(msg)
    report = InstallReport("mcp-host", as_json=args.json)
    code = install_mcp_host(options_from(McpHostOptions, args), env, report)
    report.finish()
    return code


if __name__ == "__main__":
    sys.exit(main())
