"""Compatibility: the import paths that installed Claude Code hook commands name.

Hooks installed before :mod:`zerto_rewind.hooks` run ``python -c "from
zerto_rewind.claude_code.hook import run; run()" hook …`` (or ``.thin_hook``). Those
commands live in users' settings files, so these two modules stay, each only
re-exporting its runner from :mod:`zerto_rewind.hooks`.

May import only :mod:`zerto_rewind.hooks`. Import-free itself: the hook's read-only
path passes through.
"""
