"""Each approvals request is decided by its sender's credentials; a connection has a lifetime.

Issue 28: a connection opened by an approver's helper and handed to another
process (``SCM_RIGHTS``) still approved after the helper exited, because the
service asked only ``SO_PEERCRED``, which names the process that connected.
Here, with real users made by useradd and the real gateway process, the helper
(as the approver) connects, is answered, hands the descriptor to a process of
another user and exits. That process's approve is refused, whether it sends
plainly or with its own ``SCM_CREDENTIALS``; claiming the approver's uid in
them is refused by the kernel itself (EPERM). The request stays pending, and
the approver's own CLI still approves it. The other way round (a stranger's
connection handed to the approver's process) is refused too.

The helpers are stdlib-only scripts run by the system Python as those users.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    client,
    decisions,
    gateway_config,
    gateway_process,
)
from support.users import as_user, unix_user
from zerto_rewind.cli.approvals_cmd import send_with_credentials
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

HELPER = textwrap.dedent(
    """
    import socket, struct, sys
    path, channel = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendall(b'{"op": "whoami"}\\n')
    answer = b""
    while not answer.endswith(b"\\n"):
        answer += conn.recv(65536)
    print(answer.decode().strip(), flush=True)
    fd = struct.pack("i", conn.fileno())
    channel.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd)])
    """
)

HOLDER = textwrap.dedent(
    """
    import json, os, socket, struct, sys
    channel, claimed_uid = socket.socket(fileno=int(sys.argv[1])), int(sys.argv[2])
    _, ancillary, _, _ = channel.recvmsg(1, socket.CMSG_SPACE(4))
    conn = socket.socket(fileno=struct.unpack("i", ancillary[0][2][:4])[0])
    request_id = sys.stdin.readline().strip()
    line = json.dumps({"op": "approve", "id": request_id}).encode() + b"\\n"
    def creds(uid):
        raw = struct.pack("3i", os.getpid(), uid, os.getgid())
        return [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, raw)]
    try:
        conn.sendmsg([line], creds(claimed_uid))
        forged = "sent"
    except PermissionError:
        forged = "EPERM"
    conn.sendmsg([line], creds(os.getuid()))
    conn.sendall(line)
    reader = conn.makefile("rb")
    answers = [json.loads(reader.readline()) for _ in range(2 if forged == "EPERM" else 3)]
    print(json.dumps({"forged": forged, "answers": answers}), flush=True)
    """
)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A root-owned 0755 directory every user reaches: the socket and the scripts."""
    path = Path(tempfile.mkdtemp(prefix="zr-creds-"))
    path.chmod(0o755)
    for name, text in (("helper.py", HELPER), ("holder.py", HOLDER)):
        (path / name).write_text(text)
        (path / name).chmod(0o644)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def people() -> Iterator[tuple[Any, Any]]:
    with unix_user("zr-cred-appr") as approver, unix_user("zr-cred-other") as other:
        yield approver, other


def _gateway(
    box: Sandbox, tmp: Path, actions_log: Path, sock: Path, approver: str, **approvals: Any
) -> Any:
    gateway_config(
        box,
        actions_log,
        approvals={"approvers": {"users": [approver]}, "wait_s": 0.5, **approvals},
    )
    return gateway_process(box, tmp, extra_args=("--approvals-socket", str(sock)))


def _cli(user: str, sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return as_user(user, [sys.executable, "-m", "zerto_rewind", "approvals",
                          "--service", f"unix:{sock}", *args])  # fmt: skip


def _run_as(user: Any, argv: list[str], fd: int, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["/usr/bin/python3", *argv],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        pass_fds=[fd],
        text=True,
        stdout=subprocess.PIPE,
        **kwargs,
    )


async def _pending_request(process: GatewayProcess, approver: str, sock: Path) -> str:
    async with client(process.endpoint(), TOKENS["agent-a"]) as c:
        await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    listed = _cli(approver, sock, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (request,) = json.loads(listed.stdout)
    return str(request["id"])


def _hand_over(opener: Any, holder: Any, sock: Path, scripts: Path, request_id: str) -> Any:
    """``opener`` connects, is answered, hands the connection to ``holder`` and exits."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with mine, theirs:
        held = _run_as(
            holder, [str(scripts / "holder.py"), str(theirs.fileno()), str(opener.pw_uid)],
            theirs.fileno(), stdin=subprocess.PIPE,
        )  # fmt: skip
        helper = _run_as(
            opener, [str(scripts / "helper.py"), str(sock), str(mine.fileno())], mine.fileno()
        )
        whoami, _ = helper.communicate(timeout=60)
        assert helper.returncode == 0
    out, _ = held.communicate(request_id + "\n", timeout=60)  # the helper has exited
    assert held.returncode == 0
    return json.loads(whoami), json.loads(out)


async def test_a_connection_handed_to_another_user_approves_nothing(
    box: Sandbox, tmp_path: Path, actions_log: Path, open_dir: Path, people: tuple[Any, Any]
) -> None:
    approver, other = people
    sock = open_dir / "approvals.sock"
    with _gateway(box, tmp_path, actions_log, sock, approver.pw_name) as process:
        request_id = await _pending_request(process, approver.pw_name, sock)
        whoami, held = _hand_over(approver, other, sock, open_dir, request_id)
        assert whoami["approver"] == f"unix:{approver.pw_name}"
        assert whoami["may_approve"] is True  # the connection is an approver's
        assert held["forged"] == "EPERM"  # the kernel refuses a claimed uid
        for answer in held["answers"]:  # with its own credentials, and plainly
            assert answer["ok"] is False
            assert f"unix:{other.pw_name} is not an approver" in answer["error"]
        shown = _cli(approver.pw_name, sock, "show", request_id, "--json")
        assert json.loads(shown.stdout)["state"] == "pending"
        approved = _cli(approver.pw_name, sock, "approve", request_id)
        assert approved.returncode == 0, approved.stderr
        answers = [(d["answer"], d.get("approver")) for d in decisions(box)]
        assert ("approved", f"unix:{approver.pw_name}") in answers
        assert not any(who == f"unix:{other.pw_name}" for _, who in answers)


async def test_a_strangers_connection_handed_to_the_approver_approves_nothing(
    box: Sandbox, tmp_path: Path, actions_log: Path, open_dir: Path, people: tuple[Any, Any]
) -> None:
    approver, other = people
    sock = open_dir / "approvals.sock"
    with _gateway(box, tmp_path, actions_log, sock, approver.pw_name) as process:
        request_id = await _pending_request(process, approver.pw_name, sock)
        whoami, held = _hand_over(other, approver, sock, open_dir, request_id)
        assert whoami["may_approve"] is False
        assert held["forged"] == "EPERM"
        for answer in held["answers"]:  # the sender may; the one who connected may not
            assert answer["ok"] is False
            assert f"unix:{other.pw_name} is not an approver" in answer["error"]
        shown = _cli(approver.pw_name, sock, "show", request_id, "--json")
        assert json.loads(shown.stdout)["state"] == "pending"


def _ask(conn: socket.socket) -> bytes:
    """Send whoami with our credentials; the answer line, or b"" if the service closed."""
    try:
        send_with_credentials(conn, b'{"op": "whoami"}\n')
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                return b""
            answer += chunk
    except (BrokenPipeError, ConnectionResetError):
        return b""
    return answer


async def test_a_connection_closes_after_its_operations_or_its_age(
    box: Sandbox, tmp_path: Path, actions_log: Path, open_dir: Path, people: tuple[Any, Any]
) -> None:
    approver, _ = people
    sock = open_dir / "approvals.sock"
    limits = {"socket_max_ops": 2, "socket_max_age_s": 2}
    with _gateway(box, tmp_path, actions_log, sock, approver.pw_name, **limits):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect(str(sock))
            first, second = _ask(conn), _ask(conn)
            assert json.loads(first)["approver"] == "unix:root"
            assert json.loads(second)["approver"] == "unix:root"
            assert _ask(conn) == b""  # the third operation is not answered: closed after two
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect(str(sock))
            started = time.monotonic()
            assert json.loads(_ask(conn))["ok"] is True
            assert conn.recv(1) == b""  # closed by the service, not by the 30 s idle timeout
            assert 1.5 <= time.monotonic() - started < 10
            assert _ask(conn) == b""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:  # a new one works
            conn.settimeout(20)
            conn.connect(str(sock))
            assert json.loads(_ask(conn))["ok"] is True


async def test_one_users_flood_of_connections_keeps_no_one_else_out(
    box: Sandbox, tmp_path: Path, actions_log: Path, open_dir: Path, people: tuple[Any, Any]
) -> None:
    approver, _ = people
    sock = open_dir / "approvals.sock"
    with _gateway(box, tmp_path, actions_log, sock, approver.pw_name), ExitStack() as held:
        flood = []
        for _ in range(16):  # root's: each answered, so each is counted
            conn = held.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            conn.settimeout(20)
            conn.connect(str(sock))
            assert json.loads(_ask(conn))["ok"] is True
            flood.append(conn)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as extra:
            extra.settimeout(20)
            extra.connect(str(sock))
            assert extra.recv(1) == b""  # the 17th is closed at once
        mine = _cli(approver.pw_name, sock, "whoami")
        assert mine.returncode == 0, mine.stderr
        assert "may approve" in mine.stdout
        flood.pop().close()
        time.sleep(0.5)  # the service sees the close
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as again:
            again.settimeout(20)
            again.connect(str(sock))
            assert json.loads(_ask(again))["ok"] is True
