"""The approvals socket reads each request with the credentials the kernel attached to it.

One layer: :class:`CredentialLines` and the sender rule, over a real socket pair
with ``SO_PASSCRED`` on, written by this process and by a child process (another
pid, so another sender). The service side is a stand-in that knows one approver.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import sys
from collections.abc import Iterator

import anyio
import pytest

from zerto_rewind.core.approvals import Approver
from zerto_rewind.gateway import approvals_socket
from zerto_rewind.gateway.approvals_socket import CredentialLines, Sender


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    server.setblocking(False)
    with server, peer:
        yield server, peer


def _me() -> Sender:
    return Sender(os.getpid(), os.getuid(), os.getgid())


def _lines(server: socket.socket, count: int) -> list[tuple[bytes, set[Sender | None]] | None]:
    async def read() -> list[tuple[bytes, set[Sender | None]] | None]:
        lines = CredentialLines(server)
        return [await lines.next_line() for _ in range(count)]

    return anyio.run(read)


def test_each_line_carries_its_senders_credentials(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, peer = pair
    peer.sendall(b'{"op": "list"}\n{"op": ')  # two lines' worth in one write
    peer.sendall(b'"whoami"}\n')
    peer.close()
    first, second, end = _lines(server, 3)
    assert first == (b'{"op": "list"}\n', {_me()})
    assert second == (b'{"op": "whoami"}\n', {_me()})
    assert end is None


def test_a_line_written_by_two_processes_names_both(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, peer = pair
    peer.sendall(b'{"op": "approve", ')
    child = subprocess.run(
        [sys.executable, "-c",
         "import os, socket, sys\n"
         "s = socket.socket(fileno=int(sys.argv[1]))\n"
         "s.sendall(b'\"id\": \"AAAA-BBBB\"}\\n')\n"
         "print(os.getpid())", str(peer.fileno())],
        pass_fds=[peer.fileno()], capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    ((line, senders),) = [got for got in _lines(server, 1) if got is not None]
    assert line == b'{"op": "approve", "id": "AAAA-BBBB"}\n'
    assert {s.pid for s in senders if s is not None} == {os.getpid(), int(child.stdout)}

    class Service:  # the rule's stand-in: everyone may (so only the sender rule refuses)
        def refusal(self, approver: Approver, request: object) -> str | None:
            return None

    approver, refused = approvals_socket._sender_refusal(Service(), _me(), senders)  # type: ignore[arg-type]
    assert approver is None
    assert refused is not None
    assert "one sender's credentials" in refused


def test_the_sender_is_judged_and_the_opener_too() -> None:
    root = pwd.getpwuid(0).pw_name
    judged: list[str] = []

    class Service:
        def refusal(self, approver: Approver, request: object) -> str | None:
            judged.append(approver.name)
            return None if approver.name == root else f"{approver.label} is not an approver"

    nobody = pwd.getpwnam("nobody")
    sender = Sender(4242, nobody.pw_uid, nobody.pw_gid)
    opener = Sender(4141, 0, 0)
    service = Service()
    approver, refused = approvals_socket._sender_refusal(service, opener, {sender})  # type: ignore[arg-type]
    assert approver is not None
    assert approver.name == "nobody"
    assert refused == "unix:nobody is not an approver"
    judged.clear()
    approver, refused = approvals_socket._sender_refusal(service, sender, {opener})  # type: ignore[arg-type]
    assert approver is not None
    assert approver.name == root
    assert refused == (  # handed over by a stranger
        "this connection was opened by another user, and unix:nobody is not an approver: "
        "connect again yourself"
    )
    assert judged == [root, "nobody"]


def test_a_line_past_the_limit_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    server, peer = pair
    peer.setblocking(False)
    sent = 0
    try:
        while sent <= 2 * 64 * 1024:
            sent += peer.send(b"x" * 4096)
    except BlockingIOError:
        pass  # the buffer is full
    assert sent > 64 * 1024  # more than a request may be is waiting
    with pytest.raises(ValueError, match="a request longer than 65536 bytes"):
        _lines(server, 1)
