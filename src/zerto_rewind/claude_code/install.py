"""``zerto-rewind install claude-code``: merge the guard hook into Claude Code's settings.

A thin command over :mod:`.settings_file`: it refuses a config that does not
load and a settings file that is not JSON, backs up what it changes and writes
atomically.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping

from ..config.loader import load_config
from ..config.settings import config_path
from ..errors import ConfigError, ZertoRewindError
from .matcher import compile_matcher
from .settings_file import (
    DEFAULT_TIMEOUT_S,
    build_entry,
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
        description="Install the zerto-rewind PreToolUse hook into an agent host's settings.",
        epilog="`zerto-rewind install claude-plugin --out DIR` builds a Claude Code plugin.",
    )
    parser.add_argument("host", choices=["claude-code"], help="the agent host")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--project", metavar="DIR", help="write DIR/.claude/settings.json")
    where.add_argument("--user", action="store_true", help="write ~/.claude/settings.json")
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
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["claude-plugin"]:
        from .plugin import main as plugin_main

        return plugin_main(argv[1:], env)
    args = _parser().parse_args(argv)
    env = dict(os.environ if env is None else env)
    if args.config:
        env["ZERTO_REWIND_CONFIG"] = args.config
    try:
        return _install(args, env)
    except ZertoRewindError as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1


def _install(args: argparse.Namespace, env: dict[str, str]) -> int:
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
    try:
        matcher = compile_matcher(settings.catalog, all_tools=args.all_tools)
    except ConfigError as exc:
        return _refuse(f"{config}: {exc.detail}")
    entry = build_entry(python=python, config=config, matcher=matcher, timeout_s=timeout)
    home = env.get("HOME") or os.path.expanduser("~")
    path = settings_file(project=args.project, user=args.user, home=home)
    current, original = read_settings(path)
    try:
        text = render(merge(current, entry))
    except ConfigError as exc:
        raise ConfigError(exc.detail, path=path, key=exc.key) from None
    summary = [
        f"settings: {path}",
        f"matcher:  {matcher}",
        f"command:  {entry['hooks'][0]['command']}",
        f"timeout:  {timeout} s (guard budget {settings.guard.timeout_s:g} s), onFailure: block",
    ]
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
    lines = ["installed the zerto-rewind hook", *summary]
    if backup:
        lines.append(f"backup:   {backup}")
    lines.append("check it with: zerto-rewind doctor " + _doctor_args(args, config))
    print("\n".join(lines))
    return 0


def _refuse(message: str) -> int:
    sys.stderr.write(f"zerto-rewind install: {message}\n")
    return 1


def _doctor_args(args: argparse.Namespace, config: str) -> str:
    project = os.path.abspath(os.path.expanduser(args.project or "."))
    where = "--user" if args.user else f"--project {shlex.quote(project)}"
    return f"--config {shlex.quote(config)} {where}"


if __name__ == "__main__":
    sys.exit(main())
