"""The listener's accounting and keys, one layer at a time (gateway/listener.py, probes.py).

The real gateway over real sockets is in tests/integration/gateway/test_gateway_listener.py.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from starlette.requests import Request

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.config.settings import GatewaySettings
from zerto_rewind.errors import ConfigError
from zerto_rewind.gateway import listener, probes
from zerto_rewind.gateway.listener import ConnectionGate, connection_room, source_of

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # sha256("test")


class _Transport:
    """Only what source_of reads: a peer address, no socket."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer

    def get_extra_info(self, name: str) -> Any:
        return self.peer if name == "peername" else None


def gate(total: int = 3, per_source: int = 2) -> ConnectionGate:
    return ConnectionGate(
        max_total=total,
        max_per_source=per_source,
        header_timeout_s=1,
        body_timeout_s=1,
        idle_timeout_s=1,
        registry=CollectorRegistry(),
    )


def test_a_source_is_an_ipv4_address_an_ipv6_slash_64_or_a_unix_user() -> None:
    assert source_of(_Transport(("192.0.2.7", 5000))) == "192.0.2.7"  # type: ignore[arg-type]
    one = source_of(_Transport(("2001:db8:1:2::10", 5000, 0, 0)))  # type: ignore[arg-type]
    other = source_of(_Transport(("2001:db8:1:2:ffff::1", 5001, 0, 0)))  # type: ignore[arg-type]
    elsewhere = source_of(_Transport(("2001:db8:1:3::10", 5000, 0, 0)))  # type: ignore[arg-type]
    assert one == other == "2001:db8:1:2::/64"
    assert elsewhere != one
    mapped = source_of(_Transport(("::ffff:192.0.2.7", 5000, 0, 0)))  # type: ignore[arg-type]
    assert mapped == "192.0.2.7"

    class _Unix(_Transport):
        def __init__(self, sock: socket.socket) -> None:
            super().__init__("")
            self.sock = sock

        def get_extra_info(self, name: str) -> Any:
            return self.sock if name == "socket" else super().get_extra_info(name)

    a, b = socket.socketpair()
    with a, b:
        assert source_of(_Unix(a)) == f"unix:{os.getuid()}"  # type: ignore[arg-type]


def test_the_per_source_cap_then_the_total_cap_and_release_frees_a_place() -> None:
    g = gate(total=3, per_source=2)
    assert g.admit("a") is None
    assert g.admit("a") is None
    refused = g.admit("a")
    assert refused is not None
    assert "gateway.max_connections_per_source" in refused
    assert g.admit("b") is None
    refused = g.admit("c")
    assert refused is not None
    assert "(gateway.max_connections)" in refused
    g.release("a")
    assert g.admit("c") is None
    assert (g.total, g.by_source) == (3, {"a": 1, "b": 1, "c": 1})
    for source in ("a", "b", "c"):
        g.release(source)
    assert (g.total, g.by_source) == (0, {})


def test_the_total_cap_is_sized_below_the_descriptor_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert connection_room(20000) == 20000 - listener.FD_RESERVE
    assert connection_room(600) == 344
    assert connection_room(400) == 200  # a tiny limit: half for connections
    monkeypatch.setattr(listener, "raise_fd_limit", lambda: 600)
    g = ConnectionGate.from_settings(GatewaySettings(), CollectorRegistry())
    assert (g.max_total, g.max_per_source) == (344, 128)
    roomy = GatewaySettings(max_connections=100, max_connections_per_source=500)
    monkeypatch.setattr(listener, "raise_fd_limit", lambda: 20000)
    g = ConnectionGate.from_settings(roomy, CollectorRegistry())
    assert (g.max_total, g.max_per_source) == (100, 100)


def load(directory: Path, gateway: dict[str, Any]) -> Settings:
    path = write_config(directory, {"zvm": ZVM, "gateway": gateway})
    return load_settings({"HOME": "/home/op", "ZS": "x"}, path=str(path))


def test_the_listener_keys_parse_with_their_defaults(tmp_path: Path) -> None:
    plain = load(tmp_path, {}).gateway
    assert (plain.header_timeout_s, plain.body_timeout_s, plain.idle_timeout_s) == (10, 20, 15)
    assert (plain.max_connections, plain.max_connections_per_source) == (4096, 128)
    assert plain.handshake_timeout_s == 10
    assert plain.metrics_clients == {}
    given = load(
        tmp_path,
        {
            "header_timeout_s": 2,
            "body_timeout_s": 3.5,
            "idle_timeout_s": 1,
            "max_connections": 50,
            "max_connections_per_source": 5,
            "handshake_timeout_s": 0.5,
            "metrics_clients": {"prom": DIGEST.upper()},
        },
    ).gateway
    assert (given.header_timeout_s, given.body_timeout_s, given.idle_timeout_s) == (2, 3.5, 1)
    assert (given.max_connections, given.max_connections_per_source) == (50, 5)
    assert given.handshake_timeout_s == 0.5
    assert given.metrics_clients == {"prom": DIGEST}


@pytest.mark.parametrize(
    ("gateway", "key"),
    [
        ({"header_timeout_s": 0}, "gateway.header_timeout_s"),
        ({"body_timeout_s": -1}, "gateway.body_timeout_s"),
        ({"handshake_timeout_s": 0}, "gateway.handshake_timeout_s"),
        ({"max_connections": 0}, "gateway.max_connections"),
        ({"max_connections_per_source": "many"}, "gateway.max_connections_per_source"),
        ({"metrics_clients": {"prom": "not-a-digest"}}, "gateway.metrics_clients.prom"),
    ],
)
def test_a_bad_listener_key_is_refused_naming_it(
    tmp_path: Path, gateway: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, gateway)
    assert info.value.key == key


def request(host: str, authorization: str | None = None, *, unix: bool = False) -> Request:
    headers = [(b"host", host.encode())]
    if authorization is not None:
        headers.append((b"authorization", authorization.encode()))
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/healthz",
        "headers": headers,
        "client": None if unix else ("127.0.0.1", 40000),
        "server": None if unix else ("127.0.0.1", 8750),
    }
    return Request(scope)


def test_host_is_checked_on_a_loopback_listener_as_mcp_checks_it() -> None:
    for host in ("127.0.0.1:8750", "localhost:8750", "[::1]:8750"):
        assert probes.host_refused(request(host), "127.0.0.1") is None
    for host in ("attacker.example:8750", "localhost", "127.0.0.1.attacker.example:8750"):
        refused = probes.host_refused(request(host), "127.0.0.1")
        assert refused is not None
        assert refused.status_code == 421
    assert probes.host_refused(request("attacker.example", unix=True), "127.0.0.1") is None
    assert probes.host_refused(request("gw1.lab.local:8750"), "10.0.0.5") is None  # beyond loopback


def test_details_are_for_a_metrics_token_or_the_socket() -> None:
    readers = {"prom": DIGEST}
    assert probes.may_read_details(request("127.0.0.1:1", "Bearer test"), readers)
    assert not probes.may_read_details(request("127.0.0.1:1", "Bearer other"), readers)
    assert not probes.may_read_details(request("127.0.0.1:1"), readers)
    assert not probes.may_read_details(request("127.0.0.1:1", "Bearer test"), {})
    assert probes.may_read_details(request("x", unix=True), {})


def test_the_caps_are_kept_at_accept_and_a_closed_connection_gives_its_place_back() -> None:
    """A real listening socket on 127.0.0.1 and asyncio's own server, with a protocol that
    does nothing: what counts is accept(). Past the per-source cap of 2 a connection gets
    503 naming the cap and is closed at once; once a held one is closed, its place is free."""
    import asyncio

    async def run() -> None:
        g = gate(total=5, per_source=2)
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.bind(("127.0.0.1", 0))
        listener = g.listening(raw, tls=False)
        server = await asyncio.get_running_loop().create_server(asyncio.Protocol, sock=listener)
        port = listener.getsockname()[1]
        try:
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            refused = await asyncio.wait_for(reader.read(), 5)  # read to EOF: closed
            writer.close()
            assert refused.startswith(b"HTTP/1.1 503 ")
            assert b"gateway.max_connections_per_source" in refused
            assert (g.total, g.by_source) == (2, {"127.0.0.1": 2})
            assert len(g.handshaking) == 2  # the protocol never said it saw them
            for _, w in held:
                w.close()  # each server transport sees EOF and closes its socket
            for _ in range(50):
                if g.total == 0:
                    break
                await asyncio.sleep(0.02)
            assert (g.total, g.by_source, g.handshaking) == (0, {}, {})
        finally:
            server.close()

    asyncio.run(run())


def test_a_flood_is_refused_a_few_at_a_time_so_the_loop_serves_others_between() -> None:
    """40 connections past the per-source cap, waiting at once: one accept() call (one turn
    of the event loop) refuses at most _REFUSALS_PER_ACCEPT of them, each with a 503, then
    says "none left" (asyncio then runs other work); the next calls refuse the rest."""
    g = gate(total=100, per_source=0)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.bind(("127.0.0.1", 0))
    gated = g.listening(raw, tls=False)
    gated.listen(64)
    gated.setblocking(False)
    port = gated.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
    try:
        batches = []
        for _ in range(10):
            before = g._refused_source._value.get()
            with pytest.raises(BlockingIOError):
                gated.accept()
            batches.append(int(g._refused_source._value.get() - before))
            if sum(batches) == len(clients):
                break
        assert max(batches) == listener._REFUSALS_PER_ACCEPT < len(clients)
        assert sum(batches) == len(clients)
        clients[0].settimeout(5)
        assert clients[0].recv(4096).startswith(b"HTTP/1.1 503 ")
        assert (g.total, g.by_source) == (0, {})
    finally:
        for client in clients:
            client.close()
        gated.close()
