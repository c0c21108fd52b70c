"""``zerto-rewind install claude-plugin``: the command line of the plugin generator.

The generator is :mod:`zerto_rewind.hostconfig.install.plugin`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from ..hostconfig.install.plugin import PLUGIN_NAME, install_plugin
from ..hostconfig.install.report import InstallReport
from .install_options import add_hook_arguments, add_json_argument

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind install claude-plugin",
        description="Generate the zerto-rewind Claude Code plugin (hook + MCP server).",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the plugin directory")
    add_hook_arguments(parser)
    parser.add_argument("--name", default=PLUGIN_NAME, help=f"plugin name (default {PLUGIN_NAME})")
    add_json_argument(parser)
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install claude-plugin``; returns the exit code."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    if args.config:
        env["ZERTO_REWIND_CONFIG"] = args.config
    report = InstallReport("claude-plugin", as_json=args.json)
    install_plugin(
        args.out, env, report, timeout_s=args.timeout, all_tools=args.all_tools, name=args.name
    )
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
