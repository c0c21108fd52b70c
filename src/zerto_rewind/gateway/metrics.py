"""The gateway's Prometheus metrics, on a registry of its own (served at ``GET /metrics``).

Labels carry rows, outcomes, upstream names and answers: never a VM name, a
client token or an argument value.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase

from ..core.decision import Decision, Row

__all__ = ["GatewayMetrics"]

_SEEN_TAGS_KEEP = 4096


class GatewayMetrics:
    """Counters and histograms for decisions, tags, upstreams and elicitations."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._define_decisions()
        self._define_upstreams()
        self._define_limits()
        self._landed: OrderedDict[str, None] = OrderedDict()
        # One child per label set, looked up once: labels() takes a lock and
        # checks its arguments on every call. The label values are few (rows,
        # outcomes, upstreams, answers), so this stays small.
        self._children: dict[tuple[Any, ...], Any] = {}

    def _define_decisions(self) -> None:
        """Decisions, their latency, the prompts' answers, tags."""
        self.decisions = Counter(
            "zerto_rewind_decisions",
            "Decisions by row of the decision table and outcome.",
            ["row", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "zerto_rewind_decision_seconds",
            "Time from a tools/call arriving to the guard's answer (human approval included).",
            ["row"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 150),
            registry=self.registry,
        )
        self.tags = Counter(
            "zerto_rewind_tags",
            "Checkpoint tags by event: requested, landed (first seen in the journal), overdue, "
            "bounded (refused: guard.max_tags_per_minute reached on the VPG).",
            ["event"],
            registry=self.registry,
        )
        self.elicitations = Counter(
            "zerto_rewind_elicitations",
            "Prompt rows, by what the human (or the lack of one) answered.",
            ["answer"],
            registry=self.registry,
        )

    def _define_upstreams(self) -> None:
        """Calls forwarded to upstreams (the fast lane's too), their failures, pins."""
        self.upstream_errors = Counter(
            "zerto_rewind_upstream_errors",
            "Failures reaching a VM MCP server.",
            ["upstream", "kind"],
            registry=self.registry,
        )
        self.forwarded_calls = Counter(
            "zerto_rewind_forwarded_calls",
            "Calls forwarded to an upstream, by the row that allowed them.",
            ["upstream", "row"],
            registry=self.registry,
        )
        self.fast_lane_calls = Counter(
            "zerto_rewind_fast_lane_calls",
            "Read-only calls answered by the fast lane (counted in decisions and forwarded too).",
            ["upstream"],
            registry=self.registry,
        )

        self.pin_mismatches = Counter(
            "zerto_rewind_tool_pin_mismatches",
            "Upstream tools found not matching catalog.pins, by kind: changed, new, removed.",
            ["upstream", "kind"],
            registry=self.registry,
        )
        self.unreviewed_tools = Gauge(
            "zerto_rewind_unreviewed_tools",
            "Live tools of a pinned upstream that are new or changed (treated as unlisted).",
            ["upstream"],
            registry=self.registry,
        )

    def _define_limits(self) -> None:
        """The gateway.limits caps: refusals and what is held."""
        self.limited = Counter(
            "zerto_rewind_limited",
            "Requests refused with 429 past a gateway.limits cap, by cap (never by token).",
            ["cap"],
            registry=self.registry,
        )
        self.sessions_open = Gauge(
            "zerto_rewind_sessions_open",
            "Handshake-era sessions open (and being opened), every token together.",
            registry=self.registry,
        )
        self.argument_bytes_held = Gauge(
            "zerto_rewind_argument_bytes_held",
            "Bytes of request bodies held by calls in flight, every token together.",
            registry=self.registry,
        )

    def _child(self, metric: MetricWrapperBase, *values: str) -> Any:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def decided(self, decision: Decision, seconds: float, answer: str | None) -> None:
        self._child(self.decisions, decision.row, decision.outcome).inc()
        self._child(self.latency, decision.row).observe(seconds)
        if answer is not None:
            self._child(self.elicitations, answer).inc()
        for o in decision.vpgs:
            if o.new_tag:
                self.tags.labels("requested").inc()
            if o.row == Row.CONFIRMED and o.tag and o.tag not in self._landed:
                self._landed[o.tag] = None
                if len(self._landed) > _SEEN_TAGS_KEEP:
                    self._landed.popitem(last=False)
                self.tags.labels("landed").inc()
            if o.row == Row.FAILED and "never reached the journal" in o.reason:
                self.tags.labels("overdue").inc()
            if o.bounded:
                self.tags.labels("bounded").inc()

    def pin_mismatch(self, upstream: str, kind: str) -> None:
        self.pin_mismatches.labels(upstream, kind).inc()

    def unreviewed(self, upstream: str, count: int) -> None:
        self.unreviewed_tools.labels(upstream).set(count)

    def upstream_error(self, upstream: str, kind: str) -> None:
        self.upstream_errors.labels(upstream, kind).inc()

    def forwarded(self, upstream: str, row: str) -> None:
        self._child(self.forwarded_calls, upstream, row).inc()

    def fast_lane(self, upstream: str) -> None:
        self._child(self.fast_lane_calls, upstream).inc()

    def limited_by(self, cap: str) -> None:
        self._child(self.limited, cap).inc()

    def track_limits(self, sessions: Callable[[], float], held: Callable[[], float]) -> None:
        """Read the gateway.limits ledger's totals at each scrape."""
        self.sessions_open.set_function(sessions)
        self.argument_bytes_held.set_function(held)

    def render(self) -> bytes:
        return generate_latest(self.registry)
