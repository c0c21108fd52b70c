"""The hook's old import path, kept so that installed hooks keep working.

Hook commands written before the layer folders hold
``python -c 'from zerto_rewind.hook import run; run()'``; new installs name
:mod:`zerto_rewind.claude_code.hook`. ``zerto-rewind doctor`` reports the old
command, and ``zerto-rewind install`` rewrites it.
"""

from __future__ import annotations

from .claude_code.hook import LAUNCH_CODE, main, run

__all__ = ["LAUNCH_CODE", "main", "run"]
