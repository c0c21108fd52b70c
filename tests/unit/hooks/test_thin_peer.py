"""The thin hook's peer check: struct ucred read with int.from_bytes, every failure a refusal."""

from __future__ import annotations

import pwd
import struct

import pytest

from zerto_rewind.service_client import ServiceIdentityError, check_peer


class FakeSocket:
    """getsockopt(SOL_SOCKET, SO_PEERCRED, 12) answers ``cred``, or raises it."""

    def __init__(self, cred: bytes | Exception) -> None:
        self.cred = cred
        self.asked: list[tuple[int, int, int]] = []

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        self.asked.append((level, option, size))
        if isinstance(self.cred, Exception):
            raise self.cred
        return self.cred


def ucred(pid: int, uid: int, gid: int) -> bytes:
    return struct.pack("=iII", pid, uid, gid)  # native byte order, Linux struct ucred


def unused_uid() -> int:
    """A uid the passwd database does not name."""
    uid = 54321
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def test_the_listeners_uid_matches() -> None:
    import socket

    sock = FakeSocket(ucred(4242, 998, 998))
    check_peer(sock, "/run/zr/guard.sock", "998")
    assert sock.asked == [(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)]


def test_another_uid_is_refused_with_both_named() -> None:
    stranger = unused_uid()
    with pytest.raises(ServiceIdentityError) as caught:
        check_peer(FakeSocket(ucred(77, stranger, 5)), "/run/zr/guard.sock", "0")
    assert str(caught.value) == (
        f"the socket at /run/zr/guard.sock is served by uid {stranger} (pid 77), not by the "
        "guard service's user root (uid 0)"
    )
    assert caught.value.advice == "An operator can check the service's socket directory."


def test_a_name_is_looked_up_and_named_back() -> None:
    with pytest.raises(ServiceIdentityError) as caught:
        check_peer(FakeSocket(ucred(1, 0, 0)), "/s", "nobody")
    nobody = pwd.getpwnam("nobody").pw_uid
    assert (
        f"served by uid 0 (root, pid 1), not by the guard service's user nobody (uid {nobody})"
        in (str(caught.value))
    )


@pytest.mark.parametrize(
    ("cred", "why"),
    [
        (OSError(95, "Operation not supported"), "Operation not supported"),
        (b"\0" * 8, "a short peer credential"),
    ],
)
def test_credentials_that_cannot_be_read_are_refused(cred: bytes | Exception, why: str) -> None:
    with pytest.raises(ServiceIdentityError, match="cannot read who serves the socket at /s") as c:
        check_peer(FakeSocket(cred), "/s", "0")
    assert why in str(c.value)


def test_no_service_user_is_refused_before_asking_the_socket() -> None:
    sock = FakeSocket(ucred(1, 0, 0))
    with pytest.raises(ServiceIdentityError, match="no service identity") as caught:
        check_peer(sock, "/s", "")
    assert sock.asked == []
    assert "zerto-rewind install claude-code --service unix:/s" in caught.value.advice
