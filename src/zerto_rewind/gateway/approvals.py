"""The guard service's approval requests: open one per prompt-row call, wait, answer, log.

Every channel goes through :class:`ApprovalsService`: the MCP call path opens a
request and waits on it; the approvals socket and the approvals page answer it
for an :class:`~zerto_rewind.core.approvals.Approver` that the channel itself
authenticated. The rules (who may approve, one call, once, expiry) are
``core.approvals``; this module adds the service's settings, the decision-log
lines and the notification.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..core.approvals import (
    APPROVED,
    DENIED,
    PENDING,
    ApprovalError,
    ApprovalRequest,
    ApprovalStore,
    Approver,
    new_request,
    record_event,
    refusal_to_approve,
)
from ..core.decision import Decision, ToolCall
from ..core.state_store import open_approvals
from ..errors import StateError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from .approvals_login import Failure

__all__ = ["ApprovalsService", "LoginNotifier", "Notifier"]

log = logging.getLogger("zerto_rewind.gateway")

# A notifier posts one event ("requested", "approved", …) for one request; it must not raise.
Notifier = Callable[[str, ApprovalRequest], Awaitable[None]]
# The page's failed logins, summarised (approvals_login.LoginLimit.due_report).
LoginNotifier = Callable[[list["Failure"]], Awaitable[None]]
# Decisions made in this process wake their waiters at once (_changed); the poll finds
# those of other replicas.
_POLL_S = 1.0
_SWEEP_S = 15.0


class ApprovalsService:
    """One service's approval requests, in its own state (files or Redis)."""

    def __init__(self, settings: Settings, store: ApprovalStore | None = None) -> None:
        self.settings = settings
        self.config = settings.approvals
        self.store: ApprovalStore = (
            store
            if store is not None
            else open_approvals(settings.state_connection_url(), settings.state_dir)
        )
        self.notifier: Notifier | None = None
        self.login_notifier: LoginNotifier | None = None
        # Set by the page when it listens: links in notifications and URL elicitation.
        self.page_url: str | None = self.config.page_url
        # Requests decided in this process wake their waiters at once; others are polled.
        self._changed = anyio.Event()

    # ------------------------------------------------------------------ who is an agent

    @property
    def agent_principals(self) -> tuple[str, ...]:
        """Every name a caller of the guard has: token names can never approve."""
        return tuple(self.settings.gateway.clients)

    def refusal(self, approver: Approver, request: ApprovalRequest | None) -> str | None:
        """Why ``approver`` may not answer ``request`` (or any request); None if they may."""
        config = self.config
        users = config.approver_users
        if approver.kind == "web":
            users = tuple(config.web_approvers)
        return refusal_to_approve(
            approver,
            request,
            users=users,
            groups=config.approver_groups if approver.kind == "unix" else (),
            agent_users=config.agent_users,
            agent_principals=self.agent_principals,
        )

    @property
    def has_approvers(self) -> bool:
        config = self.config
        return bool(config.approver_users or config.approver_groups or config.web_approvers)

    # ------------------------------------------------------------------ the call side

    async def consume(self, call: ToolCall, principal: str) -> ApprovalRequest | None:
        """An approval of this exact call for this principal, used now; else None."""

        def consume() -> ApprovalRequest | None:  # the digest of large arguments: off the loop
            return self.store.consume(principal, call.tool_name, call.args_digest, None)

        used = await anyio.to_thread.run_sync(consume)
        if used is not None:
            self._log(used, "used")
        return used

    async def open(
        self,
        call: ToolCall,
        decision: Decision,
        principal: str,
        *,
        host: str | None = None,
        secret_paths: list[str] | None = None,
    ) -> tuple[ApprovalRequest, bool]:
        """The open request for this call (a retry joins it), else a new one, logged and sent.

        ``secret_paths``: arguments the tool's schema marks secret, masked for the approver.
        The caller waits ``approvals.wait_s``: the request says until when.
        """

        # Built in the worker thread: copying and hashing large arguments stalls no one else.
        def store() -> tuple[ApprovalRequest, bool]:
            template = self._template(call, decision, principal, host, secret_paths)
            return self.store.open_request(template, self.config.max_open_per_principal)

        request, created = await anyio.to_thread.run_sync(store)
        if created:
            self._log(request, "requested")
            await self._notify("requested", request)
        # The caller waits with the request's facts, not a second copy of the arguments:
        # the store keeps them for the approver, and the call holds its own.
        return replace(request, call_arguments=None), created

    def _template(
        self,
        call: ToolCall,
        decision: Decision,
        principal: str,
        host: str | None,
        secret_paths: list[str] | None,
    ) -> ApprovalRequest:
        return new_request(
            tool=call.tool_name,
            tool_input=call.tool_input,
            vms=decision.vms,
            row=decision.row,
            why=decision.reason,
            principal=principal,
            expires_s=self.config.expires_s,
            session=call.session_id,
            host=host,
            vpg_status=[_vpg_status(v) for v in decision.vpgs],
            host_paths=decision.host_paths,
            secret_paths=secret_paths or (),
            wait_s=self.config.wait_s,
            args_digest=call.args_digest,
        )

    async def wait(
        self,
        request_id: str,
        timeout_s: float,
        on_tick: Callable[[float], Awaitable[None]] | None = None,
        tick_s: float = 5.0,
    ) -> ApprovalRequest | None:
        """The request once it is decided or expired, or its pending state at the timeout.

        ``on_tick(elapsed)`` runs every ``tick_s`` (progress notifications keep the
        host from timing the call out). None if the request disappeared.
        """
        started = time.monotonic()
        deadline, next_tick = started + timeout_s, started + tick_s
        while True:
            changed = self._changed  # before the read: a decision after it wakes this wait
            request = await anyio.to_thread.run_sync(self.store.get, request_id)
            if request is None or request.state != PENDING:
                return request
            now = time.monotonic()
            if now >= deadline:
                return request
            del request  # not held while waiting: a copy of the call's arguments
            if on_tick is not None and now >= next_tick:
                next_tick = now + tick_s
                await on_tick(now - started)
            until = min(now + _POLL_S, deadline, next_tick if on_tick is not None else deadline)
            with anyio.move_on_after(max(0.0, until - time.monotonic())):
                await changed.wait()

    async def use(self, request: ApprovalRequest) -> ApprovalRequest | None:
        """Use ``request``'s approval for its own call, once (None if someone used it first)."""
        used = await anyio.to_thread.run_sync(
            self.store.consume, request.principal, request.tool, request.args_digest, request.id
        )
        if used is not None:
            self._log(used, "used")
        return used

    # ------------------------------------------------------------------ the approver side

    def answer_sync(
        self, approver: Approver, request_id: str, approve: bool, note: str | None = None
    ) -> ApprovalRequest:
        """Approve or deny for an authenticated approver; ApprovalError if they may not."""
        current = self.store.get(request_id)
        if current is None:
            msg = f"no approval request {request_id}"
            raise ApprovalError(msg)
        why_not = self.refusal(approver, current)
        if why_not is not None:
            log.warning("approval refused: %s on request %s", why_not, request_id)
            self._log(current, "refused", approver=approver.label, note=why_not)
            raise ApprovalError(why_not)
        decided = self.store.decide(request_id, approve, approver.label, note)
        self._log(decided, "approved" if decided.state == APPROVED else "denied")
        return decided

    async def answer(
        self, approver: Approver, request_id: str, approve: bool, note: str | None = None
    ) -> ApprovalRequest:
        decided = await anyio.to_thread.run_sync(
            self.answer_sync, approver, request_id, approve, note
        )
        self._wake()
        await self._notify("approved" if decided.state == APPROVED else "denied", decided)
        return decided

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def sweeper(self) -> None:
        """Record and log expiries, for the life of the service."""
        while True:
            await anyio.sleep(_SWEEP_S)
            await self.sweep()

    async def sweep(self) -> list[ApprovalRequest]:
        try:
            expired = await anyio.to_thread.run_sync(self.store.sweep)
        except Exception as exc:  # a store that is down is seen by the next call, which refuses
            log.warning("approval sweep failed: %s", type(exc).__name__)
            return []
        for request in expired:
            self._log(request, "expired")
            await self._notify("expired", request)
        return expired

    def link(self, request_id: str) -> str | None:
        """The approvals page's address for one request, if the page is served."""
        return f"{self.page_url}/requests/{request_id}" if self.page_url else None

    # ------------------------------------------------------------------ records

    async def _notify(self, event: str, request: ApprovalRequest) -> None:
        if self.notifier is None:
            return
        try:
            await self.notifier(event, request)
        except Exception as exc:  # a notification is a courtesy: the request stands
            log.warning("approval notification failed: %s", type(exc).__name__)

    def _log(
        self,
        request: ApprovalRequest,
        answer: str,
        *,
        approver: str | None = None,
        note: str | None = None,
    ) -> None:
        try:
            record_event(self.settings.log_path, request, answer, approver=approver, note=note)
        except StateError as exc:
            log.warning("approval not logged: %s", exc)


def _vpg_status(outcome: Any) -> str:
    text = f"{outcome.vpg_name}: {outcome.row}"
    return f"{text} ({outcome.reason})" if getattr(outcome, "reason", "") else text


def is_decided(request: ApprovalRequest) -> bool:
    return request.state in (APPROVED, DENIED)
