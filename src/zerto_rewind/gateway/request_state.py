"""The ``requestState`` the gateway hands 2026-07-28 clients, and the question's form.

An InputRequiredResult asks the client to show a person something (our form, or
the approval page's URL) and retry the call with the answer and the state. The
state is this process's word on what it asked, of whom, about which call: see
:class:`RequestStates`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..core.decision import ToolCall


class CallContext(Protocol):
    """What a state is bound to, of the call's context (``calls.CallContext``)."""

    client: str
    session_id: str | None
    request_state: str | None
    input_responses: dict[str, Any] | None


__all__ = ["APPROVAL_FIELD", "APPROVAL_KEY", "APPROVAL_SCHEMA", "RequestStates"]

# The key of our question in an InputRequiredResult, and the form it shows.
APPROVAL_KEY = "zerto-rewind/approve"
APPROVAL_FIELD = "approve"
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        APPROVAL_FIELD: {
            "type": "boolean",
            "title": "Run it without a checkpoint",
            "description": "Approve only if you accept this change with no rewind point.",
        }
    },
    "required": [APPROVAL_FIELD],
}


class RequestStates:
    """The ``requestState`` handed to 2026-07-28 clients: bound, expiring, single use.

    A state binds the principal, the session, the tool and its canonical
    arguments' digest, the approval request (if any), a nonce and an expiry,
    under an HMAC only this process can make. :meth:`valid` accepts a state once:
    a replay across tokens, across sessions, after expiry or a second time fails.
    """

    def __init__(self, ttl_s: float, *, clock: Callable[[], float] = time.time) -> None:
        self.ttl_s = ttl_s
        self._key = secrets.token_bytes(32)
        self._clock = clock
        self._used: dict[str, float] = {}  # nonce -> expiry, swept as they lapse

    def issue(self, call: ToolCall, ctx: CallContext, request_id: str | None = None) -> str:
        body = {
            "p": ctx.client,
            "s": ctx.session_id,
            "t": call.tool_name,
            "d": call.args_digest,
            "r": request_id,
            "n": secrets.token_urlsafe(12),
            "e": round(self._clock() + self.ttl_s, 3),
        }
        raw = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode())
        return f"{raw.decode()}.{self._sign(raw)}"

    def valid(self, call: ToolCall, ctx: CallContext, request_id: str | None = None) -> bool:
        """True once for a state this process issued for this very call, principal and session."""
        state = ctx.request_state or ""
        raw, _, mac = state.partition(".")
        if not raw or not hmac.compare_digest(mac, self._sign(raw.encode())):
            return False
        try:
            body = json.loads(base64.urlsafe_b64decode(raw.encode()))
        except ValueError:
            return False
        now = self._clock()
        expected = {
            "p": ctx.client,
            "s": ctx.session_id,
            "t": call.tool_name,
            "d": call.args_digest,
            "r": request_id,
        }
        if not isinstance(body, dict) or any(body.get(k) != v for k, v in expected.items()):
            return False
        expires, nonce = body.get("e"), body.get("n")
        if not isinstance(expires, int | float) or expires <= now or not isinstance(nonce, str):
            return False
        self._used = {n: e for n, e in self._used.items() if e > now}
        if nonce in self._used:
            return False
        self._used[nonce] = float(expires)
        return True

    def answer(self, call: ToolCall, ctx: CallContext) -> tuple[bool, str] | None:
        """The form answer a retried call carries, if its state is valid; else None (ask)."""
        responses = ctx.input_responses or {}
        answer = responses.get(APPROVAL_KEY)
        if answer is None or not self.valid(call, ctx):
            return None
        action = getattr(answer, "action", None)
        content = getattr(answer, "content", None) or {}
        if action == "accept":
            approved = content.get(APPROVAL_FIELD) is True
            return approved, "approved" if approved else "declined"
        return False, "declined" if action == "decline" else "cancelled"

    def _sign(self, raw: bytes) -> str:
        return hmac.new(self._key, raw, hashlib.sha256).hexdigest()
