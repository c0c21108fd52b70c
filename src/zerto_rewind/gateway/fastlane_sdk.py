"""The SDK's HTTP sessions, as the read-only fast lane reads them (gateway.fastlane).

A handshake-era (2025-11-25) call names a session; the fast lane answers it only
when the SDK would: the session is open, and the credential that opened it is the
one calling. The SDK's session manager has no public way to ask that, so this
reads its two tables (``_server_instances``, ``_session_owners``): the one place
the fast lane relies on an SDK private name. :func:`sessions_readable` checks them
at start-up; an SDK without them turns the fast lane off (every call takes the
full path) with one warning, instead of failing call by call.

The session's idle countdown is kept with the transport's public ``idle_scope``
and the manager's public ``session_idle_timeout``, see :func:`in_flight`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Scope

__all__ = ["in_flight", "open_session", "sessions_readable"]

log = logging.getLogger("zerto_rewind.gateway")

_TABLES = ("_server_instances", "_session_owners")


def sessions_readable(managers: list[StreamableHTTPSessionManager]) -> bool:
    """Whether every manager has the session tables the fast lane reads; warns once if not."""
    missing = sorted({t for m in managers for t in _TABLES if not _has_table(m, t)})
    if missing:
        log.warning(
            "the read-only fast lane is off: this MCP SDK's session manager has no %s, so every "
            "call takes the full path (slower, same answers)",
            " or ".join(missing),
        )
    return not missing


def _has_table(manager: StreamableHTTPSessionManager, name: str) -> bool:
    return isinstance(getattr(manager, name, None), dict)


def open_session(manager: StreamableHTTPSessionManager, session_id: str, scope: Scope) -> Any:
    """The SDK's transport of an open session this token opened; None for any other.

    The SDK's own test (an open session, the credential that created it), read from
    its manager's tables (checked at start-up by :func:`sessions_readable`).
    """
    instances: dict[str, Any] = getattr(manager, "_server_instances", {})
    owners: dict[str, Any] = getattr(manager, "_session_owners", {})
    transport = instances.get(session_id)
    if transport is None or transport.is_terminated:
        return None
    user = scope.get("user")
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    if requestor is None or owners.get(session_id) != requestor:
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None  # its idle period ran out: the SDK answers it as terminated
    return transport


@contextmanager
def in_flight(transport: Any, idle_s: float | None, bound_s: float) -> Iterator[None]:
    """Keep a handshake-era session from idling out while its call is served, and count the
    call as activity when it ends, as the SDK's transport does for its own requests.

    With public fields only: the countdown is pushed past the call's bound (``bound_s``)
    while it runs, and restarts from its end unless something else holds it further
    (an infinite deadline is the SDK's own request or GET stream in flight). A session
    may so outlive its idle period by at most one call's bound.
    """
    idle = None if transport is None else transport.idle_scope
    if idle is None or idle_s is None or math.isinf(idle.deadline):
        yield
        return
    held = anyio.current_time() + idle_s + bound_s
    idle.deadline = max(idle.deadline, held)
    try:
        yield
    finally:
        if not math.isinf(idle.deadline) and not idle.cancel_called:
            ended = anyio.current_time() + idle_s
            idle.deadline = ended if idle.deadline == held else max(idle.deadline, ended)
