"""One call, one decision: the steps every door runs, in one documented order.

A door (the standalone hook, the guard service's ``/v1/decide``, the gateway's
``tools/call``, the MCP server) turns its protocol's call into a
:class:`~.decision.ToolCall`, builds its list of :class:`Policy` steps, and
calls :func:`decide` (or :func:`decide_async` where a step waits on the event
loop). It then turns the :class:`~.decision.Decision` into its protocol, and
hands it to :func:`.record.record`, nothing more.

The call is classified once (:func:`classify_call`, pure and cheap: the
gateway's read-only fast lane calls it too); the classification rides in
``Decision.classification`` and no step classifies again. Then each step runs,
in :data:`ORDER` whatever order the door listed them in:

1. ``pins``: a pinned upstream's tool that no longer matches its reviewed pin
   is unlisted, whatever the catalog says (gateway).
2. ``self_protection``: a host file or shell call that would write the guard's
   own files is denied (hooks).
3. ``table``: the decision table of docs/decisions.md (:class:`Table`, over
   :class:`~.guard.Guard`): tags and waits on a mutating call.
4. ``vm_identity``: the VM server must mean the VM Zerto checkpointed
   (gateway, with ``catalog.resolvers``).
5. ``execute_once``: a call whose last identical call's outcome is unknown (sent,
   no answer) is not sent blind again: it becomes a prompt
   (:class:`~.execute_once.ExecuteOnce`, gateway).
6. ``approvals``: a prompt becomes an approval request; an approval of this
   very call lets it run once (:class:`~.approval_policy.Approvals`, file or
   Redis store).

A step sees the call and the decision so far and returns a new decision, or
None to leave it. Until a deciding step answers, the decision so far is
``undecided``: a deny, so a list that decides nothing stops the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict, Unpack

from ..errors import ConfigError
from .catalog import Classification, classify
from .decision import Decision, Outcome, Row, ToolCall

if TYPE_CHECKING:
    from ..config.settings import CatalogSettings
    from .guard import Guard

__all__ = [
    "ORDER",
    "Policy",
    "Start",
    "StepResult",
    "Table",
    "classify_call",
    "decide",
    "decide_async",
    "undecided",
]

ORDER = ("pins", "self_protection", "table", "vm_identity", "execute_once", "approvals")

StepResult = Decision | None | Awaitable[Decision | None]


class Start(TypedDict, total=False):
    """Where :func:`decide` and :func:`decide_async` start: the ``catalog`` to classify the
    call with, or the door's own classification (``verdict``), or a decision so far."""

    catalog: CatalogSettings | None
    verdict: Classification | None
    start: Decision | None


class Policy(Protocol):
    """One step of the pipeline: a name of :data:`ORDER`, and what it makes of a call."""

    @property
    def name(self) -> str: ...

    def apply(self, call: ToolCall, so_far: Decision) -> StepResult:
        """A new decision, or None to leave ``so_far`` as it is (an awaitable of either in
        :func:`decide_async`)."""
        ...


def classify_call(tool: str, arguments: object, catalog: CatalogSettings) -> Classification | None:
    """The catalog's word on a call, computed once; None when the catalog cannot be used
    (the table then denies with the config error)."""
    try:
        return classify(tool, arguments, catalog)
    except ConfigError:
        return None


def undecided(call: ToolCall, verdict: Classification | None) -> Decision:
    """The decision before any deciding step: a deny, carrying the classification."""
    reason = (
        f"zerto-rewind denied {call.tool_name}: no step of the guard decided on it, so the "
        "call was not run. An operator can check the guard's setup with `zerto-rewind doctor`."
    )
    return Decision(
        Row.UNDECIDED, Outcome.DENY, call.tool_name, reason=reason, classification=verdict
    )


def decide(call: ToolCall, policies: Sequence[Policy], **begin: Unpack[Start]) -> Decision:
    """Classify once (unless the door did, ``verdict``) and run each policy in :data:`ORDER`.

    ``start``: the decision so far when the door has one already (a test's, or a door
    that decided part of the call before); it keeps its classification.
    """
    decision = _first(call, **begin)
    for policy in ordered(policies):
        step = policy.apply(call, decision)
        if isinstance(step, Awaitable):
            msg = f"policy {policy.name!r} waits on an event loop: use decide_async"
            raise TypeError(msg)
        decision = _carried(decision, step)
    return decision


async def decide_async(
    call: ToolCall, policies: Sequence[Policy], **begin: Unpack[Start]
) -> Decision:
    """:func:`decide` for a door on an event loop: a step may return an awaitable."""
    decision = _first(call, **begin)
    for policy in ordered(policies):
        step = policy.apply(call, decision)
        if isinstance(step, Awaitable):
            step = await step
        decision = _carried(decision, step)
    return decision


def ordered(policies: Sequence[Policy]) -> list[Policy]:
    """The policies in :data:`ORDER`; a name outside it is a programming error."""
    unknown = [p.name for p in policies if p.name not in ORDER]
    if unknown:
        msg = f"unknown policy {unknown[0]!r}; the pipeline's steps are {', '.join(ORDER)}"
        raise ValueError(msg)
    return sorted(policies, key=lambda p: ORDER.index(p.name))


def _first(
    call: ToolCall,
    *,
    catalog: CatalogSettings | None = None,
    verdict: Classification | None = None,
    start: Decision | None = None,
) -> Decision:
    if start is not None:
        return start
    if verdict is None and catalog is not None:
        verdict = classify_call(call.tool_name, call.tool_input, catalog)
    return undecided(call, verdict)


def _carried(so_far: Decision, step: Decision | None) -> Decision:
    """The step's decision, still carrying the one classification."""
    if step is None:
        return so_far
    if step.classification is None and so_far.classification is not None:
        return step.but(classification=so_far.classification)
    return step


class Table:
    """The decision table as a step: the guard decides an undecided call (tags, waits).

    ``consume=False`` confirms a checkpoint without counting the call as a change
    (the MCP tool ``zerto_guard_before_mutate``).
    """

    name = "table"

    def __init__(self, guard: Guard, *, consume: bool = True) -> None:
        self.guard = guard
        self.consume = consume

    def apply(self, call: ToolCall, so_far: Decision) -> Decision | None:
        if so_far.row != Row.UNDECIDED:
            return None  # an earlier step (pins, self-protection) answered
        return self.guard.decide(call, consume=self.consume, verdict=so_far.classification)
