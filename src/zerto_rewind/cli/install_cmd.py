"""``zerto-rewind install TARGET``: the one entry point for every installer.

Each target is a door's own command, imported only when asked for:

* ``claude-code``: the PreToolUse hook in Claude Code's settings (:mod:`.install_claude_code`);
* ``claude-plugin``: a Claude Code plugin with the hook and the MCP server
  (:mod:`.install_claude_plugin`);
* ``mcp-host``: an MCP host's VM server moved behind the gateway (:mod:`.install_mcp_host`);
* ``host-hook``: the Codex, Gemini CLI or Copilot CLI hook, a thin client of the guard
  service (:mod:`.install_host_hook`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from ..errors import UsageError
from . import report_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["TARGETS", "main"]

# target -> (module, function, whether the target stays in argv, one-line help)
TARGETS: dict[str, tuple[str, str, bool, str]] = {
    "claude-code": (
        "zerto_rewind.cli.install_claude_code",
        "main",
        True,
        "the guard hook in Claude Code's settings (--project DIR | --user | --managed)",
    ),
    "claude-plugin": (
        "zerto_rewind.cli.install_claude_plugin",
        "main",
        False,
        "a Claude Code plugin with the hook and the MCP server (--out DIR)",
    ),
    "mcp-host": (
        "zerto_rewind.cli.install_mcp_host",
        "main",
        False,
        "put the gateway between an MCP host and a VM server (HOST --server NAME)",
    ),
    "host-hook": (
        "zerto_rewind.cli.install_host_hook",
        "main",
        False,
        "the Codex, Gemini CLI or Copilot CLI hook (HOST --service URL --user|--project DIR)",
    ),
}


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Dispatch ``zerto-rewind install TARGET ...``; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        _usage(sys.stdout)
        return 0
    entry = TARGETS.get(args[0])
    if entry is None:
        report_error("install", UsageError(f"unknown target {args[0]!r}"))
        _usage(sys.stderr)
        return 2
    module_name, function_name, keep, _help = entry
    try:
        __import__(module_name)
    except ImportError as exc:
        msg = f"not available in this installation ({exc})"
        report_error(f"install {args[0]}", UsageError(msg))
        return 2
    function = getattr(sys.modules[module_name], function_name)
    return int(function(args if keep else args[1:], env) or 0)


def _usage(stream: TextIO) -> None:
    lines = ["usage: zerto-rewind install TARGET [OPTIONS]", "", "targets:"]
    lines += [f"  {name:<14} {text}" for name, (_m, _f, _k, text) in TARGETS.items()]
    lines += ["", "Run `zerto-rewind install TARGET --help` for a target's options."]
    print("\n".join(lines), file=stream)


if __name__ == "__main__":
    sys.exit(main())
