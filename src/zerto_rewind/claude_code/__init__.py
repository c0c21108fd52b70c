"""The Claude Code door: the PreToolUse hook and everything that wires it in.

``hook`` (stdin → guard → stdout), ``host`` (Claude Code's hook protocol),
``matcher`` (the compiled hook matcher), ``settings_file`` (our entry in
``settings.json``), ``install_plan`` (what an install writes, planned without I/O),
``install`` (reads, then applies a plan) and ``plugin`` (the generated plugin); their
command lines are in ``cli``.

May import: ``core``, ``config``, ``zvm`` and the base modules. Never another
door or ``cli``. Import-free itself: the hook's read-only path passes through.
"""
