"""The gateway door: an MCP proxy in front of VM MCP servers that guards every tool call.

``upstream`` (one connection to a VM MCP server, with the official SDK's
client; restarted when it dies), ``calls`` (one ``tools/call`` through the core
guard: forward, refuse, or ask the human), ``proxy`` (the SDK server that
presents an upstream's tools unchanged), ``http`` (streamable HTTP with bearer
tokens, ``/metrics`` and ``/healthz``), ``metrics`` and ``service`` (what one
running gateway holds: settings, guard, upstreams).

May import: ``core``, ``config``, ``zvm`` and the base modules, and the ``mcp``
SDK. Never another door, ``recovery`` or ``cli``.
"""
