"""Issue 28's caps per token and in all (``gateway.limits``), against a real gateway process.

One token (agent-a, raw HTTP) is the abuser: many sessions, calls left waiting for
an approver, large arguments. Past each cap it gets 429 with ``Retry-After`` and a
JSON-RPC error naming the cap, while the other token (agent-b, the SDK's own
client) still initializes and calls. Ground truth: the stand-in upstream records
every call on arrival (tests/reliability/gateway_upstream.py), so a refused call
is one it never saw.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    GatewayProcess,
    client,
    gateway_config,
    gateway_process,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

RECORDING = Path(__file__).resolve().parents[2] / "reliability" / "gateway_upstream.py"
A, B = TOKENS["agent-a"], TOKENS["agent-b"]


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    return tmp_path / "recorded.jsonl"


def _recording_upstream(recorded: Path, tmp: Path) -> dict[str, Any]:
    return {
        "command": [sys.executable, str(RECORDING)],
        "env": {"GW_UPSTREAM_ACTIONS": str(recorded), "GW_UPSTREAM_CONTROL": str(tmp / "ctl")},
        "timeout_s": 10,
    }


@pytest.fixture
def start(box: Sandbox, tmp_path: Path, recorded: Path) -> Iterator[Any]:
    """A gateway with ``gateway.limits`` as given; unlisted calls wait for an approver."""
    stack: list[Any] = []

    def run(**limits: Any) -> GatewayProcess:
        gateway_config(
            box,
            upstream=_recording_upstream(recorded, tmp_path),
            gateway={"limits": limits},
            approvals={"approvers": {"users": ["root"]}, "wait_s": 30},
        )
        cm = gateway_process(box, tmp_path)
        stack.append(cm)
        return cm.__enter__()

    yield run
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def _calls(recorded: Path) -> list[dict[str, Any]]:
    if not recorded.exists():
        return []
    return [json.loads(line) for line in recorded.read_text().splitlines() if line.strip()]


def _headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION,
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


def _initialize() -> dict[str, Any]:
    params = {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "abuser", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def _call(tool: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def _open(http: httpx2.AsyncClient, url: str, token: str) -> httpx2.Response:
    """initialize (and, if it opened one, notifications/initialized): a session, unused."""
    opened = await http.post(url, json=_initialize(), headers=_headers(token))
    if opened.status_code == 200:
        session = opened.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        note = await http.post(url, json=done, headers=_headers(token, session))
        assert note.status_code == 202, note.text
    return opened


def _assert_limited(response: httpx2.Response, cap: str) -> None:
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1
    error = response.json()["error"]
    assert error["data"]["cap"] == f"gateway.limits.{cap}"
    assert f"gateway.limits.{cap}:" in error["message"]
    assert "agent-" in error["message"]


@asynccontextmanager
async def _waiting(
    http: httpx2.AsyncClient, url: str, token: str, session: str, calls: list[dict[str, Any]]
) -> AsyncIterator[None]:
    """Each call sent and left waiting for an approver (its response stream open)."""
    async with AsyncExitStack() as stack:
        for n, body in enumerate(calls):
            response = await stack.enter_async_context(
                http.stream(
                    "POST", url, json={**body, "id": 100 + n}, headers=_headers(token, session)
                )
            )
            assert response.status_code == 200, await response.aread()
        yield


async def _b_still_served(url: str, name: str) -> None:
    """agent-b's own client (handshake era): initialize and a read-only call, answered."""
    async with client(url, B, mode="legacy") as b:
        result = await b.call_tool("get_vm", {"name": name})
    assert not result.is_error, text_of(result)
    assert f"{name}: poweredOn" in text_of(result)


async def test_one_token_at_its_session_cap_does_not_shut_the_others_out(
    start: Any, recorded: Path
) -> None:
    gw = start(sessions_per_token=3, sessions=5)
    url = gw.endpoint()
    async with httpx2.AsyncClient(timeout=30) as http:
        for _ in range(3):
            assert (await _open(http, url, A)).status_code == 200
        for _ in range(5):  # the flood goes on: each refused, none opened
            _assert_limited(await _open(http, url, A), "sessions_per_token")
        await _b_still_served(url, "b-first")  # its session ended when the client closed
        async with client(url, B, mode="legacy") as b:  # holds the fourth session
            assert (await _open(http, url, B)).status_code == 200  # the fifth
            _assert_limited(await _open(http, url, B), "sessions")
            result = await b.call_tool("get_vm", {"name": "b-in-a-full-gateway"})
            assert not result.is_error
            metrics = (await http.get(f"{gw.url}/metrics", headers=METRICS_HEADERS)).text
        assert 'zerto_rewind_limited_total{cap="sessions_per_token"} 5.0' in metrics
        assert 'zerto_rewind_limited_total{cap="sessions"} 1.0' in metrics
        assert "zerto_rewind_sessions_open 5.0" in metrics
        assert "agent-a" not in metrics  # counted by cap, never by token
    assert [c["arg"] for c in _calls(recorded)] == ["b-first", "b-in-a-full-gateway"]
    assert "refused agent-a: gateway.limits.sessions_per_token (3) reached" in gw.stderr.read_text()


async def test_abandoned_sessions_are_ended_and_their_room_freed(start: Any) -> None:
    gw = start(sessions_per_token=4, handshake_s=1)
    url = gw.endpoint()
    async with httpx2.AsyncClient(timeout=30) as http:
        abandoned = [(await _open(http, url, A)).headers["mcp-session-id"] for _ in range(3)]
        used = (await _open(http, url, A)).headers["mcp-session-id"]
        listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await http.post(url, json=listed, headers=_headers(A, used))).status_code == 200
        _assert_limited(await _open(http, url, A), "sessions_per_token")
        # handshake_s (1 s) and the reaper's beat (a quarter of it) later, with margin
        await anyio.sleep(2.0)
        for session in abandoned:
            gone = await http.post(url, json=listed, headers=_headers(A, session))
            assert gone.status_code == 404, gone.text
        kept = await http.post(url, json=listed, headers=_headers(A, used))
        assert kept.status_code == 200, "a session in use is not ended with the abandoned"
        for _ in range(3):  # their room is free again
            assert (await _open(http, url, A)).status_code == 200
        _assert_limited(await _open(http, url, A), "sessions_per_token")


async def test_calls_in_flight_per_token(start: Any, recorded: Path) -> None:
    gw = start(calls_per_token=2)
    url = gw.endpoint()
    async with httpx2.AsyncClient(timeout=30) as http:
        session = (await _open(http, url, A)).headers["mcp-session-id"]
        waits = [_call("delete_datastore", {"datastore": f"ds-{n}"}) for n in range(2)]
        async with _waiting(http, url, A, session, waits):
            third = await http.post(
                url, json=_call("get_vm", {"name": "a-over-cap"}), headers=_headers(A, session)
            )
            _assert_limited(third, "calls_per_token")
            # the decide endpoint counts the same calls; its error is the service's shape
            payload = {"tool_name": "mcp__vsphere__get_vm", "tool_input": {"name": "a-hook"}}
            hook = await http.post(
                f"{gw.url}/v1/decide", json=payload, headers={"Authorization": f"Bearer {A}"}
            )
            assert hook.status_code == 429, hook.text
            assert hook.json()["cap"] == "gateway.limits.calls_per_token"
            assert "gateway.limits.calls_per_token: 2" in hook.json()["error"]
            await _b_still_served(url, "b-beside-a")
        # the waits ended (the client hung up): once the gateway sees it, agent-a is
        # served again
        deadline = time.monotonic() + 15
        while True:
            again = await http.post(
                url, json=_call("get_vm", {"name": "a-after"}), headers=_headers(A, session)
            )
            if again.status_code != 429 or time.monotonic() > deadline:
                break
            _assert_limited(again, "calls_per_token")
            await anyio.sleep(0.2)
        assert again.status_code == 200, again.text
    args = [c["arg"] for c in _calls(recorded)]
    assert "a-over-cap" not in args
    assert "b-beside-a" in args
    assert "a-after" in args
    assert not any(c["tool"] == "delete_datastore" for c in _calls(recorded))


async def test_argument_bytes_per_token_and_in_all(start: Any, recorded: Path) -> None:
    gw = start(argument_bytes_per_token=800_000, argument_bytes=1_200_000)
    url = gw.endpoint()

    def big(size: int, tag: str) -> dict[str, Any]:
        return _call("delete_datastore", {"datastore": tag + "x" * size})

    async with httpx2.AsyncClient(timeout=30) as http:
        a_session = (await _open(http, url, A)).headers["mcp-session-id"]
        b_session = (await _open(http, url, B)).headers["mcp-session-id"]
        async with _waiting(http, url, A, a_session, [big(500_000, "a1-")]):
            over = await http.post(url, json=big(400_000, "a2-"), headers=_headers(A, a_session))
            _assert_limited(over, "argument_bytes_per_token")
            async with _waiting(http, url, B, b_session, [big(500_000, "b1-")]):
                full = await http.post(
                    url, json=big(250_000, "b2-"), headers=_headers(B, b_session)
                )
                _assert_limited(full, "argument_bytes")
                small = await http.post(
                    url, json=_call("get_vm", {"name": "b-small"}), headers=_headers(B, b_session)
                )
                assert small.status_code == 200, small.text
    assert [c["arg"] for c in _calls(recorded)] == ["b-small"]
    stderr = gw.stderr.read_text()
    assert "gateway.limits.argument_bytes (1200000) reached" in stderr
    assert "xxxx" not in stderr  # no argument value in the log


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_a_flood_of_sessions_at_the_defaults_leaves_room_and_memory(
    start: Any, recorded: Path
) -> None:
    """Issue 28's attack at the default caps, 10,000 openings: 64 open, the rest 429,
    and the other token is served before, during and after."""
    gw = start()
    url = gw.endpoint()
    statuses: Counter[int] = Counter()
    async with httpx2.AsyncClient(timeout=60) as http:
        await _b_still_served(url, "b-before")
        before = _rss_mb(gw.proc.pid)

        async def flood(n: int) -> None:
            for _ in range(n):
                opened = await http.post(url, json=_initialize(), headers=_headers(A))
                statuses[opened.status_code] += 1

        async with anyio.create_task_group() as tg:
            for _ in range(25):
                tg.start_soon(flood, 400)
            await anyio.sleep(1.0)
            await _b_still_served(url, "b-during")
        await _b_still_served(url, "b-after")
        grown = _rss_mb(gw.proc.pid) - before
    assert statuses == {200: 64, 429: 9936}
    assert grown < 60, f"the gateway grew {grown:.0f} MB for 64 sessions"
    assert [c["arg"] for c in _calls(recorded)] == ["b-before", "b-during", "b-after"]


async def test_a_large_body_past_the_byte_cap_is_told_429_not_reset(start: Any) -> None:
    """900 kB past a 100 kB cap, on a raw socket that sends its whole body before it
    reads: the gateway refuses it on its Content-Length, before its handler reads it,
    and keeps the connection while the body is dropped, so the client reads the 429
    naming the cap (closing the connection would have reset it under the client)."""
    gw = start(argument_bytes_per_token=100_000)
    url = gw.endpoint()
    async with httpx2.AsyncClient(timeout=30) as http:
        session = (await _open(http, url, A)).headers["mcp-session-id"]
    body = json.dumps(_call("delete_datastore", {"datastore": "x" * 900_000})).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in _headers(A, session).items())
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    request = (
        f"POST /mcp/vsphere HTTP/1.1\r\nHost: {host}:{port}\r\n{head}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    def exchange() -> bytes:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(request)  # all of it: a reset would break this or the read
            answer = b""
            while b"\r\n\r\n" not in answer or not _whole(answer):
                chunk = sock.recv(65536)
                assert chunk, f"closed before the answer was whole: {answer[:200]!r}"
                answer += chunk
            return answer

    answer = await anyio.to_thread.run_sync(exchange)
    head_part, _, payload = answer.partition(b"\r\n\r\n")
    assert head_part.startswith(b"HTTP/1.1 429 "), answer[:200]
    assert b"retry-after: " in head_part.lower()
    error = json.loads(payload)["error"]
    assert error["data"]["cap"] == "gateway.limits.argument_bytes_per_token"


def _whole(answer: bytes) -> bool:
    """An HTTP answer with its whole body (by its Content-Length)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


async def test_bytes_a_second_per_token(start: Any, recorded: Path) -> None:
    """Past its bytes a second, agent-a's read-only call gets 429 naming the cap and never
    reaches the VM server; agent-b's calls, a large one included, are served meanwhile;
    after Retry-After agent-a is served again."""
    gw = start(argument_bytes_per_s_per_token=100_000)
    url = gw.endpoint()

    def read(name: str, size: int = 0) -> dict[str, Any]:
        return _call("get_vm", {"name": name + "x" * size})

    async with httpx2.AsyncClient(timeout=30) as http:
        a_session = (await _open(http, url, A)).headers["mcp-session-id"]
        b_session = (await _open(http, url, B)).headers["mcp-session-id"]
        first = await http.post(url, json=read("a1-", 300_000), headers=_headers(A, a_session))
        assert first.status_code == 200, first.text  # room left: it passes, 200 kB in debt
        over = await http.post(url, json=read("a2-"), headers=_headers(A, a_session))
        _assert_limited(over, "argument_bytes_per_s_per_token")
        wait = int(over.headers["retry-after"])
        assert 1 <= wait <= 3
        for name, size in (("b1-", 0), ("b2-", 300_000)):  # its own bucket: both pass
            served = await http.post(url, json=read(name, size), headers=_headers(B, b_session))
            assert served.status_code == 200, served.text
        await anyio.sleep(wait + 0.5)
        again = await http.post(url, json=read("a3-"), headers=_headers(A, a_session))
        assert again.status_code == 200, again.text
    assert [c["arg"][:3] for c in _calls(recorded)] == ["a1-", "b1-", "b2-", "a3-"]
    stderr = gw.stderr.read_text()
    assert "gateway.limits.argument_bytes_per_s_per_token (100000) reached" in stderr
    assert "xxxx" not in stderr  # no argument value in the log
