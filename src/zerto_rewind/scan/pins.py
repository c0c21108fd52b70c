"""Pins: what was reviewed of each tool, as a digest, and how a live tool list differs.

A pin is ``sha256:`` and the SHA-256 of a canonical JSON of the tool's
``description``, ``inputSchema`` and ``annotations`` (keys sorted, no
whitespace, ``None`` annotations dropped). ``catalog scan`` records one per
tool in ``catalog.pins`` (host names); the gateway compares each live
``tools/list`` with them, and a tool that is new or whose digest changed is
treated as unlisted until a person reviews it again (``scan --merge``).

Pure: no I/O. The gateway imports it on each tools/list, never per call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHANGED",
    "NEW",
    "REMOVED",
    "PinDiff",
    "PinMerge",
    "compare_pins",
    "merge_pins",
    "merge_report",
    "pins_for",
    "server_pins",
    "tool_digest",
]

CHANGED = "changed"
NEW = "new"
REMOVED = "removed"
PREFIX = "sha256:"


def tool_digest(tool: Mapping[str, Any]) -> str:
    """The pin of one tool (wire shape: ``description``, ``inputSchema``, ``annotations``)."""
    annotations = tool.get("annotations")
    if isinstance(annotations, Mapping):
        annotations = {k: v for k, v in annotations.items() if v is not None}
    canonical = {
        "description": tool.get("description"),
        "inputSchema": tool.get("inputSchema"),
        "annotations": annotations or None,
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def pins_for(server: str, tools: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Host name (``mcp__server__tool``) -> pin, for every tool, in the server's order."""
    return {f"mcp__{server}__{t.get('name')}": tool_digest(t) for t in tools}


def server_pins(pins: Mapping[str, str], server: str) -> dict[str, str]:
    """The pins that belong to ``server`` (their host names start ``mcp__server__``)."""
    prefix = f"mcp__{server}__"
    return {name: pin for name, pin in pins.items() if name.startswith(prefix)}


@dataclass
class PinDiff:
    """How a live tool list differs from one server's pins (host names, sorted)."""

    pinned: bool  # the server has any pins at all
    matching: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    live: dict[str, str] = field(default_factory=dict)  # host name -> live pin

    @property
    def clean(self) -> bool:
        return not (self.changed or self.new or self.removed)

    def unreviewed(self) -> dict[str, str]:
        """Live tools that must not be trusted yet: host name -> ``changed`` | ``new``."""
        return {**dict.fromkeys(self.new, NEW), **dict.fromkeys(self.changed, CHANGED)}


def compare_pins(
    server: str, tools: Sequence[Mapping[str, Any]], pins: Mapping[str, str]
) -> PinDiff:
    """Compare ``tools`` (one server's live list) with the pins in ``pins``."""
    mine = server_pins(pins, server)
    live = pins_for(server, tools)
    diff = PinDiff(pinned=bool(mine), live=live)
    for name, digest in live.items():
        pin = mine.get(name)
        if pin is None:
            diff.new.append(name)
        elif pin == digest:
            diff.matching.append(name)
        else:
            diff.changed.append(name)
    diff.removed = [name for name in mine if name not in live]
    for names in (diff.matching, diff.changed, diff.new, diff.removed):
        names.sort()
    return diff


@dataclass
class PinMerge:
    """What ``catalog scan --merge`` does to ``catalog.pins``, and what a person must review."""

    pins: dict[str, str]  # every pin of the merged config (all servers)
    diff: PinDiff
    added: list[str] = field(default_factory=list)  # new tools pinned now
    held: dict[str, str] = field(default_factory=dict)  # new tools not pinned: name -> why
    repinned: list[str] = field(default_factory=list)  # changed tools re-pinned (--repin)
    dropped: list[str] = field(default_factory=list)  # pins of removed tools (--repin)


def merge_pins(
    server: str,
    tools: Sequence[Mapping[str, Any]],
    pins: Mapping[str, str],
    *,
    repin: bool = False,
    conflicts: Mapping[str, str] | None = None,
) -> PinMerge:
    """Pin new tools; keep the pins of reviewed tools unless ``repin``.

    ``conflicts`` names new tools the config already reads as read-only (by a
    pattern) while the scan says they change things: pinning them would make
    the pattern's verdict the reviewed one, so they stay unpinned (they keep
    prompting in the gateway) unless ``repin``, and the reason is reported.
    """
    diff = compare_pins(server, tools, pins)
    merged = dict(pins)
    result = PinMerge(merged, diff)
    for name in diff.new:
        why = (conflicts or {}).get(name)
        if why is not None and not repin:
            result.held[name] = why
            continue
        merged[name] = diff.live[name]
        result.added.append(name)
    if repin:
        for name in diff.changed:
            merged[name] = diff.live[name]
            result.repinned.append(name)
        for name in diff.removed:
            del merged[name]
            result.dropped.append(name)
    return result


def merge_report(merge: PinMerge, server: str) -> list[str]:
    """The lines ``--merge`` writes to stderr: every difference from the pins, for review."""
    diff = merge.diff
    lines: list[str] = []
    if not diff.pinned:
        lines.append(f"pins: {server} had no pins; pinned {len(merge.added)} tool(s) as scanned")
    elif diff.clean:
        lines.append(f"pins: every tool of {server} matches its pin")
    lines += _by_repin(
        diff.changed,
        merge.repinned,
        "pins: CHANGED {name}: re-pinned as scanned now (--repin)",
        "pins: CHANGED {name}: its description, input schema or annotations differ "
        "from the pin; the pin is kept, so the gateway treats it as unlisted. Review "
        "the tool's entry against the table, then scan again with --repin",
    )
    if diff.pinned:
        for name in merge.added:
            lines.append(f"pins: NEW {name}: pinned; review its entry before installing")
    for name, why in merge.held.items():
        lines.append(f"pins: NEW {name}: NOT pinned ({why}); add an exact entry, or --repin")
    lines += _by_repin(
        diff.removed,
        merge.dropped,
        "pins: REMOVED {name}: the server no longer lists it; pin dropped",
        "pins: REMOVED {name}: the server no longer lists it; the pin is kept (--repin drops it)",
    )
    return lines


def _by_repin(names: list[str], done: list[str], when_done: str, when_kept: str) -> list[str]:
    """A line a tool: ``when_done`` if --repin acted on it, else ``when_kept``."""
    return [(when_done if name in done else when_kept).format(name=name) for name in names]
