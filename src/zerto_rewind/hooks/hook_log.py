"""The hook's record step: its decision lines (core.record), the warnings on its stderr."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.decision import Decision, ToolCall

__all__ = ["log", "warnings_to_stderr"]


def log(
    path: str, decision: Decision, call: ToolCall, settings: Settings | None = None
) -> Decision:
    """The record step (core.record), its warnings on stderr; the decision to give."""
    from ..core.decisions_log import register_anchor
    from ..core.record import record

    if settings is not None:  # a broken config logs its denial unanchored
        from ..core.log_anchor import policy_for

        register_anchor(policy_for(settings))
    warnings_to_stderr()
    return record(decision, call, path)


_WARNINGS_TO_STDERR: list[bool] = []


def warnings_to_stderr() -> None:
    """The record step's warnings, on the hook's stderr (a process per call, no log
    config); sys.stderr is looked up at each write, so an in-process caller's is used."""
    if _WARNINGS_TO_STDERR:
        return
    import logging

    class Stderr(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sys.stderr.write(f"zerto-rewind hook: {record.getMessage()}\n")

    logging.getLogger("zerto_rewind.decisions").addHandler(Stderr(logging.WARNING))
    _WARNINGS_TO_STDERR.append(True)
