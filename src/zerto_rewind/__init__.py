"""zerto-rewind: a tagged Zerto checkpoint before every change an AI agent makes to a VM.

This module stays import-free on purpose: the PreToolUse hook imports the
package on every tool call, and its read-only path must cost almost nothing.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("zerto-rewind")
    msg = f"module 'zerto_rewind' has no attribute {name!r}"
    raise AttributeError(msg)
