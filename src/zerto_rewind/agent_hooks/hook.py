"""Compatibility: ``from zerto_rewind.agent_hooks.hook import run; run()``, the host hook
as commands installed before the hooks package name it; the hook is
:mod:`zerto_rewind.hooks.thin`."""

from __future__ import annotations

from ..hooks.thin import main, run

__all__ = ["main", "run"]
