"""``zerto-rewind install host-hook HOST``: the command line of the host-hook installer.

The install itself (the service reached and checked, the matcher, the hook file
planned and written) is :func:`zerto_rewind.hostconfig.install.host_hook.install_host_hook`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from ..hostconfig.hooks import HOOK_HOSTS
from ..hostconfig.install.host_hook import HostHookOptions, install_host_hook
from ..hostconfig.install.report import InstallReport
from . import install_options as shared

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind install host-hook",
        description="Install the zerto-rewind hook in Codex (PreToolUse), Gemini CLI "
        "(BeforeTool) or Copilot CLI (preToolUse): a thin client of the guard service for "
        "direct calls to a VM server, and a check of shell and file calls that would write "
        "the hook's own files.",
    )
    parser.add_argument("host", choices=HOOK_HOSTS, help="the agent host")
    _add_service_arguments(parser)
    where = shared.add_target_arguments(
        parser, required=True, project="the project's hook file", user="the user's hook file"
    )
    where.add_argument("--file", metavar="F", help="another hook file of the host's format")
    parser.add_argument(
        "--servers",
        metavar="A,B",
        help="the VM servers to guard, as the host names them (default: every "
        "server of the service's catalog)",
    )
    parser.add_argument(
        "--prompt-as",
        choices=("ask", "deny"),
        help="what a prompt becomes: Gemini asks by default (deny for unattended "
        "runs); Codex and Copilot always deny",
    )
    parser.add_argument(
        "--protect",
        action="append",
        default=[],
        metavar="PATH",
        help="another file the hook keeps shell and file calls from writing "
        "(e.g. the gateway's config); may be repeated",
    )
    parser.add_argument(
        "--python", metavar="PATH", help="the interpreter the hook runs with (default: this one)"
    )
    parser.add_argument(
        "--force", action="store_true", help="rewrite a hook file whose comments a rewrite drops"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the file, write nothing")
    shared.add_json_argument(parser)
    return parser


def _add_service_arguments(parser: argparse.ArgumentParser) -> None:
    """The guard service the hook asks, and how it trusts it."""
    shared.add_service_arguments(
        parser,
        required=True,
        service="the guard service: unix:/path/to/socket or https://host:port",
        service_user="the user the guard service runs as (default: the socket's owner)",
        agent_user="the user the agent runs as, when install runs as another",
    )


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install host-hook``; a refusal reaches the CLI's one error edge."""
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    report = InstallReport("host-hook", as_json=args.json)
    install_host_hook(shared.options_from(HostHookOptions, args), env, report)
    report.finish()
    return 0
