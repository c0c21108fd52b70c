"""The Claude Code door: the PreToolUse hooks.

The hooks: ``hook`` (the standalone hook: stdin → guard → stdout), ``thin_hook``
(asks the guard service over a unix socket or HTTPS), ``host`` (Claude Code's hook
protocol), ``protect`` (``guard.protect_self``: the guard's own files). Their
installer is :mod:`zerto_rewind.hostconfig.install`.

May import: ``core``, ``config``, ``zvm`` and the base modules. Never another door or
``cli``. Import-free itself: the hook's read-only path passes through.
"""
