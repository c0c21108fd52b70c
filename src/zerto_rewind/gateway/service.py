"""What one running gateway holds: its settings, one guard, its upstreams, its metrics.

The core guard is synchronous (it sleeps while a tag lands), so each decision
runs in a worker thread; the event loop keeps serving other calls meanwhile.
A decision that outlives the guard's budget (a stuck lock, a hung callback) is
abandoned and answered with a deny: the call is not forwarded.

Pins (``catalog.pins``): for an upstream with pins, each tools/list it gives
(at start, on reconnect, after ``tools/list_changed``) is compared with them.
Only tools whose digest matches are *reviewed*; any other tool of that
upstream (new, changed, or not compared yet) is unlisted, whatever the
catalog's patterns say. A reviewed call pays one set lookup for this.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types

from ..core.catalog import READ_ONLY
from ..core.deadline import timeout_reason
from ..core.decision import Decision, Outcome, Row, ToolCall
from ..core.guard import Guard
from ..core.pipeline import Policy, StepResult, Table, classify_call, decide_async
from . import tracing
from .approvals import ApprovalsService
from .log_witness import LogWitness
from .metrics import GatewayMetrics
from .pins import PinGate
from .request_state import RequestStates
from .upstream import EraMemo, Upstream

if TYPE_CHECKING:
    from ..config.settings import Settings

__all__ = ["Gateway"]

log = logging.getLogger("zerto_rewind.gateway")

# Decisions run in threads; one VPG's callers mostly wait on a lock or a
# landing, so this is a bound on memory, not on CPU.
_DECISION_THREADS = 200
_HEALTH_TTL_S = 5.0


class Gateway:
    """The guard as a long-running service in front of VM MCP servers."""

    def __init__(self, settings: Settings, *, guard: Guard | None = None) -> None:
        tracing.setup()  # OTEL_* asks for traces, or nothing of OpenTelemetry is imported
        self.settings = settings
        self.metrics = GatewayMetrics()
        self.upstreams = {name: Upstream(spec) for name, spec in settings.upstreams.items()}
        self.guard = guard if guard is not None else _open_guard(settings)
        self.table = Table(self.guard)
        self._limiter = anyio.CapacityLimiter(_DECISION_THREADS)
        self._base_catalog = settings.catalog
        self._proposals: dict[str, dict[str, Any]] = {}
        self._health: tuple[float, dict[str, Any]] | None = None
        self.approvals = ApprovalsService(settings)
        # requestState for 2026-07-28 clients lives as long as a question may stay open
        self.states = RequestStates(
            max(settings.gateway.elicit_timeout_s, settings.approvals.expires_s)
        )
        self.pins = PinGate(settings, self.upstreams, self.metrics)
        self.log_witness = LogWitness(settings)
        for upstream in self.upstreams.values():
            upstream.log_path = upstream.settings.log_path or os.path.join(
                settings.state_dir, "upstreams", f"{upstream.name}.log"
            )
            upstream.era = EraMemo(
                upstream.name, os.path.join(settings.state_dir, "upstreams", f"{upstream.name}.era")
            )

    # ------------------------------------------------------------------ lifecycle

    async def start(self, tg: anyio.abc.TaskGroup, names: list[str] | None = None) -> None:
        """Start the supervisors of the named upstreams (all by default)."""
        tg.start_soon(self.approvals.sweeper)
        self.log_witness.start(tg)
        for name in names or list(self.upstreams):
            upstream = self.upstreams[name]
            if self.pins.pinned(upstream.name):
                self.pins.enable(upstream)  # before it runs: its first list is compared
                tg.start_soon(self.pins.watch, upstream)
            else:
                log.warning(
                    "upstream %s: no catalog.pins for its tools; a changed or new tool is "
                    "classified by the catalog's patterns (`zerto-rewind catalog scan` pins them)",
                    upstream.name,
                )
            await tg.start(upstream.run)
            if self.settings.catalog.from_annotations:
                tg.start_soon(self._learn_when_connected, upstream)

    # ------------------------------------------------------------------ catalog.from_annotations

    async def _learn_when_connected(self, upstream: Upstream) -> None:
        try:
            tools = await upstream.list_tools(upstream.settings.timeout_s)
        except Exception:  # the first tools/list from a client tries again
            log.warning("upstream %s: tool list not read for from_annotations", upstream.name)
            return
        self.learn_tools(upstream.name, tools)

    def learn_tools(self, upstream: str, tools: list[types.Tool]) -> None:
        """With ``catalog.from_annotations``, classify unlisted tools by the scan's rules.

        Explicit catalog entries always win, except that the host paths the live schemas
        show are always added (scan.extend_catalog); tools of upstreams not yet listed
        stay unlisted (they prompt) until their list is read.
        """
        if not self.settings.catalog.from_annotations or upstream in self._proposals:
            return
        from ..scan.heuristics import catalog_from_tools, extend_catalog

        raw = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]
        self._proposals[upstream] = catalog_from_tools(upstream, raw).catalog
        catalog = self._base_catalog
        for proposal in self._proposals.values():
            catalog = extend_catalog(catalog, proposal)
        self.settings.catalog = catalog  # one assignment: decisions see old or new, never half

    def close(self) -> None:
        tracing.shutdown()  # the spans still batched are sent before the process ends
        self.log_witness.close()
        for upstream in self.upstreams.values():
            upstream.close()
        self.guard.close()
        close_state = getattr(self.guard.state(), "close", None)
        if callable(close_state):  # a Redis state holds a connection pool
            close_state()

    # ------------------------------------------------------------------ deciding

    async def decide(self, call: ToolCall, after: Sequence[Policy] = ()) -> Decision:
        """The pipeline (core.pipeline) for one call: pins, the table, then the door's
        ``after`` steps (the identity check, approvals). Never later than the guard's
        budget; any failure denies.

        The call is classified once, here, on the event loop (pure, microseconds). A
        read-only call of a reviewed tool is answered on the loop too: the table does no
        IO for it. Anything else goes to the guard in a worker thread.
        """
        verdict = classify_call(call.tool_name, call.tool_input, self.settings.catalog)
        steps: list[Policy] = [self.pins, _ThreadedTable(self), *after]
        return await decide_async(call, steps, verdict=verdict)

    async def _judge(self, call: ToolCall, so_far: Decision) -> Decision | None:
        """The table in a worker thread, bounded by the budget; a crash is a refusal."""
        budget = self.settings.guard.timeout_s
        try:
            with anyio.fail_after(budget + 1.0):
                return await anyio.to_thread.run_sync(
                    self.table.apply, call, so_far, limiter=self._limiter, abandon_on_cancel=True
                )
        except TimeoutError:
            reason = timeout_reason(
                call.tool_name, budget, "the guard did not answer in time", "the gateway's /healthz"
            )
            return Decision(Row.ERROR, Outcome.DENY, call.tool_name, reason=reason)
        except Exception as exc:  # fail closed: the guard's crash is a refusal
            # No traceback or message: either may quote the call's arguments.
            log.error("the guard failed on %s: %s", call.tool_name, describe_error(exc))
            return refusal_for_error(call, exc)

    def call_timeout_s(self, upstream: Upstream) -> float:
        return upstream.settings.timeout_s

    # ------------------------------------------------------------------ health

    async def health(self) -> dict[str, Any]:
        """Ready or not, and why: the ZVM, the shared state, each upstream."""
        now = time.monotonic()
        if self._health is not None and now - self._health[0] < _HEALTH_TTL_S:
            cached = dict(self._health[1])
        else:
            cached = {
                "zvm": await anyio.to_thread.run_sync(self._zvm_health, abandon_on_cancel=True),
                "state": await anyio.to_thread.run_sync(self._state_health, abandon_on_cancel=True),
            }
            self._health = (now, cached)
        upstreams = {name: u.health() for name, u in self.upstreams.items()}
        ready = (
            cached["zvm"] == "ok"
            and cached["state"] == "ok"
            and all(v == "connected" for v in upstreams.values())
        )
        return {"ready": ready, **cached, "upstreams": upstreams}

    def _zvm_health(self) -> str:
        """ "ok" when every site's ZVM answers; else each one that does not, by site."""
        estate = self.guard.estate()
        problems = []
        for site in estate.names:
            try:
                estate.client(site).entity_types(deadline=time.monotonic() + 5.0)
            except Exception as exc:
                shown = f"unreachable: {type(exc).__name__}: {exc}"
                problems.append(shown if len(estate.names) == 1 else f"{site}: {shown}")
        return "; ".join(problems) or "ok"

    def _state_health(self) -> str:
        try:
            self.guard.state().check()
        except Exception as exc:
            return f"unreachable: {type(exc).__name__}: {exc}"
        return "ok"


class _ThreadedTable:
    """The table step on the event loop: a read-only call is judged in place (no IO), any
    other in a worker thread, bounded by the budget (:meth:`Gateway._judge`)."""

    name = "table"

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def apply(self, call: ToolCall, so_far: Decision) -> StepResult:
        if so_far.row != Row.UNDECIDED:
            return None
        verdict = so_far.classification
        if verdict is not None and verdict.kind == READ_ONLY:
            return self.gateway.table.apply(call, so_far)
        return self.gateway._judge(call, so_far)


def _open_guard(settings: Settings) -> Guard:
    """One guard for the life of the service: one ZVM connection pool, one state."""
    from ..config.settings import validate_patterns

    validate_patterns(settings)  # a bad vm_arg pattern stops the start, not a call
    guard = Guard(settings)
    # Created now, in one thread: the decisions' worker threads then share them.
    guard.state()
    estate = guard.estate()
    for site in estate.names:
        estate.client(site)
    return guard


def describe_error(exc: BaseException) -> str:
    """An exception for the gateway's log: its type and where it was raised, never its
    message (which may quote a tool argument)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}" if tb else ""
    return f"{type(exc).__name__}{where}"


def refusal_for_error(call: ToolCall, exc: BaseException) -> Decision:
    """The guard itself failed: deny, with what failed."""
    reason = (
        f"zerto-rewind hit an internal error ({type(exc).__name__}) while guarding "
        f"{call.tool_name}; the call was not run. An operator can check the gateway's log "
        "and `zerto-rewind doctor`."
    )
    return Decision(Row.ERROR, Outcome.DENY, call.tool_name, reason=reason)
