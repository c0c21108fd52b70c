"""The gateway's pin gate: only tools that match their reviewed pin are trusted as catalogued.

For each upstream that has pins in ``catalog.pins``, :class:`PinGate` keeps the
set of its tools whose live digest equals the pin (``reviewed``). The set is
rebuilt from each fresh tools/list and emptied for that upstream the moment
its list goes stale (a reconnect, ``tools/list_changed``), so a tool is never
trusted on a list that was not compared. A call to a pinned upstream's tool
outside the set is answered here as unlisted: it prompts (or is denied when
``unknown_tools`` is ``deny``), whatever the catalog's patterns say.

Each change is logged by tool name (never a schema or a value), counted in
``zerto_rewind_tool_pin_mismatches_total{upstream,kind}`` and shown in the
gauge ``zerto_rewind_unreviewed_tools{upstream}``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import anyio
import mcp_types as types

from ..core.decision import Decision, Outcome, Row, ToolCall
from ..scan.pins import CHANGED, NEW, REMOVED, compare_pins, server_pins
from .upstream import UpstreamError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from .metrics import GatewayMetrics
    from .upstream import Upstream

__all__ = ["PinGate"]

log = logging.getLogger("zerto_rewind.gateway")

_RETRY_S = 2.0


class PinGate:
    """Which pinned tools are reviewed right now, and the refusal for the others."""

    def __init__(
        self, settings: Settings, upstreams: dict[str, Upstream], metrics: GatewayMetrics
    ) -> None:
        # settings.catalog is read at each use: catalog.from_annotations replaces it.
        self.settings = settings
        self.upstreams = upstreams
        self.metrics = metrics
        pins = settings.catalog.pins
        self._pinned = {name for name in upstreams if server_pins(pins, name)}
        self._prefix: dict[str, str] = {}
        self.prefixes: tuple[str, ...] = ()  # of the upstreams this gateway runs and gates
        self.reviewed: frozenset[str] = frozenset()
        self._reviewed_by: dict[str, frozenset[str]] = {}
        self._unreviewed_by: dict[str, dict[str, str]] = {}
        self._removed_by: dict[str, frozenset[str]] = {}
        self._compared: set[str] = set()

    def enable(self, upstream: Upstream) -> None:
        """Gate a pinned upstream this gateway runs (one it does not run gates nothing: a
        call for it would wait on a list that never comes)."""
        name = upstream.name
        self._prefix[name] = f"mcp__{name}__"
        # Longest first, so the upstream "a_b" is found before "a" for mcp__a_b__…
        self.prefixes = tuple(sorted(self._prefix.values(), key=len, reverse=True))
        upstream.on_stale = functools.partial(self.stale, name)
        upstream.on_listed = functools.partial(self.listed, name)

    def pinned(self, upstream: str) -> bool:
        return upstream in self._pinned

    def unreviewed(self, upstream: str) -> dict[str, str]:
        """The upstream's live tools that are new or changed: host name -> kind."""
        return dict(self._unreviewed_by.get(upstream, {}))

    # ------------------------------------------------------------------ comparing

    def stale(self, upstream: str) -> None:
        """The upstream's list is no longer the one compared: trust none of its tools."""
        self._compared.discard(upstream)
        self._reviewed_by[upstream] = frozenset()
        self._publish()

    def listed(self, upstream: str, tools: list[types.Tool]) -> None:
        """A fresh tools/list of ``upstream``: compare it with the pins."""
        raw = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]
        diff = compare_pins(upstream, raw, self.settings.catalog.pins)
        before = self._unreviewed_by.get(upstream, {})
        now = diff.unreviewed()
        metrics = self.metrics
        for name, kind in now.items():
            if before.get(name) != kind:
                metrics.pin_mismatch(upstream, kind)
                what = "changed since it was pinned" if kind == CHANGED else "is not pinned"
                log.warning(
                    "upstream %s: tool %s %s; it is treated as unlisted until reviewed "
                    "(catalog scan --merge)",
                    upstream,
                    name,
                    what,
                )
        for name in before:
            if name not in now:
                log.info("upstream %s: tool %s matches its pin again", upstream, name)
        removed = frozenset(diff.removed)
        for name in sorted(removed - self._removed_by.get(upstream, frozenset())):
            metrics.pin_mismatch(upstream, REMOVED)
            log.info("upstream %s: pinned tool %s is no longer listed", upstream, name)
        self._removed_by[upstream] = removed
        self._unreviewed_by[upstream] = now
        metrics.unreviewed(upstream, len(now))
        self._reviewed_by[upstream] = frozenset(diff.matching)
        self._compared.add(upstream)
        self._publish()

    def _publish(self) -> None:
        # One assignment: a decision sees the old set or the new one, never half.
        self.reviewed = frozenset().union(*self._reviewed_by.values())

    async def watch(self, upstream: Upstream) -> None:
        """List the upstream's tools whenever its list goes stale, so the comparison (and its
        log line and metric) happens when the list changes, not at the next call."""
        upstream.tools_changed.set()  # the first comparison, as soon as it connects
        while not upstream.stopping():
            await upstream.tools_changed.wait()
            upstream.tools_changed = anyio.Event()
            while not upstream.stopping():
                try:
                    await upstream.list_tools(upstream.settings.timeout_s)
                    break
                except UpstreamError:
                    log.warning("upstream %s: tools not listed for the pin check", upstream.name)
                    await anyio.sleep(_RETRY_S)

    # ------------------------------------------------------------------ deciding

    name = "pins"

    def apply(self, call: ToolCall, so_far: Decision) -> Awaitable[Decision | None] | None:
        """The pipeline's ``pins`` step: nothing to do for a reviewed tool or one of no
        pinned upstream (one set lookup); else :meth:`hold`."""
        if so_far.row != Row.UNDECIDED or not self.prefixes or call.tool_name in self.reviewed:
            return None
        return self.hold(call)

    async def hold(self, call: ToolCall) -> Decision | None:
        """None for a reviewed tool (or one of no pinned upstream); else the unlisted answer."""
        name = call.tool_name
        upstream = next((u for u, p in self._prefix.items() if name.startswith(p)), None)
        if upstream is None:
            return None
        if upstream not in self._compared:
            target = self.upstreams[upstream]
            try:
                await target.list_tools(target.settings.timeout_s)
            except UpstreamError as exc:
                return self._refusal(call, upstream, None, f"{exc}")
        if name in self.reviewed:
            return None
        kind = self._unreviewed_by.get(upstream, {}).get(name)
        return self._refusal(call, upstream, kind, None)

    def _refusal(
        self, call: ToolCall, upstream: str, kind: str | None, failure: str | None
    ) -> Decision:
        catalog = self.settings.catalog
        if failure is not None:
            why = (
                f"the tool list of {upstream!r} could not be compared with its reviewed pins "
                f"({failure})"
            )
        elif kind == CHANGED:
            why = (
                "its description, input schema or annotations changed since the catalog was "
                "reviewed (its pin in catalog.pins no longer matches)"
            )
        elif kind == NEW:
            why = f"it is new: {upstream!r} did not list it when the catalog was reviewed"
        else:
            why = f"{upstream!r} does not list it now"
        reason = (
            f"zerto-rewind treats {call.tool_name} as unlisted, so no checkpoint was made: {why}. "
            "Approve only if you know what this tool does now. An operator can review it with "
            f"`zerto-rewind catalog scan --server {upstream} --merge CONFIG` and re-pin it."
        )
        # A tool nobody reviewed is never allowed unasked, whatever unknown_tools says.
        outcome = Outcome.DENY if catalog.unknown == "deny" else Outcome.PROMPT
        return Decision(Row.UNLISTED, outcome, call.tool_name, reason=reason)
