"""The one deny for a call the guard could not decide within its budget.

Every door that keeps a budget (the standalone hook's watchdog, the gateway's
worker-thread bound, the thin hooks' timer) answers with :func:`timeout_reason`.
Import-free: the thin hooks build it on their light path.
"""

from __future__ import annotations

__all__ = ["timeout_reason"]


def timeout_reason(tool: str, budget_s: float, waited_on: str, check: str) -> str:
    """Deny ``tool``: no decision within ``budget_s``; ``waited_on`` says what did not answer,
    ``check`` what an operator looks at (with ``zerto-rewind doctor``)."""
    return (
        f"zerto-rewind could not decide on {tool} within its {budget_s:g} s budget "
        f"({waited_on}); the call was not run. An operator can check {check} with "
        "`zerto-rewind doctor`, then retry."
    )
