"""The ASGI door of gateway.limits (:class:`TokenLimits`): what it refuses before the SDK,
and before reading a body, with a stand-in app that records what reaches it."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from zerto_rewind.config.settings import LimitsSettings
from zerto_rewind.gateway.fastlane_wire import STRICT_MESSAGE_KEY
from zerto_rewind.gateway.ledger import Ledger
from zerto_rewind.gateway.limits import TokenLimits
from zerto_rewind.gateway.proxy import CLIENT_SCOPE_KEY

MAX_BODY = 1_000_000


class Exchange:
    """One request through the door: what the app saw, what the client got, what was read."""

    def __init__(self, body: bytes, *, session: str | None = None, **headers: str) -> None:
        self.body = body
        self.reads = 0
        self.reached: list[bytes] = []
        self.sent: list[dict[str, Any]] = []
        given = {"content-length": str(len(body)), **headers}
        if session is not None:
            given["mcp-session-id"] = session
        self.scope: dict[str, Any] = {
            "type": "http",
            "method": "POST",
            "path": "/mcp/vsphere",
            "headers": [(k.encode(), v.encode()) for k, v in given.items()],
            CLIENT_SCOPE_KEY: "agent-a",
        }

    async def receive(self) -> dict[str, Any]:
        self.reads += 1
        return {"type": "http.request", "body": self.body, "more_body": False}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        self.reached.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def app_keeping_scope(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen_scope = dict(scope)
        await self.app(scope, receive, send)

    def run(self, ledger: Ledger, *, strict_calls: bool = False) -> None:
        door = TokenLimits(self.app_keeping_scope, ledger, MAX_BODY, strict_calls=strict_calls)
        anyio.run(door, self.scope, self.receive, self.send)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    def answer(self) -> Any:
        return json.loads(self.sent[1]["body"])


def call(method: str, size: int = 0) -> bytes:
    params = {"name": "delete_vm", "arguments": {"blob": "x" * size}}
    return json.dumps({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}).encode()


def test_a_request_without_a_session_that_is_not_initialize_never_reaches_the_sdk() -> None:
    """The SDK would open a session for it (a task, streams), parse it, then refuse it:
    the door answers the SDK's 400 itself, and nothing is counted as a session."""
    ledger = Ledger(LimitsSettings())
    for body in (call("tools/call"), b'{"jsonrpc": "2.0", "method": "notifications/x"}', b"[1]"):
        exchange = Exchange(body, **{"mcp-protocol-version": LATEST_HANDSHAKE_VERSION})
        exchange.run(ledger)
        assert exchange.reached == []
        assert exchange.status == 400
        assert "Missing session ID" in exchange.answer()["error"]["message"]
    assert ledger.sessions_total == 0
    assert ledger.held_total == 0
    assert not ledger.calls


def test_an_initialize_and_a_call_in_a_session_go_through() -> None:
    ledger = Ledger(LimitsSettings())
    opening = Exchange(call("initialize"))
    opening.run(ledger)
    assert opening.reached == [opening.body]
    in_session = Exchange(call("tools/call", 200_000), session="s-1")
    in_session.run(ledger)
    assert in_session.reached == [in_session.body]
    assert ledger.held_total == 0  # released once answered


def test_a_modern_request_without_a_session_is_the_sdks_to_judge() -> None:
    """A protocol version past the handshake era has no sessions: it goes on to the SDK."""
    exchange = Exchange(call("tools/call"), **{"mcp-protocol-version": "2099-01-01"})
    exchange.run(Ledger(LimitsSettings()))
    assert exchange.reached == [exchange.body]


def test_with_the_fast_lane_a_call_is_parsed_once_strictly_and_handed_down() -> None:
    """The lane's strict parse is the door's: the parsed call is left in the scope, the
    same bytes go on, and the call is counted by the method it names."""
    ledger = Ledger(LimitsSettings())
    exchange = Exchange(call("tools/call"), session="s-1")
    exchange.run(ledger, strict_calls=True)
    assert exchange.reached == [exchange.body]
    assert exchange.seen_scope[STRICT_MESSAGE_KEY] == json.loads(exchange.body)
    assert ledger.sessions_total == 0
    assert ledger.held_total == 0


def test_a_body_the_strict_parse_refuses_is_counted_as_the_sdk_reads_it() -> None:
    """A duplicated key: nothing for the lane (it declines), and the door reads the method
    as the SDK will (the last ``method`` wins), so an initialize in disguise is still one."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"initialize","params":{}}'
    exchange = Exchange(body)
    exchange.run(Ledger(LimitsSettings()), strict_calls=True)
    assert STRICT_MESSAGE_KEY not in exchange.seen_scope
    assert exchange.reached == [body]  # an opening, reserved as one


def test_without_the_fast_lane_nothing_is_parsed_for_it() -> None:
    for body in (call("tools/call"), call("tools/list")):
        exchange = Exchange(body, session="s-1")
        exchange.run(Ledger(LimitsSettings()))
        assert STRICT_MESSAGE_KEY not in exchange.seen_scope
        assert exchange.reached == [body]


def test_a_large_opening_is_refused_before_its_body_is_read() -> None:
    """Only an initialize may open a session, and it is small: 900 kB announced without a
    session is refused on its headers, and the connection is closed rather than read."""
    exchange = Exchange(call("tools/call", 900_000))
    exchange.run(Ledger(LimitsSettings()))
    assert exchange.reads == 0
    assert exchange.reached == []
    assert exchange.status == 400
    assert exchange.headers[b"connection"] == b"close"


def test_past_the_byte_cap_a_body_is_refused_on_its_length_and_the_connection_kept() -> None:
    """Refused on its Content-Length: the door never reads it, and the connection is kept
    (uvicorn drops the body as it comes: cheaper than a new connection per refusal, and
    a client sending its whole body first still reads its 429)."""
    ledger = Ledger(LimitsSettings(argument_bytes_per_token=100_000))
    large = Exchange(call("tools/call", 150_000), session="s-1")
    large.run(ledger)
    assert (large.status, large.reads, large.reached) == (429, 0, [])
    assert b"connection" not in large.headers
    assert b"retry-after" in large.headers
    assert "gateway.limits.argument_bytes_per_token" in large.answer()["error"]["message"]

    ledger = Ledger(LimitsSettings(argument_bytes_per_token=1_000))
    small = Exchange(call("tools/call", 2_000), session="s-1")
    small.run(ledger)
    assert (small.status, small.reads) == (429, 0)
    assert b"connection" not in small.headers
