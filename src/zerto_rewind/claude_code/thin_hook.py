"""Compatibility: ``from zerto_rewind.claude_code.thin_hook import run; run()``, the thin
hook as commands installed before the hooks package name it; the hook (every host's) is
:mod:`zerto_rewind.hooks.thin`, which takes a command without ``--host`` as Claude Code's."""

from __future__ import annotations

from ..hooks.thin import main, run

__all__ = ["main", "run"]
