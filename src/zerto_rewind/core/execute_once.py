"""Execute-once: a change whose last identical call may have run is not sent blind again.

When the VM server times out, or the connection drops, after a mutating call was
sent, nobody knows whether it ran; "create", "delete" or "add disk" sent again can
act twice. The door that forwarded the call (the gateway) therefore records an
``unknown`` outcome here, keyed by the call's principal, tool and canonical
arguments (:func:`.decision.arguments_digest`, as the approvals key them), and
:class:`ExecuteOnce`, the pipeline's ``execute_once`` step, turns the same call
within ``guard.unknown_outcome_window_s`` into a prompt. The reason says the last
identical call's outcome is unknown, when it was sent, and to check the VM's state
in vCenter before approving; the approvals step asks a person, and an approval
lets the retry run once. A settled outcome (succeeded, failed) replaces the
unknown one, so a retry after it runs as before.

The outcome lives in the guard's state (:class:`~.state.GuardStateLike`: the state
directory, or Redis), as a cache entry with a MAC under the state's key: whoever can
write there without the key (the agent, through a Redis it reaches) cannot make an
unknown outcome look settled; a forged or damaged entry is read as absent, the same
as for the tag records. (Deleting it needs write access to the state itself; the
result line in the chained decision log still shows the unknown outcome.) A state
that cannot be read is a prompt that says so, never a blind send.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .decision import Decision, Outcome, Row, ToolCall, fmt_time

if TYPE_CHECKING:
    from .state import GuardStateLike

__all__ = ["KIND", "ExecuteOnce", "Outcomes", "unknown_reason"]

log = logging.getLogger("zerto_rewind.decisions")

KIND = "outcome"  # the state's cache kind of the outcome entries
_UNKNOWN = "unknown"


def _key(call: ToolCall) -> str:
    """(principal, tool, canonical arguments): the same key the approvals use."""
    return json.dumps([call.principal or "", call.tool_name, call.args_digest])


class Outcomes:
    """The last outcome of each identical call, in the guard's state, within ``window_s``.

    ``state`` opens the state when first needed; ``clock`` is the time (a test's own).
    """

    def __init__(
        self,
        state: Callable[[], GuardStateLike],
        window_s: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = state
        self.window_s = window_s
        self.clock = clock

    def unknown_since(self, call: ToolCall) -> float | None:
        """When the last identical call with an unknown outcome was sent, within the window;
        None when there is none (or it settled). StateError/OSError when the state fails."""
        if self.window_s <= 0:
            return None
        raw = self.state().cached(KIND, _key(call), self.window_s)
        if not isinstance(raw, dict) or raw.get("result") != _UNKNOWN:
            return None
        sent_at = raw.get("sent_at")
        if not isinstance(sent_at, int | float) or self.clock() - sent_at > self.window_s:
            return None
        return float(sent_at)

    def settle(self, call: ToolCall, result: str, sent_at: float) -> None:
        """Remember what became of a forwarded call: ``unknown`` is kept for the window;
        a settled result replaces an unknown one (and writes nothing otherwise).
        A state that fails is a warning: the result line still says what happened."""
        if self.window_s <= 0:
            return
        try:
            if result != _UNKNOWN and self.unknown_since(call) is None:
                return  # nothing to settle: no write per ordinary call
            value: dict[str, Any] = {"result": result, "sent_at": sent_at}
            self.state().store(KIND, _key(call), value)
        except Exception as exc:  # the call already ran (or may have): warn, do not raise
            log.warning("call outcome not kept in the state: %s", type(exc).__name__)


def unknown_reason(tool: str, vms: tuple[str, ...], sent_at: float) -> str:
    """The prompt's reason: what is unknown, since when, and what to check first."""
    where = ", ".join(vms) if vms else "the VMs it names"
    return (
        f"zerto-rewind holds {tool}: the same call (same caller, same arguments) was sent "
        f"at {fmt_time(sent_at)} and its outcome is unknown (the VM server did not answer, "
        "or the connection dropped, after it was sent), so it may already have run. "
        f"Before approving, check the state of {where} in vCenter: approve only if the "
        "first call did not take effect."
    )


def _unreadable_reason(tool: str, exc: BaseException) -> str:
    return (
        f"zerto-rewind holds {tool}: the guard could not read whether the same call was "
        f"sent before with an unknown outcome ({type(exc).__name__}), so it is not sent "
        "blind. An operator can check the guard's state store with `zerto-rewind doctor`."
    )


class ExecuteOnce:
    """The ``execute_once`` step: a call that would run (or be asked) while its last
    identical call's outcome is unknown becomes a prompt saying so."""

    name = "execute_once"

    def __init__(self, outcomes: Outcomes) -> None:
        self.outcomes = outcomes

    def apply(self, call: ToolCall, so_far: Decision) -> Decision | None:
        runs = so_far.outcome in (Outcome.NONE, Outcome.CONTEXT)
        if so_far.row == Row.READ_ONLY or not (runs or so_far.outcome == Outcome.PROMPT):
            return None
        try:
            sent_at = self.outcomes.unknown_since(call)
        except Exception as exc:  # fail closed: a person decides, told what failed
            log.warning("call outcome not read from the state: %s", type(exc).__name__)
            return self._held(so_far, _unreadable_reason(call.tool_name, exc), runs)
        if sent_at is None:
            return None
        return self._held(so_far, unknown_reason(call.tool_name, so_far.vms, sent_at), runs)

    @staticmethod
    def _held(so_far: Decision, reason: str, runs: bool) -> Decision:
        if not runs:  # already a prompt: the approver reads both reasons
            return so_far.but(reason=f"{so_far.reason} {reason}".strip())
        held = so_far.but(row=Row.OUTCOME_UNKNOWN, outcome=Outcome.PROMPT, reason=reason)
        return held.but(context="")
