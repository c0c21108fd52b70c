"""The command line: ``zerto-rewind`` and its subcommands, doctor and demo.

Each subcommand lives in its own module and is imported only when asked for,
so ``zerto-rewind hook`` pays for nothing but the hook.

Errors reach the user at one edge, :func:`run_command`: an error of the tree
(:mod:`zerto_rewind.errors`) is one line on stderr,
``zerto-rewind CMD: Type: what failed — what to do``, and exit code 1. Commands
catch an error only to do something else with it (fall back, retry, or map it to
an exit code their help documents). Anything outside the tree is a bug and is
not caught: it ends with its traceback and a non-zero exit. The hook is the
exception: it speaks Claude Code's protocol and turns every failure, its own
crash included, into a deny on stdout, so the edge leaves it alone.

May import every layer: ``testing`` (the demo's sandbox), the doors,
``recovery``, ``core``, ``config``, ``zvm``, ``sim`` and the base modules.
Nothing imports ``cli`` but ``__main__``.
"""

from __future__ import annotations

import sys

from ..errors import ZertoRewindError, describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

__all__ = ["COMMANDS", "main", "report_error", "report_warning", "run_command"]

# name -> (module, function, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "hook": (
        "zerto_rewind.hooks.standalone",
        "main",
        "Claude Code PreToolUse hook (reads the call on stdin)",
    ),
    "demo": (
        "zerto_rewind.cli.demo",
        "main",
        "run every decision row against the embedded simulator",
    ),
    "sim": ("zerto_rewind.sim.app", "main", "serve the local ZVM 10.x simulator"),
    "status": (
        "zerto_rewind.cli.zvm_cmds",
        "status",
        "a VM's VPGs, site, status, RPO, cadence",
    ),
    "checkpoints": (
        "zerto_rewind.cli.zvm_cmds",
        "checkpoints",
        "a VM's checkpoints as a table",
    ),
    "tag": ("zerto_rewind.cli.zvm_cmds", "tag", "tag a checkpoint for a VM and wait for it"),
    "log": ("zerto_rewind.cli.log_cmd", "main", "recent decisions; reconcile pending tags"),
    "sessions": (
        "zerto_rewind.cli.sessions_cmd",
        "list_main",
        "recent agent sessions: who, when, how many changes, which VMs",
    ),
    "session": (
        "zerto_rewind.cli.sessions_cmd",
        "session_main",
        "one agent session: session show ID (its changes and rewind points)",
    ),
    "install": (
        "zerto_rewind.cli.install_cmd",
        "main",
        "install: claude-code (hook), claude-plugin, mcp-host (gateway), host-hook",
    ),
    "doctor": (
        "zerto_rewind.cli.doctor",
        "main",
        "check config, ZVM, credentials and host settings",
    ),
    "gateway": (
        "zerto_rewind.cli.gateway_cmd",
        "main",
        "guard VM MCP servers for any MCP host (stdio or HTTP)",
    ),
    "catalog": (
        "zerto_rewind.cli.catalog_cmd",
        "main",
        "catalog scan: propose a catalog from a server's tools/list",
    ),
    "approvals": (
        "zerto_rewind.cli.approvals_cmd",
        "main",
        "calls waiting for a person: list, show, approve, deny",
    ),
    "rewind": (
        "zerto_rewind.cli.rewind_cmd",
        "main",
        "put a session's VMs back to the checkpoints taken before its changes",
    ),
    "check": (
        "zerto_rewind.cli.check_cmd",
        "main",
        "what the guard would decide for one call, without tagging",
    ),
    "serve": (
        "zerto_rewind.mcp_server.server",
        "main",
        "the MCP server (stdio, or streamable HTTP)",
    ),
    "completion": (
        "zerto_rewind.cli.completion_cmd",
        "main",
        "print a shell completion script: completion bash|zsh",
    ),
}

# Commands that answer every failure in their host's protocol themselves.
_OWN_ERROR_EDGE = frozenset({"hook"})
# Commands whose first argument names a subcommand: an error names both words.
_WITH_SUBCOMMAND = frozenset({"install", "catalog", "session"})


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``zerto-rewind COMMAND ...``."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        _usage(sys.stdout)
        return 0
    if args[0] in ("-V", "--version"):
        from importlib.metadata import version

        print(f"zerto-rewind {version('zerto-rewind')}")
        return 0
    entry = COMMANDS.get(args[0])
    if entry is None:
        sys.stderr.write(f"zerto-rewind: unknown command {args[0]!r}\n")
        _usage(sys.stderr)
        return 2
    module_name, function_name, _help = entry
    # __import__ + sys.modules, not importlib.import_module: importlib pulls in
    # `warnings`, a cost the hook would pay on every call through this CLI.
    __import__(module_name)
    function = getattr(sys.modules[module_name], function_name)
    if args[0] in _OWN_ERROR_EDGE:
        return int(function(args[1:]) or 0)
    return run_command(_label(args), lambda: function(args[1:]))


def run_command(name: str, command: Callable[[], int | None]) -> int:
    """Run one subcommand; an error of the tree is reported once (see :func:`report_error`).

    Returns the command's exit code, or 1 after an error. Other exceptions are bugs
    and propagate, traceback and all: a failure is never quietly turned into success.
    """
    try:
        return int(command() or 0)
    except ZertoRewindError as exc:
        report_error(name, exc)
        return 1


def report_error(name: str, error: ZertoRewindError) -> None:
    """Write ``zerto-rewind NAME: Type: what failed — what to do`` to stderr."""
    sys.stderr.write(f"zerto-rewind {name}: {describe(error)}\n")


def report_warning(name: str, text: str) -> None:
    """Write ``zerto-rewind NAME: warning: TEXT`` to stderr: the command goes on without."""
    sys.stderr.write(f"zerto-rewind {name}: warning: {text}\n")


def _label(args: list[str]) -> str:
    if args[0] in _WITH_SUBCOMMAND and len(args) > 1 and not args[1].startswith("-"):
        return f"{args[0]} {args[1]}"
    return args[0]


def _usage(stream: TextIO) -> None:
    lines = ["usage: zerto-rewind COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<12} {text}" for name, (_m, _f, text) in COMMANDS.items()]
    lines += ["", "Run `zerto-rewind COMMAND --help` for a command's options."]
    print("\n".join(lines), file=stream)


if __name__ == "__main__":
    sys.exit(main())
