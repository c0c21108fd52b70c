"""What became of pending tags: landed (when, which checkpoint), failed, or still pending.

The decision log says "pending" at the moment of the decision; the state
directory learns later whether the tag landed (a retry found it, or this module
asked the ZVM). ``zerto-rewind log`` shows both side by side, so the log tells a
false denial from a real one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ZertoRewindError
from .decision import fmt_time
from .state import GuardStateLike, TagRecord, VpgRecord
from .tagging import tag_in_journal

__all__ = ["TagFate", "reconcile"]


@dataclass(frozen=True)
class TagFate:
    """The fate of one requested tag."""

    tag: str
    state: str  # landed | failed | pending | unknown
    detail: str
    checkpoint_id: str | None = None
    landed_at: float | None = None


def reconcile(
    records: list[dict[str, Any]],
    state: GuardStateLike | None,
    client: Any | None = None,
    *,
    clients: Callable[[str | None], Any] | None = None,
) -> dict[str, TagFate]:
    """Map every tag of a pending decision to its fate; asks the ZVM when state can't tell.

    ``clients(site)`` gives the ZVM of the site that took the tag (the tag record's
    ``site``; None for a one-ZVM tag), where its journal entry is asked; else ``client``.
    """
    fates: dict[str, TagFate] = {}
    pick = clients if clients is not None else (lambda _site: client)
    for record in records:
        if record.get("row") != "pending":
            continue
        for vpg_id, tag in zip(record.get("vpg_ids") or [], record.get("tags") or [], strict=False):
            if tag not in fates:
                fates[tag] = _fate(tag, vpg_id, state, pick)
    return fates


def _fate(
    tag: str, vpg_id: str, state: GuardStateLike | None, pick: Callable[[str | None], Any]
) -> TagFate:
    if state is None:
        return TagFate(tag, "unknown", "no state directory to look in")
    known = _known(state.peek_vpg(vpg_id), tag)
    if known is None:
        return TagFate(tag, "unknown", "not in the state directory (cleared, or another machine)")
    if known.state == "requested":
        try:
            client = pick(known.site)
        except ZertoRewindError as exc:
            known.reason = f"could not ask the ZVM of site {known.site}: {exc}"
            return _describe(known)
        if client is not None:
            known = _ask_zvm(state, vpg_id, known, client)
    return _describe(known)


def _known(record: VpgRecord, tag: str) -> TagRecord | None:
    if record.tag is not None and record.tag.name == tag:
        return record.tag
    for entry in reversed(record.history):
        if entry.get("name") == tag:
            fields = {k: entry.get(k) for k in ("name", "requested_at", "expected_at")}
            known = TagRecord(overdue_at=entry.get("expected_at") or 0.0, **fields)
            known.state = entry.get("state") or "requested"
            known.checkpoint_id = entry.get("checkpoint_id")
            known.landed_at = entry.get("landed_at")
            known.reason = entry.get("reason")
            known.site = entry.get("site")
            return known
    return None


def _ask_zvm(state: GuardStateLike, vpg_id: str, tag: TagRecord, client: Any) -> TagRecord:
    try:
        found, _listed = tag_in_journal(
            client, vpg_id, tag.name, tag.requested_at, deadline=time.monotonic() + 15
        )
    except ZertoRewindError as exc:
        tag.reason = f"could not ask the ZVM: {exc}"
        return tag
    with state.vpg(vpg_id) as record:
        current = record.tag
        if current is None or current.name != tag.name or current.state != "requested":
            return tag
        if found is not None:
            current.mark_landed(found.cp_id, found.timestamp.timestamp())
        elif time.time() > current.overdue_at:
            current.state = "failed"
            current.reason = (
                f"never reached the journal (overdue since {fmt_time(current.overdue_at)})"
            )
        return current


def _describe(tag: TagRecord) -> TagFate:
    if tag.state == "landed" and tag.landed_at is not None:
        late = tag.landed_at - tag.requested_at
        when = fmt_time(tag.landed_at)
        detail = f"landed {when} ({late:.0f} s after the request), checkpoint {tag.checkpoint_id}"
        return TagFate(tag.name, "landed", detail, tag.checkpoint_id, tag.landed_at)
    if tag.state == "failed":
        return TagFate(tag.name, "failed", tag.reason or "failed")
    detail = f"still pending, expected by {fmt_time(tag.expected_at)}"
    if tag.reason:
        detail += f"; {tag.reason}"
    return TagFate(tag.name, "pending", detail)
