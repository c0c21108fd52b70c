"""The command line: ``zerto-rewind`` and its subcommands, doctor and demo.

Each subcommand lives in its own module and is imported only when asked for,
so ``zerto-rewind hook`` pays for nothing but the hook.

May import every layer: ``testing`` (the demo's sandbox), the doors,
``recovery``, ``core``, ``config``, ``zvm``, ``sim`` and the base modules.
Nothing imports ``cli`` but ``__main__``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["COMMANDS", "main"]

# name -> (module, function, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "hook": (
        "zerto_rewind.claude_code.hook",
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
    "install": (
        "zerto_rewind.cli.install_cmd",
        "main",
        "install: claude-code (hook), claude-plugin, mcp-host (gateway)",
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
}


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
    result = function(args[1:])
    return int(result or 0)


def _usage(stream: TextIO) -> None:
    lines = ["usage: zerto-rewind COMMAND [ARGS]", "", "commands:"]
    lines += [f"  {name:<12} {text}" for name, (_m, _f, text) in COMMANDS.items()]
    lines += ["", "Run `zerto-rewind COMMAND --help` for a command's options."]
    print("\n".join(lines), file=stream)


if __name__ == "__main__":
    sys.exit(main())
