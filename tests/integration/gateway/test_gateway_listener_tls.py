"""Issue 28, item 4, over TLS: a connection counts from its accept, before its handshake.

asyncio runs a TLS handshake before uvicorn's protocol sees the connection, so caps
kept by the protocol would not count connections that never send a ClientHello.
Here a real gateway process serves HTTPS on 127.0.0.1 with a throwaway CA; the
abuser is 127.0.0.2 (every 127/8 address is this machine), the well-behaved caller
127.0.0.1 with a bearer token.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    METRICS_HEADERS,
    TOKENS,
    GatewayProcess,
    closed_by_gateway,
    connect,
    gateway_config,
    gateway_process,
)
from zerto_rewind.sim.certs import write_certs
from zerto_rewind.testing import Sandbox

ABUSER = "127.0.0.2"
PER_SOURCE = 20
HANDSHAKE_S = 2.0


@pytest.fixture
def tls_gateway(box: Sandbox, tmp_path: Path, actions_log: Path) -> Iterator[GatewayProcess]:
    certs = write_certs(tmp_path / "tls")
    gateway_config(
        box,
        actions_log,
        gateway={
            "tls_cert": str(certs.cert),
            "tls_key": str(certs.key),
            "max_connections_per_source": PER_SOURCE,
            "handshake_timeout_s": HANDSHAKE_S,
        },
    )
    with gateway_process(box, tmp_path) as gw:
        gw.info = {**(gw.info or {}), "ca": str(certs.ca)}
        yield gw


def https(gw: GatewayProcess, source: str = "127.0.0.1") -> httpx.Client:
    assert gw.info is not None
    context = ssl.create_default_context(cafile=gw.info["ca"])
    transport = httpx.HTTPTransport(local_address=source, verify=context)
    return httpx.Client(transport=transport, timeout=5)


def a_tokens_call(gw: GatewayProcess, source: str = "127.0.0.1") -> httpx.Response:
    """A well-formed HTTPS request with a bearer token: the catalog of VMs."""
    with https(gw, source) as http:
        return http.get(
            f"{gw.url}/v1/catalog", headers={"Authorization": f"Bearer {TOKENS['agent-a']}"}
        )


def refused_count(gw: GatewayProcess, cap: str) -> float:
    with https(gw) as http:
        text = http.get(f"{gw.url}/metrics", headers=METRICS_HEADERS).text
    found = re.search(rf'^zerto_rewind_connections_refused_total{{cap="{cap}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_connections_that_never_send_a_client_hello_are_capped_at_accept(
    tls_gateway: GatewayProcess,
) -> None:
    """60 raw TCP connections from one address that never start their TLS handshake:
    past the per-source cap of 20 each is closed at once, another address's HTTPS call
    with a token is served meanwhile, the 20 admitted ones are closed at the handshake
    timeout (2 s), and then the address is served again."""
    gw = tls_gateway
    assert gw.info is not None
    assert gw.url.startswith("https://")
    assert gw.info["limits"]["handshake_timeout_s"] == HANDSHAKE_S
    assert a_tokens_call(gw).status_code == 200  # warm: the upstream is up
    socks: list[socket.socket] = []
    try:
        started = time.monotonic()
        socks = [connect(gw, ABUSER) for _ in range(3 * PER_SOURCE)]
        refused = closed_by_gateway(socks, 1.0)
        beside = a_tokens_call(gw)
        held = [s for n, s in enumerate(socks) if n not in refused]
        assert time.monotonic() - started < HANDSHAKE_S, "the held ones must still be open"
        cut = closed_by_gateway(held, HANDSHAKE_S + 3)
        cut_after = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    assert len(refused) == 2 * PER_SOURCE
    assert all(data == b"" for data in refused.values()), "nothing is said before TLS"
    assert beside.status_code == 200
    assert len(held) == PER_SOURCE
    assert len(cut) == PER_SOURCE
    assert HANDSHAKE_S - 0.2 <= cut_after <= HANDSHAKE_S + 3
    assert a_tokens_call(gw, ABUSER).status_code == 200  # its places were given back
    assert refused_count(gw, "source") >= 2 * PER_SOURCE
    assert refused_count(gw, "handshake") == PER_SOURCE


def test_a_handshake_sent_a_byte_at_a_time_is_cut_off_at_the_handshake_timeout(
    tls_gateway: GatewayProcess,
) -> None:
    """A ClientHello dripped a byte every 0.2 s never finishes the handshake in time:
    the gateway closes it at the handshake timeout, whatever the client still sends."""
    gw = tls_gateway
    context = ssl.create_default_context()
    hello = ssl.MemoryBIO()
    tls = context.wrap_bio(ssl.MemoryBIO(), hello, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    client_hello = hello.read()
    assert len(client_hello) > 30
    sock = connect(gw, ABUSER)
    try:
        started = time.monotonic()
        closed_at = None
        for byte in client_hello[:-1]:
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # reset: the gateway closed it
                closed_at = time.monotonic() - started
                break
            if closed_by_gateway([sock], 0.2):
                closed_at = time.monotonic() - started
                break
    finally:
        sock.close()
    assert closed_at is not None, "a dripped handshake must not outlive the handshake timeout"
    assert HANDSHAKE_S - 0.2 <= closed_at <= HANDSHAKE_S + 1.5
