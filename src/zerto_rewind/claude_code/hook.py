"""Compatibility: ``from zerto_rewind.claude_code.hook import run; run()``, the standalone
hook as installed commands name it; the hook is :mod:`zerto_rewind.hooks.standalone`."""

from __future__ import annotations

from ..hooks.standalone import LAUNCH_CODE, LEGACY_LAUNCH_CODE, main, run

__all__ = ["LAUNCH_CODE", "LEGACY_LAUNCH_CODE", "main", "run"]

if __name__ == "__main__":
    run()
