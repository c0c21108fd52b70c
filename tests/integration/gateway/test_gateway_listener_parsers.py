"""The listener's bounds under either HTTP parser (gateway/http_impl.py, ``gateway.http_impl``).

h11 bounds a request head's size itself; llhttp (httptools) does not, so the gateway
does. A real gateway process on 127.0.0.1 and raw client sockets, as in
test_gateway_listener.py (whose timeout and smuggling tests run with both parsers).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    GatewayProcess,
    actions,
    connect,
    gateway_config,
    gateway_process,
    port_of,
    read_until_closed,
)
from zerto_rewind.gateway.listener import MAX_HEAD_BYTES
from zerto_rewind.testing import Sandbox


@pytest.fixture(params=["h11", "httptools"])
def parsed_by(
    box: Sandbox, tmp_path: Path, actions_log: Path, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    gateway_config(box, actions_log, gateway={"http_impl": request.param})
    with gateway_process(box, tmp_path) as gw:
        yield gw


def test_a_request_head_past_the_bound_gets_400_and_the_connection_is_closed(
    parsed_by: GatewayProcess, actions_log: Path
) -> None:
    """A head still incomplete past 16 KiB, sent in pieces: 400, closed; others are served."""
    sock = connect(parsed_by)
    sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port_of(parsed_by)}\r\n".encode())
    filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    refused = False
    for _ in range(MAX_HEAD_BYTES // len(filler) + 4):
        try:
            sock.sendall(filler)
        except (BrokenPipeError, ConnectionResetError):
            refused = True
            break
    data, closed = read_until_closed(sock, 5.0)
    sock.close()
    other = httpx.get(f"{parsed_by.url}/healthz", timeout=5)
    assert closed or refused
    assert data == b"" or data.startswith(b"HTTP/1.1 400 ")
    assert other.status_code in (200, 503)  # 503 while the upstream still starts
    assert actions(actions_log) == []


def test_a_head_just_under_the_bound_is_served(parsed_by: GatewayProcess) -> None:
    """The bound refuses no ordinary request: a 12 KiB head gets its answer."""
    big = "b" * (12 * 1024)
    answer = httpx.get(f"{parsed_by.url}/healthz", headers={"X-Big": big}, timeout=5)
    assert answer.status_code in (200, 503)
    assert "ready" in answer.json()


def test_requests_kept_alive_on_one_connection_are_each_answered(
    parsed_by: GatewayProcess,
) -> None:
    """Two requests, the second sent after the first's answer: the deadlines of the first
    do not cut the connection, and both are answered."""
    sock = connect(parsed_by)
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port_of(parsed_by)}\r\n\r\n".encode()
    sock.sendall(request)
    first, _ = read_until_closed(sock, 0.5)
    sock.sendall(request)
    second, _ = read_until_closed(sock, 0.5)
    sock.close()
    assert first.startswith(b"HTTP/1.1 ")
    assert second.startswith(b"HTTP/1.1 ")
    assert b"ready" in second


def test_a_head_request_and_the_next_one_are_each_answered_in_full(
    parsed_by: GatewayProcess,
) -> None:
    """An answer without body bytes (HEAD) still sends its head (httptools' listener holds a
    head back until its body is written), and the connection serves the next request."""
    sock = connect(parsed_by)
    host = f"Host: 127.0.0.1:{port_of(parsed_by)}\r\n\r\n"
    sock.sendall(f"HEAD /healthz HTTP/1.1\r\n{host}".encode())
    first, _ = read_until_closed(sock, 0.5)
    sock.sendall(f"GET /healthz HTTP/1.1\r\n{host}".encode())
    second, _ = read_until_closed(sock, 0.5)
    sock.close()
    assert first.startswith(b"HTTP/1.1 ")
    assert first.endswith(b"\r\n\r\n")  # the head, whole, and no body
    assert second.startswith(b"HTTP/1.1 ")
    assert b"ready" in second
