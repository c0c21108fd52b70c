"""The MCP server door: the guard's tools for a cooperative model (``zerto-rewind serve``).

``server`` (the tools and the command), ``runtime`` (settings, client and guard
shared by the tools), ``live_tools`` (live recovery, registered only when allowed).

May import: ``recovery``, ``core``, ``config``, ``zvm`` and the base modules.
Never another door or ``cli``.
"""
