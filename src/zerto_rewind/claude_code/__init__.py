"""The Claude Code door: the PreToolUse hooks and everything that wires them in.

The hooks: ``hook`` (the standalone hook: stdin → guard → stdout), ``thin_hook``
(asks the guard service over a unix socket or HTTPS), ``host`` (Claude Code's hook
protocol), ``matcher`` (the compiled hook matcher), ``protect``
(``guard.protect_self``: the guard's own files).

The install: ``install_plan`` (what install will write and say, planned without
touching a file), ``install`` (reads what a plan needs and applies it),
``settings_file`` (our entry in ``settings.json``), ``install_managed`` (managed
settings and a root-owned config), ``install_socket`` (whether the service's socket
can be trusted; what another user can do to a path is the base module
``fsaccess``), ``service`` (what the guard service tells an installer), ``plugin``
(the hook and the MCP server as a Claude Code plugin). Their command lines are in ``cli``.

May import: ``core``, ``config``, ``zvm``, ``hostconfig`` (install paths only) and the
base modules. Never another door or ``cli``. Import-free itself: the hook's read-only
path passes through.
"""
