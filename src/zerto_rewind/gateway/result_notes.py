"""What a forwarded call's result tells the agent: its checkpoint, or that it has none.

The upstream's result is returned as it came, plus the guard's note in three places,
because hosts show different parts of a result to their model: an added text block,
``_meta`` (``zerto-rewind/checkpoints`` or ``zerto-rewind/approval``), and, when the
result has an object there, ``structuredContent`` under ``zerto-rewind`` (Codex shows
its model structuredContent instead of the text) — unless the tool's output schema
forbids keys it does not name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..core.decision import Decision, Outcome, fmt_time

if TYPE_CHECKING:
    from ..core.approvals import ApprovalRequest

__all__ = [
    "BLOCK_SEPARATOR",
    "CLIENT_APPROVED",
    "STRUCTURED_KEY",
    "annotated",
    "error_result",
    "protection_note",
]

# Where the note goes in a result's structuredContent.
STRUCTURED_KEY = "zerto-rewind"

# Some hosts (Copilot CLI) join a result's text blocks with nothing between them; a
# block the guard adds starts with a blank line, so the joined text still reads as two
# paragraphs. Hosts that show blocks one by one trim it.
BLOCK_SEPARATOR = "\n\n"

# An approval given through the MCP client's own question (approvals.trust_client_answers).
CLIENT_APPROVED = (
    "zerto-rewind: this call ran with no rewind point: no Zerto checkpoint was in front of "
    "it, so there is nothing to rewind it to. The person at the MCP client approved it."
)


def annotated(
    result: types.CallToolResult,
    decision: Decision,
    output_schema: Mapping[str, Any] | None,
) -> types.CallToolResult:
    """A forwarded call's result, with the guard's note: its checkpoint, or its approval."""
    closed = output_schema is not None and output_schema.get("additionalProperties") is False
    if decision.answer == "approved" or decision.outcome == Outcome.PROMPT:
        # A person approved it (an approver, or the client's own): nothing to rewind it to.
        text = decision.context if decision.answer == "approved" else CLIENT_APPROVED
        approval: dict[str, Any] = {"zerto-rewind/approval": _approval_meta(decision.approval)}
        return _with_note(result, text, approval, {"note": text}, closed=closed)
    if decision.outcome == Outcome.CONTEXT:
        checkpoints = [
            {
                "vm": ",".join(o.vms),
                "vpg": o.vpg_name,
                "vpg_id": o.vpg_id,
                "checkpoint_id": o.checkpoint_id,
                "tag": o.tag,
            }
            for o in decision.vpgs
        ]
        note = {"note": decision.context, "checkpoints": checkpoints}
        meta = {"zerto-rewind/checkpoints": checkpoints}
        return _with_note(result, decision.context, meta, note, closed=closed)
    return result


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def protection_note(decision: Decision) -> str:
    """The checkpoint note of a call that was let through (for an error after forwarding)."""
    return decision.context if decision.outcome == Outcome.CONTEXT else ""


def _with_note(
    result: types.CallToolResult,
    text: str,
    meta_extra: Mapping[str, Any],
    structured_note: Mapping[str, Any],
    *,
    closed: bool,
) -> types.CallToolResult:
    meta = {**(result.meta or {}), **meta_extra}
    added = f"{BLOCK_SEPARATOR}{text}" if result.content else text
    content = [*result.content, types.TextContent(type="text", text=added)]
    update: dict[str, Any] = {"content": content, "meta": meta}
    structured = result.structured_content
    if isinstance(structured, dict) and STRUCTURED_KEY not in structured and not closed:
        update["structured_content"] = {**structured, STRUCTURED_KEY: dict(structured_note)}
    return result.model_copy(update=update)


def _approval_meta(request: ApprovalRequest | None) -> dict[str, Any]:
    at = request.decided_at if request is not None else None
    return {
        "approval_id": request.id if request is not None else None,
        "approver": (request.decided_by if request is not None else None)
        or "the person at the MCP client",
        "approved_at": fmt_time(at) if isinstance(at, float | int) else None,
        "rewind_point": None,
    }
