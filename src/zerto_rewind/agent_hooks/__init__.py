"""Compatibility: the import path that installed Codex, Gemini CLI and Copilot CLI hook
commands name (``from zerto_rewind.agent_hooks.hook import run; run()``); the hook is
:mod:`zerto_rewind.hooks.thin`.

May import only :mod:`zerto_rewind.hooks`. Import-free itself.
"""
