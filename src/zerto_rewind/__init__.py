"""zerto-rewind: a tagged Zerto checkpoint before every change an AI agent makes to a VM.

The folders are layers; imports point down this list, never up or sideways
between doors (``tests/unit/test_layers.py`` enforces it):

* ``cli``: the ``zerto-rewind`` command: argument parsing, the one error edge,
  doctor, demo.
* ``testing``: the public test harness (simulator in a thread, sandbox, fast cadences).
* ``claude_code`` and ``agent_hooks``: only the import paths that installed hook
  commands name, re-exporting the runners of ``hooks``.
* doors: ``hooks`` (every agent host's hook: one protocol module per host, the
  standalone runner and the thin runner, a client of the guard service),
  ``mcp_server`` (the guard's MCP tools), ``gateway`` (the MCP gateway, the guard
  service and the approval channels).
* ``recovery`` (protection status, recovery plans, failover tests, previews) and
  ``scan`` (a VM server's tool list turned into a proposed catalog).
* ``core``: the decision table and the tag lifecycle.
* ``zvm`` (the Zerto client) and ``sim`` (the ZVM simulator), side by side, with
  ``hostconfig`` (agent-host MCP config files: read, checked, moved, written);
  its ``hostconfig.install`` (the installers) sits above the doors, beside ``testing``.
* ``config``: settings and their parser.
* base: ``errors``, ``fsutil``, ``fsaccess``, ``netutil``, ``_fastjson``, ``hook_flags``, and
  ``service_client`` (asks the guard service: the thin hooks, install, approvals).

This module stays import-free on purpose: the hook imports the package on
every tool call, and its read-only path must cost almost nothing.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("zerto-rewind")
    msg = f"module 'zerto_rewind' has no attribute {name!r}"
    raise AttributeError(msg)
