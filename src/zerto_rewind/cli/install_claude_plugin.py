"""``zerto-rewind install claude-plugin``: the command line of :mod:`..hostconfig.install.plugin`."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping

from ..config.loader import load_config
from ..config.settings import config_path
from ..errors import ConfigError
from ..hostconfig.install.plugin import PLUGIN_NAME, build_plugin
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
    config = config_path(env)
    try:
        settings = load_config(env)
    except ConfigError as exc:
        # Re-raised to say that nothing was generated; the CLI's edge reports it.
        msg = f"{exc.detail}; fix the config first: a broken one denies every call (not generated)"
        raise ConfigError(msg, path=exc.path, key=exc.key) from None
    out = os.path.abspath(os.path.expanduser(args.out))
    python = os.path.abspath(sys.executable)
    notes = build_plugin(
        out,
        settings,
        python=python,
        config=config,
        timeout_s=args.timeout,
        all_tools=args.all_tools,
        name=args.name,
    )
    report = InstallReport("claude-plugin", as_json=args.json)
    report.wrote(out)
    lines = [f"generated the {args.name} plugin in {out}", *(f"note: {n}" for n in notes)]
    lines.append(f"use it with: claude --plugin-dir {shlex.quote(out)}")
    lines.append(f"check it with: claude plugin validate {shlex.quote(out)}")
    report.say(lines)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
