"""The gateway door: an MCP proxy in front of VM MCP servers that guards every tool call.

The call path: ``upstream`` (one connection to a VM MCP server, with the official
SDK's client; restarted when it dies), ``upstream_log`` (its stderr, redacted, into
its own log), ``pins`` (only tools matching their reviewed pin are trusted as
catalogued), ``calls`` (one ``tools/call`` through the
core guard: forward, refuse, or wait for a person's approval), ``proxy`` (the SDK
server that presents an upstream's tools unchanged), ``request_state`` (the
single-use ``requestState`` bound to one call).

The listeners: ``http`` (streamable HTTP with bearer tokens, sessions bound to
their token, ``/metrics`` and ``/healthz``), ``stdio_pipes`` (stdin/stdout as
event-loop pipes), ``decide`` (the guard service the thin hook asks over a unix
socket or HTTPS), ``run`` (starts the listeners a command line asks for),
``metrics`` and ``service`` (what one running gateway holds: settings, guard,
upstreams).

Approvals: ``approvals`` (requests waited on and consumed once), and the channels a
person answers on, which an agent cannot reach: ``approvals_socket`` (peer
credentials from the kernel), the approvals page and ``notify`` (signed
webhooks). The page: ``approvals_web`` (its app and routes), ``approvals_auth``
(passwords, sessions, CSRF and origin), ``approvals_login`` (the login limit),
``approvals_pages`` and ``approvals_html`` (what it shows), ``static/`` (its
style and script).

May import: ``core``, ``config``, ``zvm``, ``scan`` and the base modules, and
the ``mcp`` SDK. Never another door, ``recovery`` or ``cli``.
"""
