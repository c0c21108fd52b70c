"""Session binding (gateway/http.py): the map's bounds, and the middleware in-process.

The map is tested with a small capacity and a hand-driven clock: idle expiry may drop
a binding only once the SDK has ended its session; a binding dropped for room fails
closed (refused to everyone). The middleware runs around a fake inner app that
records what reaches it, so "never reaches the SDK" is checked directly. The
socket-level behaviour is in tests/integration/gateway/test_gateway_sessions.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest

from support.fakes import FakeClock
from zerto_rewind.gateway.http import SessionBindings, _BearerAuth, token_digest
from zerto_rewind.gateway.proxy import CLIENT_SCOPE_KEY

TOKENS = {"agent-a": "token-a-0123456789", "agent-b": "token-b-0123456789"}


def test_a_binding_names_its_owner_and_is_never_rebound() -> None:
    sessions = SessionBindings(4)
    assert sessions.bind("s1", "agent-a")
    assert not sessions.bind("s1", "agent-b")
    assert sessions.owner("s1") == "agent-a"
    assert sessions.owner("s2") is None
    sessions.forget("s1")
    assert sessions.owner("s1") is None
    assert sessions.retired_owner("s1") is None  # an ended session needs no refusal of ours


def test_over_capacity_the_least_recently_used_is_retired_not_forgotten() -> None:
    """A binding dropped for room is refused to everyone, its owner included."""
    sessions = SessionBindings(2, retired_capacity=2)
    for name in ("s1", "s2"):
        sessions.bind(name, "agent-a", in_flight=0)
    sessions.begin("s1")  # s1 used again: s2 is now the least recently used
    sessions.end("s1")
    sessions.bind("s3", "agent-b", in_flight=0)
    assert len(sessions) == 2
    assert sessions.owner("s2") is None
    assert sessions.retired_owner("s2") == "agent-a"
    assert {sessions.owner("s1"), sessions.owner("s3")} == {"agent-a", "agent-b"}
    # a retired id cannot be bound afresh by anyone
    assert not sessions.bind("s2", "agent-b")
    # the retired set is bounded too: the oldest retired id goes first
    sessions.bind("s4", "agent-b", in_flight=0)
    sessions.bind("s5", "agent-b", in_flight=0)
    assert sessions.retired_owner("s2") is None
    assert len(sessions) == 2


def test_idle_bindings_expire_only_after_the_sdk_ended_their_session() -> None:
    """No request in flight for the SDK's idle timeout plus a margin: dropped, not retired."""
    clock = FakeClock()
    sessions = SessionBindings(10, idle_s=100, clock=clock)
    sessions.bind("idle", "agent-a")
    sessions.end("idle")
    sessions.bind("streaming", "agent-a")  # a GET stream stays open: in flight
    clock.now += 100  # the SDK's own deadline: not yet past the margin
    sessions.bind("new-1", "agent-b")
    assert sessions.owner("idle") == "agent-a"
    clock.now += 3600
    sessions.bind("new-2", "agent-b")
    assert sessions.owner("idle") is None
    assert sessions.retired_owner("idle") is None
    assert sessions.owner("streaming") == "agent-a"  # in flight holds the session, as in the SDK


def test_without_an_idle_timeout_bindings_never_expire() -> None:
    clock = FakeClock()
    sessions = SessionBindings(10, clock=clock)
    sessions.bind("s1", "agent-a", in_flight=0)
    clock.now += 10**9
    sessions.bind("s2", "agent-a", in_flight=0)
    assert sessions.owner("s1") == "agent-a"


def test_a_request_that_outlives_its_binding_is_counted_down_safely() -> None:
    sessions = SessionBindings(1)
    sessions.bind("s1", "agent-a")
    sessions.bind("s2", "agent-a")  # s1 retired while its opening request is in flight
    sessions.end("s1")
    sessions.forget("s2")
    sessions.end("s2")
    assert sessions.retired_owner("s1") == "agent-a"


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        SessionBindings(0)


# The middleware, around a fake inner app standing in for the SDK.


class Inner:
    """Records each request that reaches it; opens a session on an initialize POST."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str | None]] = []
        self.opened = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        self.seen.append(
            (scope["method"], scope.get(CLIENT_SCOPE_KEY), session.decode() if session else None)
        )
        response_headers = [(b"content-type", b"application/json")]
        if session is None and scope["method"] == "POST":
            self.opened += 1
            response_headers.append((b"mcp-session-id", f"sid-{self.opened}".encode()))
        elif session is not None:
            response_headers.append((b"mcp-session-id", session))
        await send({"type": "http.response.start", "status": 200, "headers": response_headers})
        await send({"type": "http.response.body", "body": b"{}"})


def _app(capacity: int = 100) -> tuple[_BearerAuth, Inner]:
    inner = Inner()
    clients = {name: token_digest(token) for name, token in TOKENS.items()}
    return _BearerAuth(inner, clients, 1 << 20, SessionBindings(capacity)), inner  # type: ignore[arg-type]


def _request(
    app: _BearerAuth,
    method: str,
    who: str | None,
    session: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    headers: list[tuple[bytes, bytes]] = []
    if who is not None:
        headers.append((b"authorization", f"Bearer {TOKENS[who]}".encode()))
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    headers += extra or []
    scope: dict[str, Any] = {
        "type": "http",
        "method": method,
        "path": "/mcp/vsphere",
        "headers": headers,
        "client": ("127.0.0.1", 5000) if who is not None else None,
        "server": ("127.0.0.1", 8750) if who is not None else None,
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def go() -> None:
        await app(scope, receive, send)

    anyio.run(go)
    start, body = sent
    response_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], response_headers, json.loads(body["body"])


def test_a_session_is_refused_to_another_client_before_the_inner_app(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, inner = _app()
    _, headers, _ = _request(app, "POST", "agent-a")
    session = headers["mcp-session-id"]
    assert app.sessions.owner(session) == "agent-a"
    with caplog.at_level(logging.WARNING, logger="zerto_rewind.gateway"):
        status, _, body = _request(app, "POST", "agent-b", session)
    assert (status, body) == (404, {"error": "session not found"})
    assert inner.seen == [("POST", "agent-a", None)]
    assert "refused agent-b a session opened by agent-a" in caplog.text
    assert all(token not in caplog.text for token in TOKENS.values())
    status, _, _ = _request(app, "POST", "agent-a", session)
    assert status == 200


def test_the_unix_socket_is_one_more_principal() -> None:
    app, inner = _app()
    _, headers, _ = _request(app, "POST", "agent-a")
    status, _, body = _request(app, "POST", None, headers["mcp-session-id"])
    assert (status, body) == (404, {"error": "session not found"})
    _, own, _ = _request(app, "POST", None)
    assert app.sessions.owner(own["mcp-session-id"]) == "unix-socket"
    status, _, _ = _request(app, "GET", None, own["mcp-session-id"])
    assert status == 200
    assert inner.seen[-1] == ("GET", "unix-socket", own["mcp-session-id"])


def test_only_the_owners_delete_forgets_the_binding() -> None:
    app, _ = _app()
    _, headers, _ = _request(app, "POST", "agent-a")
    session = headers["mcp-session-id"]
    assert _request(app, "DELETE", "agent-b", session)[0] == 404
    assert app.sessions.owner(session) == "agent-a"
    assert _request(app, "DELETE", "agent-a", session)[0] == 200
    assert app.sessions.owner(session) is None


def test_a_session_id_unknown_here_goes_to_the_inner_app() -> None:
    """The SDK answers those (404 for an unknown session); the binding adds nothing."""
    app, inner = _app()
    assert _request(app, "POST", "agent-b", "never-issued")[0] == 200
    assert inner.seen == [("POST", "agent-b", "never-issued")]
    assert len(app.sessions) == 0


def test_a_binding_dropped_for_room_is_refused_to_everyone() -> None:
    app, inner = _app(capacity=1)
    _, first, _ = _request(app, "POST", "agent-a")
    _request(app, "POST", "agent-b")  # the second session pushes the first binding out
    for who in ("agent-a", "agent-b"):
        status, _, body = _request(app, "POST", who, first["mcp-session-id"])
        assert (status, body) == (404, {"error": "session not found"})
    assert len(inner.seen) == 2


def test_two_session_headers_are_refused() -> None:
    """Starlette reads the first; a check reading another would be bypassed."""
    app, inner = _app()
    _, headers, _ = _request(app, "POST", "agent-a")
    status, _, _ = _request(
        app,
        "POST",
        "agent-b",
        "unknown",
        extra=[(b"mcp-session-id", headers["mcp-session-id"].encode())],
    )
    assert status == 400
    assert len(inner.seen) == 1


def test_the_sdk_sees_the_principal_too() -> None:
    """scope["user"] lets the SDK's own owner check refuse a stranger should ours forget."""
    seen: list[Any] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["user"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    clients = {name: token_digest(token) for name, token in TOKENS.items()}
    app = _BearerAuth(inner, clients, 1 << 20)  # type: ignore[arg-type]
    _request(app, "GET", "agent-b")
    (user,) = seen
    assert user.access_token.client_id == "agent-b"
    assert TOKENS["agent-b"] not in repr(user.access_token)


def test_the_gateways_bindings_follow_its_session_managers() -> None:
    """Room for every session each manager may hold open; expiry after the SDK's own timeout."""
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from zerto_rewind.gateway.http import _bindings_for

    managers = [StreamableHTTPSessionManager(app=Server(f"s{i}")) for i in range(2)]
    bindings = _bindings_for(managers)
    per_manager = managers[0].max_sessions
    assert per_manager is not None
    assert bindings.capacity == 2 * per_manager
    assert managers[0].session_idle_timeout is not None
    assert bindings.expire_after is not None
    assert bindings.expire_after > managers[0].session_idle_timeout
    forever = StreamableHTTPSessionManager(app=Server("forever"), session_idle_timeout=None)
    assert _bindings_for([*managers, forever]).expire_after is None
