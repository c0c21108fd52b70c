"""The approvals step of the pipeline: a prompt becomes a person's decision, one way for
every door.

:class:`Approvals` is the one approval flow of the standalone hook
(``guard.prompt_via: approvals``), the guard service's ``/v1/decide`` and the
gateway's ``tools/call``, over the file store or the Redis store
(``core.state_store.open_approvals``). For a prompt, in this order:

1. no approver configured: deny, saying so (an approval that nobody may give is
   never waited for, and an old approval is not used up on the way);
2. an approval of this very call (principal, tool, arguments) is used, once: the
   call runs, and the model is told who approved it;
3. else the open request for the call is joined, or a new one opened (logged,
   and sent to the webhook through ``notify``, from here only); the call is
   denied naming the request. A door that can hold the call (the gateway) then
   waits for the request on its own protocol.

A capped queue (``approvals.max_open_per_principal``) or a store that fails is a
deny that says what failed: a prompt that cannot be asked is refused, never run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .approvals import (
    NO_APPROVER,
    ApprovalLimitError,
    ApprovalRequest,
    ApprovalStore,
    approved_context,
    log_event,
    new_request,
    waiting_reason,
)
from .decision import Decision, Outcome, ToolCall, VpgOutcome

if TYPE_CHECKING:
    from ..config.settings import ApprovalsSettings

__all__ = ["Approvals", "channel_failed", "has_approvers"]

log = logging.getLogger("zerto_rewind.approvals")

# Posts one event ("requested") for one request; it must not raise.
Notify = Callable[[ApprovalRequest], None]


def has_approvers(config: ApprovalsSettings) -> bool:
    """Someone may approve: unix approvers, approver groups, or the page's approvers."""
    return bool(config.approver_users or config.approver_groups or config.web_approvers)


def channel_failed(exc: BaseException | None) -> str:
    """The refusal's ending when the approval store or its wait failed."""
    what = f" ({type(exc).__name__})" if exc is not None else ""
    return (
        f"It needs a person's approval, and the approval channel failed{what}. The call "
        "was not run. An operator can check the guard's state store."
    )


class Approvals:
    """The approvals step: for a prompt, approvers configured → use an approval → request."""

    name = "approvals"

    def __init__(
        self,
        store: Callable[[], ApprovalStore],
        config: ApprovalsSettings,
        log_path: str,
        *,
        principal: str,
        host: str | None = None,
        notify: Notify | None = None,
        link: Callable[[str], str | None] | None = None,
        secret_paths: Sequence[str] = (),
    ) -> None:
        """``store`` opens the store (files or Redis) when a prompt first needs it; its
        failure is the channel's. ``principal``: who asks (``unix:USER``, a token's name,
        ``hook:USER``); ``host``: the MCP client, for the approver; ``link``: the approvals
        page's address of a request; ``secret_paths``: arguments the tool's schema marks
        secret."""
        self.store = store
        self.config = config
        self.log_path = log_path
        self.principal = principal
        self.host = host
        self.notify = notify
        self.link = link
        self.secret_paths = tuple(secret_paths)

    def apply(self, call: ToolCall, so_far: Decision) -> Decision | None:
        if so_far.outcome != Outcome.PROMPT:
            return None
        if not has_approvers(self.config):
            return _refused(so_far, "no_approver", NO_APPROVER)
        try:
            store = self.store()
            used = store.consume(self.principal, call.tool_name, call.args_digest, None)
            if used is not None:
                self._log(used, "used")
                return so_far.but(
                    outcome=Outcome.CONTEXT,
                    context=approved_context(used),
                    answer="approved",
                    approval=used,
                    asked=so_far.reason,
                )
            request, created = store.open_request(
                self._template(call, so_far), self.config.max_open_per_principal
            )
        except ApprovalLimitError as exc:  # refused at once; the call's log line says why
            capped = _refused(so_far, "capped", exc.reason())
            return capped.but(asked=capped.reason)  # no request: the line keeps the cap
        except Exception as exc:  # the channel is down: refuse, never run it unasked
            log.warning("approval request failed: %s", type(exc).__name__)
            return _refused(so_far, "approvals_down", channel_failed(exc))
        if created:
            self._log(request, "requested")
            if self.notify is not None:
                self.notify(request)
        link = self.link(request.id) if self.link is not None else None
        waiting = _refused(so_far, "waiting", waiting_reason(request, link))
        return waiting.but(approval=request)

    def _template(self, call: ToolCall, decision: Decision) -> ApprovalRequest:
        return new_request(
            tool=call.tool_name,
            tool_input=call.tool_input,
            vms=decision.vms,
            row=decision.row,
            why=decision.reason,
            principal=self.principal,
            expires_s=self.config.expires_s,
            session=call.session_id,
            host=self.host,
            vpg_status=[vpg_status(v) for v in decision.vpgs],
            host_paths=decision.host_paths,
            secret_paths=self.secret_paths,
            wait_s=self.config.wait_s,
            args_digest=call.args_digest,
        )

    def _log(self, request: ApprovalRequest, answer: str) -> None:
        log_event(self.log_path, request, answer)  # the call's own line follows


def _refused(so_far: Decision, answer: str, ending: str) -> Decision:
    """The prompt refused for now: the guard's reason, then what became of the approval."""
    reason = f"{so_far.reason} {ending}".strip()
    return so_far.but(outcome=Outcome.DENY, reason=reason, answer=answer, asked=so_far.reason)


def vpg_status(outcome: VpgOutcome) -> str:
    """One VPG's row for the approver: ``name: row (why)``."""
    text = f"{outcome.vpg_name}: {outcome.row}"
    return f"{text} ({outcome.reason})" if outcome.reason else text
