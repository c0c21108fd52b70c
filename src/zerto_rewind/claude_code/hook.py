"""Compatibility: ``from zerto_rewind.claude_code.hook import run; run()``, the standalone
hook as commands installed before the hooks package name it; the hook is
:mod:`zerto_rewind.hooks.standalone`."""

from __future__ import annotations

from ..hooks.standalone import main, run

__all__ = ["main", "run"]

if __name__ == "__main__":
    run()
