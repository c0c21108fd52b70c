"""Compatibility: ``from zerto_rewind.claude_code.thin_hook import run; run()``, the thin
hook as installed commands name it; the hook is :mod:`zerto_rewind.hooks.thin_claude`."""

from __future__ import annotations

from ..hooks.thin_claude import LAUNCH_CODE, main, run

__all__ = ["LAUNCH_CODE", "main", "run"]
