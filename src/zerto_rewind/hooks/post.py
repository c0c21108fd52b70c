"""After the call: the hook's result line, for a change its PreToolUse let through.

The host runs the hook again once the tool ran (Claude Code's ``PostToolUse`` or
``PostToolUseFailure``). The call's decision line is found again and its result
line written by :mod:`..core.call_lookup` (which says how); no line found means
nothing is recorded (and the hook says so on stderr).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..core.call_lookup import NO_DECISION, record_after

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.decision import ToolCall
    from ..errors import ConfigError

__all__ = ["HOST", "after"]

# The host, as the result lines name it.
HOST = "claude-code"


def after(
    settings: Settings | None, problem: ConfigError | None, call: ToolCall, result: str
) -> int:
    """The hook's post event for a call that is not read-only: its exit code. The call has
    run, so nothing here blocks it: a failure to record is said on stderr (exit 1, which
    Claude Code shows the user) and the session goes on."""
    from .claude_code import POST_FAILURE_EXIT

    try:
        if settings is None:
            msg = f"the guard's config cannot be used ({problem})"
            raise RuntimeError(msg)
        done = record_after(settings, call, result, client=call.principal or "", host=HOST)
    except Exception as exc:  # never block a call that already ran; say why
        why = str(exc) if settings is None else f"{type(exc).__name__}: {exc}"
        sys.stderr.write(
            f"zerto-rewind hook: the result of {call.tool_name} was not recorded in the decision "
            f"log: {why}. The call itself ran; `zerto-rewind doctor` checks the guard.\n"
        )
        return POST_FAILURE_EXIT
    if done == NO_DECISION:
        sys.stderr.write(
            f"zerto-rewind hook: no decision line for this {call.tool_name} call in "
            f"{settings.log_path}; its result was not recorded.\n"
        )
    return 0
