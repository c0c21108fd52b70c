"""Compatibility: ``from zerto_rewind.agent_hooks.hook import run; run()``, the host hook as
installed commands name it; the hook is :mod:`zerto_rewind.hooks.thin`."""

from __future__ import annotations

from ..hooks.thin import LAUNCH_CODE, main, run

__all__ = ["LAUNCH_CODE", "main", "run"]
