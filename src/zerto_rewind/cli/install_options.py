"""The options every hook install shares (claude-code and claude-plugin)."""

from __future__ import annotations

import argparse

from ..hostconfig.install.settings_file import DEFAULT_TIMEOUT_S

__all__ = ["add_hook_arguments", "add_json_argument"]


def add_hook_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every hook install shares: the config, the host's timeout, --all-tools."""
    parser.add_argument(
        "--config", metavar="PATH", help="the zerto-rewind config (default: ZERTO_REWIND_CONFIG)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"the host's hook timeout in seconds (default {DEFAULT_TIMEOUT_S})",
    )
    parser.add_argument(
        "--all-tools",
        action="store_true",
        help="run the hook for every tool that is not read-only, not just the catalog's servers",
    )


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """``--json``: every install target's summary as one JSON object on stdout."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print what was (or, with --dry-run, would be) written as one JSON object",
    )
