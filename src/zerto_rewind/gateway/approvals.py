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
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..core.approval_policy import Approvals
from ..core.approvals import (
    APPROVED,
    DENIED,
    PENDING,
    ApprovalError,
    ApprovalRequest,
    ApprovalStore,
    Approver,
    log_event,
    refusal_to_approve,
)
from ..core.decision import Decision, Outcome, ToolCall
from ..core.state_store import open_approvals

if TYPE_CHECKING:
    from ..config.settings import Settings
    from .approvals_login import Failure

__all__ = ["ApprovalsService", "LoginNotifier", "Notifier", "ServiceApprovals"]

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

    def step(
        self, principal: str, *, host: str | None = None, secret_paths: Sequence[str] = ()
    ) -> ServiceApprovals:
        """The pipeline's approvals step (core.approval_policy) over this service's store:
        the webhook is sent when a request is opened, the page's link is named."""
        policy = Approvals(
            lambda: self.store,
            self.config,
            self.settings.log_path,
            principal=principal,
            host=host,
            notify=self._notify_from_thread,
            link=self.link,
            secret_paths=secret_paths,
        )
        return ServiceApprovals(policy)

    def _notify_from_thread(self, request: ApprovalRequest) -> None:
        anyio.from_thread.run(self._notify, "requested", request)

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
            log_event(self.settings.log_path, used, "used")
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
            log_event(
                self.settings.log_path, current, "refused", approver=approver.label, note=why_not
            )
            raise ApprovalError(why_not)
        decided = self.store.decide(request_id, approve, approver.label, note)
        log_event(
            self.settings.log_path, decided, "approved" if decided.state == APPROVED else "denied"
        )
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
            log_event(self.settings.log_path, request, "expired")
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


class ServiceApprovals:
    """The approvals step on the event loop: the store's work runs in a worker thread."""

    name = "approvals"

    def __init__(self, policy: Approvals) -> None:
        self.policy = policy

    def apply(self, call: ToolCall, so_far: Decision) -> Awaitable[Decision | None] | None:
        if so_far.outcome != Outcome.PROMPT:
            return None
        return anyio.to_thread.run_sync(self.policy.apply, call, so_far)


def is_decided(request: ApprovalRequest) -> bool:
    return request.state in (APPROVED, DENIED)
