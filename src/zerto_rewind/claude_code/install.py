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
from .matcher import compile_matcher, covered_servers
from .mcp_config import (
    McpSource,
    claude_json_path,
    defined_servers,
    read_sources,
    zerto_rewind_role,
)
from .plugin import MCP_SERVER_NAME
from .settings_file import (
    DEFAULT_TIMEOUT_S,
    build_entry,
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
        usage="zerto-rewind install claude-code (--project DIR | --user) [options]",
        description="Install the zerto-rewind PreToolUse hook into an agent host's settings.",
        epilog="Other targets: `zerto-rewind install --help`.",
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
    sources = read_sources(
        env,
        projects=[args.project] if args.project else [],
        every_local_scope=bool(args.user),
        extra_files=args.mcp_config,
    )
    undefined = _undefined_servers(sources, covered_servers(settings.catalog))
    if undefined and not args.force:
        return _refuse(undefined + "\nNot installed; or install anyway with --force.")
    # The rewind hint names zerto-rewind's MCP tool only where the host has that server.
    server = MCP_SERVER_NAME if args.with_mcp_server else _installed_server(sources)
    entry = build_entry(
        python=python, config=config, matcher=matcher, timeout_s=timeout, mcp_server=server
    )
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


def _refuse(message: str) -> int:
    sys.stderr.write(f"zerto-rewind install: {message}\n")
    return 1


def _doctor_args(args: argparse.Namespace, config: str) -> str:
    project = os.path.abspath(os.path.expanduser(args.project or "."))
    where = "--user" if args.user else f"--project {shlex.quote(project)}"
    return f"--config {shlex.quote(config)} {where}"


if __name__ == "__main__":
    sys.exit(main())
