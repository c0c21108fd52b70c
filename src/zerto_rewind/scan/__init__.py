"""The catalog scan: a VM MCP server's own ``tools/list`` turned into a proposed catalog.

``heuristics`` is pure (no I/O): :func:`catalog_from_tools` classifies each tool
from its annotations, its input schema and its name, and returns the catalog
(``read_only_tools`` / ``tools``, as in the config) with one review row per
tool; ``merge`` adds a scan to an existing config without touching what a
person wrote; ``compare`` checks a config against a live tool list (doctor).
``pins`` digests each tool as reviewed (``catalog.pins``) and compares a live
list with the pins (pure); ``client`` reads ``tools/list`` with the official
``mcp`` SDK (stdio or streamable HTTP); ``review`` renders the review table with
rich.

May import: ``core``, ``config`` and the base modules. Never a door or ``cli``.
"""
