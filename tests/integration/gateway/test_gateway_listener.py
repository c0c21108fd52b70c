"""Issue 28, item 4: connections that cannot starve the gateway (gateway/listener.py, probes.py).

A real gateway process on 127.0.0.1 and raw client sockets. Sources are told apart by
the client's own loopback address (127.0.0.2, 127.0.0.3, …: every 127/8 address is this
machine). Each loop is bounded by a count or a deadline.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    GatewayProcess,
    actions,
    closed_by_gateway,
    connect,
    gateway_config,
    gateway_process,
    port_of,
    read_until_closed,
)
from zerto_rewind.testing import Sandbox

HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def drip(sock: socket.socket, byte: bytes) -> tuple[bytes, bool, float]:
    """Send ``byte`` every quarter second, 20 times at most (5 s), until the gateway closes
    the connection: what it sent last, whether it closed, and the seconds that took."""
    started = time.monotonic()
    data, closed = b"", False
    for _ in range(20):
        try:
            sock.sendall(byte)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        data, closed = read_until_closed(sock, 0.25)
        if closed:
            break
    elapsed = time.monotonic() - started
    sock.close()
    return data, closed, elapsed


def fds_of(gw: GatewayProcess) -> int:
    return len(list(Path(f"/proc/{gw.proc.pid}/fd").iterdir()))


def nofile_of(gw: GatewayProcess) -> tuple[int, int]:
    for line in Path(f"/proc/{gw.proc.pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no descriptor limit in /proc")


def health_from(gw: GatewayProcess, source: str) -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=5) as http:
        return http.get(f"{gw.url}/healthz")


def wait_ready(gw: GatewayProcess) -> None:
    """Until /healthz says ready (the upstream connected), 30 s at most."""
    deadline = time.monotonic() + 30
    while httpx.get(f"{gw.url}/healthz", timeout=5).status_code != 200:
        assert time.monotonic() < deadline, "the gateway did not become ready"
        time.sleep(0.1)


def nofile(soft: int, hard: int | None = None) -> Callable[[], None]:
    """A child's descriptor limit (set after fork, before exec)."""

    def set_limit() -> None:
        _, current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    return set_limit


@pytest.fixture
def many_fds() -> Iterator[None]:
    """Room in this test process for 1,100 client sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"the test needs 1,400 descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_half_sent_heads_from_one_address_do_not_pin_the_gateway(
    box: Sandbox, tmp_path: Path, actions_log: Path, many_fds: None
) -> None:
    """1,100 half-sent request heads from one address: past the per-source cap each is
    answered 503 and closed at once, other addresses are served meanwhile, the gateway's
    descriptors stay few, and the admitted ones are closed with 408 at the header timeout.
    The gateway raised its soft descriptor limit (512 here) to the hard one at start."""
    gateway_config(
        box, actions_log, gateway={"max_connections_per_source": 50, "header_timeout_s": 10}
    )
    with gateway_process(box, tmp_path, preexec=nofile(512)) as gw:
        wait_ready(gw)
        soft, hard = nofile_of(gw)
        socks: list[socket.socket] = []
        try:
            started = time.monotonic()
            for _ in range(1100):
                sock = connect(gw)
                sock.sendall(HALF_HEAD)
                socks.append(sock)
            refused = closed_by_gateway(socks, 2.0)
            other = health_from(gw, "127.0.0.2")
            with httpx.Client(
                transport=httpx.HTTPTransport(local_address="127.0.0.3"), timeout=5
            ) as http:  # a token's call from a third address
                catalog = http.get(
                    f"{gw.url}/v1/catalog",
                    headers={"Authorization": f"Bearer {TOKENS['agent-b']}"},
                )
            held_fds = fds_of(gw)
            assert time.monotonic() - started < 10, "the admitted ones must still be open here"
            admitted = [n for n in range(len(socks)) if n not in refused]
            timed_out = closed_by_gateway([socks[n] for n in admitted], 12.0)
        finally:
            for sock in socks:
                sock.close()
        stderr = gw.stderr.read_text()
    assert soft == hard
    assert len(refused) == 1050
    assert len(admitted) == 50
    answered = [data for data in refused.values() if data]
    assert answered, "a refused connection is told why when it can still read"
    for data in answered:
        assert data.startswith(b"HTTP/1.1 503 ")
        assert b"gateway.max_connections_per_source" in data
    assert other.status_code == 200
    assert other.json() == {"ready": True}
    assert catalog.status_code == 200
    assert held_fds < 200
    assert len(timed_out) == 50
    assert all(data.startswith(b"HTTP/1.1 408 ") for data in timed_out.values())
    assert "Too many open files" not in stderr


def test_the_total_cap_sits_below_the_descriptor_limit(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """With 600 descriptors at most (soft and hard), the gateway holds at most 344
    connections (600 less its reserve of 256) whatever gateway.max_connections says:
    500 half-sent heads from five addresses never reach EMFILE, the ones past the total
    are refused naming gateway.max_connections, and once the held ones time out a new
    address is served."""
    gateway_config(box, actions_log, gateway={"header_timeout_s": 3})
    with gateway_process(box, tmp_path, preexec=nofile(600, 600)) as gw:
        wait_ready(gw)
        assert gw.info is not None
        limits = gw.info["limits"]
        socks: list[socket.socket] = []
        try:
            for source in range(10, 15):
                for _ in range(100):
                    sock = connect(gw, f"127.0.0.{source}")
                    sock.sendall(HALF_HEAD)
                    socks.append(sock)
            refused = closed_by_gateway(socks, 1.0)
            peak_fds = fds_of(gw)
            try:  # refused: 503, or closed before the request was read
                full: int | str = health_from(gw, "127.0.0.20").status_code
            except httpx.TransportError:
                full = "closed"
            time.sleep(3.5)
            later = health_from(gw, "127.0.0.21")
        finally:
            for sock in socks:
                sock.close()
        stderr = gw.stderr.read_text()
    assert limits["max_connections"] == 344
    assert len(socks) - len(refused) <= 344
    assert len(refused) >= 500 - 344
    assert any(b"(gateway.max_connections)" in data for data in refused.values())
    assert peak_fds < 600
    assert full in (503, "closed")
    assert later.status_code == 200
    assert "Too many open files" not in stderr
    assert "gateway.max_connections 4096 lowered to 344" in stderr


@pytest.fixture(params=["h11", "httptools"])
def quick(
    box: Sandbox, tmp_path: Path, actions_log: Path, request: pytest.FixtureRequest
) -> Iterator[GatewayProcess]:
    """Short deadlines; each test runs with either HTTP parser (``gateway.http_impl``)."""
    gateway_config(
        box,
        actions_log,
        gateway={
            "header_timeout_s": 1.5,
            "body_timeout_s": 1.5,
            "idle_timeout_s": 1,
            "http_impl": request.param,
        },
    )
    with gateway_process(box, tmp_path) as gw:
        assert gw.info is not None
        assert gw.info["http"] == request.param
        yield gw


def test_a_head_sent_a_byte_at_a_time_is_cut_off_at_the_header_timeout(
    quick: GatewayProcess,
) -> None:
    """Bytes keep arriving, but the header deadline is for the whole head: 408, closed."""
    sock = connect(quick)
    sock.sendall(b"GET /healthz HTTP/1.1\r\n")
    data, closed, elapsed = drip(sock, b"x")
    assert closed
    assert 1.2 < elapsed < 3.5
    assert data == b"" or data.startswith(b"HTTP/1.1 408 ")


def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_body_timeout(
    quick: GatewayProcess,
) -> None:
    """A token's POST whose body drips: closed at the body timeout, well before it ends."""
    sock = connect(quick)
    head = (
        f"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1:{port_of(quick)}\r\n"
        f"Authorization: Bearer {TOKENS['agent-a']}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    sock.sendall(head.encode())
    _data, closed, elapsed = drip(sock, b" ")  # 20 of the 1,000 bytes at most
    assert closed
    assert 1.2 < elapsed < 3.5


def test_an_idle_keep_alive_connection_is_closed_at_the_idle_timeout(
    quick: GatewayProcess,
) -> None:
    sock = connect(quick)
    sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port_of(quick)}\r\n\r\n".encode())
    started = time.monotonic()
    first, _ = read_until_closed(sock, 0.5)  # the answer, then 0.5 s of keep-alive
    rest, closed = read_until_closed(sock, 4.0)
    elapsed = time.monotonic() - started
    sock.close()
    assert first.startswith(b"HTTP/1.1 ")  # 200 or 503: the upstream may still be starting
    assert b"content-length" in first
    assert closed
    assert rest == b""
    assert 0.8 < elapsed < 3.5


def test_content_length_with_transfer_encoding_is_refused_and_closes_the_connection(
    quick: GatewayProcess, actions_log: Path
) -> None:
    """A body framed both ways, with a call pipelined after it: 400, closed, nothing after
    it served, and nothing reached the VM server."""
    port = port_of(quick)
    call = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        b'"params":{"name":"power_off_vm","arguments":{"vm":"web-01"}}}'
    )
    smuggled = (
        f"POST /mcp/vsphere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKENS['agent-a']}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Mcp-Protocol-Version: 2025-06-18\r\n"
        f"Content-Length: {len(call)}\r\n\r\n"
    ).encode() + call
    first = (
        f"POST /mcp/vsphere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKENS['agent-a']}\r\n"
        f"Content-Length: {len(smuggled) + 5}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ).encode()
    sock = connect(quick)
    sock.sendall(
        first + smuggled + f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    data, closed = read_until_closed(sock, 5.0)
    sock.close()
    assert closed
    assert data.startswith(b"HTTP/1.1 400 ")
    assert b"Content-Length and Transfer-Encoding" in data
    assert data.count(b"HTTP/1.1 ") == 1
    assert actions(actions_log) == []


def test_healthz_and_metrics_check_host_and_keep_details_for_a_metrics_token(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """A rebound name (Host: a web page's) gets 421 from both; without a metrics token
    /healthz says only ready; an agent's token reads no more; the metrics token and the
    unix socket read why; /metrics needs the metrics token once one is configured."""
    gateway_config(box, actions_log)
    sock_path = str(tmp_path / "gw.sock")
    with gateway_process(box, tmp_path, extra_args=("--also-socket", sock_path)) as gw:
        wait_ready(gw)
        rebound = {"Host": f"attacker.example:{port_of(gw)}"}
        agent = {"Authorization": f"Bearer {TOKENS['agent-a']}"}
        with httpx.Client(timeout=10) as http:
            health_rebound = http.get(f"{gw.url}/healthz", headers=rebound)
            metrics_rebound = http.get(f"{gw.url}/metrics", headers={**rebound, **METRICS_HEADERS})
            bare = http.get(f"{gw.url}/healthz")
            as_agent = http.get(f"{gw.url}/healthz", headers=agent)
            as_reader = http.get(f"{gw.url}/healthz", headers=METRICS_HEADERS)
            localhost = http.get(f"http://localhost:{port_of(gw)}/healthz")
            metrics_bare = http.get(f"{gw.url}/metrics")
            metrics_agent = http.get(f"{gw.url}/metrics", headers=agent)
            metrics = http.get(f"{gw.url}/metrics", headers=METRICS_HEADERS)
        with httpx.Client(transport=httpx.HTTPTransport(uds=sock_path), timeout=10) as local:
            over_socket = local.get("http://gateway/healthz")
    assert health_rebound.status_code == 421
    assert metrics_rebound.status_code == 421
    assert "upstreams" not in health_rebound.text + metrics_rebound.text
    assert (bare.status_code, bare.json()) == (200, {"ready": True})
    assert as_agent.json() == {"ready": True}
    assert localhost.json() == {"ready": True}
    assert as_reader.json()["upstreams"] == {"vsphere": "connected"}
    assert as_reader.json()["zvm"] == "ok"
    assert over_socket.json()["upstreams"] == {"vsphere": "connected"}
    assert metrics_bare.status_code == 401
    assert metrics_agent.status_code == 401
    assert metrics.status_code == 200
    assert "zerto_rewind_connections " in metrics.text


def test_on_the_unix_socket_a_user_is_one_source(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """The guard service's socket: one user's 10 half-sent heads, with a per-source cap
    of 4, leave 6 refused at once with 503; TCP clients are served meanwhile, and the
    held ones are cut off at the header timeout."""
    gateway_config(
        box, actions_log, gateway={"max_connections_per_source": 4, "header_timeout_s": 4}
    )
    sock_path = str(tmp_path / "guard.sock")
    with gateway_process(box, tmp_path, extra_args=("--also-socket", sock_path)) as gw:
        wait_ready(gw)
        socks: list[socket.socket] = []
        try:
            for _ in range(10):
                unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                unix.settimeout(5)
                unix.connect(sock_path)
                socks.append(unix)
                # Refused at accept, it may be closed before it sends: EPIPE at once.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    unix.sendall(HALF_HEAD)
            refused = closed_by_gateway(socks, 1.5)
            over_tcp = health_from(gw, "127.0.0.4")
            held = closed_by_gateway([s for n, s in enumerate(socks) if n not in refused], 6.0)
        finally:
            for unix in socks:
                unix.close()
    assert len(refused) == 6
    assert all(b"gateway.max_connections_per_source" in data for data in refused.values() if data)
    assert over_tcp.status_code == 200
    assert len(held) == 4


def test_the_approvals_page_shares_the_bounds_and_the_count(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """The approvals page (``--approvals-listen``) runs in the same process, so it shares
    the descriptor limit: its connections count against the same per-source cap as the
    MCP listener's, and a head sent there a byte at a time is cut off with 408 too."""
    from zerto_rewind.gateway.approvals_web import hash_password

    gateway_config(
        box,
        actions_log,
        approvals={
            "approvers": {"users": ["root"]},
            "web_approvers": {"olivia": hash_password("pw")},
        },
        gateway={"max_connections_per_source": 3, "header_timeout_s": 2},
    )
    with gateway_process(box, tmp_path, extra_args=("--approvals-listen", "127.0.0.1:0")) as gw:
        assert gw.info is not None
        page_port = urlsplit(gw.info["approvals_url"]).port
        assert page_port is not None
        socks: list[socket.socket] = []
        try:
            for _ in range(2):  # two on the MCP listener, then two on the page: cap 3
                socks.append(connect(gw, "127.0.0.5"))
            for _ in range(2):
                socks.append(
                    socket.create_connection(
                        ("127.0.0.1", page_port), timeout=5, source_address=("127.0.0.5", 0)
                    )
                )
            for sock in socks:
                sock.sendall(HALF_HEAD)
            refused = closed_by_gateway(socks, 1.0)
            cut = closed_by_gateway([socks[2]], 4.0)
        finally:
            for sock in socks:
                sock.close()
    assert list(refused) == [3]
    assert b"gateway.max_connections_per_source" in refused[3] or refused[3] == b""
    assert list(cut) == [0]
    assert cut[0].startswith(b"HTTP/1.1 408 ")
