"""The SDK's HTTP sessions, as the read-only fast lane reads them (gateway.fastlane)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Scope


def _open_session(manager: StreamableHTTPSessionManager, session_id: str, scope: Scope) -> Any:
    """The SDK's transport of an open session this token opened; None for any other.

    The SDK's own test (an open session, the credential that created it), read from
    its manager; a manager without those tables (another SDK) admits nothing here.
    """
    instances = getattr(manager, "_server_instances", None)
    owners = getattr(manager, "_session_owners", None)
    if not isinstance(instances, dict) or not isinstance(owners, dict):
        return None
    transport = instances.get(session_id)
    if transport is None or getattr(transport, "is_terminated", True):
        return None
    user = scope.get("user")
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    if requestor is None or owners.get(session_id) != requestor:
        return None
    idle = getattr(transport, "idle_scope", None)
    if idle is not None and (idle.cancel_called or not hasattr(transport, "_requests_in_flight")):
        return None
    return transport


@contextmanager
def _in_flight(transport: Any) -> Iterator[None]:
    """Hold a handshake-era session open while its call is served, as the SDK's transport
    does for its own requests: its idle countdown restarts when the last one ends."""
    idle = getattr(transport, "idle_scope", None)
    timeout = getattr(transport, "_idle_timeout", None)
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout
