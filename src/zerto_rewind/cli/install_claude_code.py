"""``zerto-rewind install claude-code``: the command line of the Claude Code installer.

The installer is :mod:`zerto_rewind.hostconfig.install.claude_code`.

Parses the options, checks the ones that only go together, and hands them to
:func:`~zerto_rewind.hostconfig.install.claude_code.install` as an
:class:`~zerto_rewind.hostconfig.install.plan.InstallOptions`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from ..hostconfig.install.claude_code import install
from ..hostconfig.install.plan import InstallOptions
from ..hostconfig.install.report import InstallReport
from . import install_options as shared

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind install",
        usage="zerto-rewind install claude-code (--project DIR | --user | --managed) "
        "[--service URL | --config PATH] [options]",
        description="Install the zerto-rewind PreToolUse hook into an agent host's settings.",
        epilog="Other targets: `zerto-rewind install --help`.",
    )
    parser.add_argument("host", choices=["claude-code"], help="the agent host")
    where = shared.add_target_arguments(
        parser,
        required=True,
        project="write DIR/.claude/settings.json",
        user="write ~/.claude/settings.json",
    )
    where.add_argument(
        "--managed",
        action="store_true",
        help="as root: write Claude Code's managed settings (/etc/claude-code/"
        "managed-settings.json), which users and projects cannot override, and a root-owned "
        "config under /etc/zerto-rewind/",
    )
    shared.add_hook_arguments(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resulting settings, write nothing"
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
    _add_service_arguments(parser)
    _add_managed_arguments(parser)
    shared.add_json_argument(parser)
    return parser


def _add_service_arguments(parser: argparse.ArgumentParser) -> None:
    """The thin hook's flags: which guard service it asks, and how it trusts it."""
    thin = parser.add_argument_group(
        "guard service", "a thin hook that asks the guard service (zerto-rewind gateway)"
    )
    shared.add_service_arguments(
        thin,
        required=False,
        service="unix:/path/to/socket (a local service) or https://host:port (a remote "
        "gateway): install the thin hook, which holds no ZVM credential and keeps no guard state",
        service_user="the user the guard service runs as (default: the owner of the socket): "
        "the thin hook sends nothing to a socket served by any other uid. With --managed "
        "--config, the service's config is also given to it to read",
        agent_user="with unix:PATH: the user who runs the agent; install refuses a socket whose "
        "directory (or any above it) that user can change, or that it serves itself (default: "
        "the user running install; as root, every user but root and the service's)",
    )


def _add_managed_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a managed install (as root, into Claude Code's managed settings)."""
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


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install claude-code``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["claude-plugin"]:
        from .install_claude_plugin import main as plugin_main

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
    report = InstallReport("claude-code", as_json=args.json)
    install(shared.options_from(InstallOptions, args), env, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
