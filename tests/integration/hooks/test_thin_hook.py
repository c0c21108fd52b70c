"""The thin hook asks the guard service on a unix socket; every failure is a deny in time.

The service in these tests runs as the test's own user, so the hook is told that uid
(``--service-user``, as install writes it); a listener of another uid gets nothing.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.service import guard_service
from zerto_rewind.hooks.thin import LAUNCH_CODE
from zerto_rewind.testing import Sandbox


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as sandbox:
        yield sandbox


@pytest.fixture
def service(box: Sandbox, tmp_path: Path) -> Iterator[str]:
    """`zerto-rewind gateway --socket` (the guard service), no upstreams: a hook-only service."""
    with guard_service(box, tmp_path) as url:
        yield url


# The guard service of these tests runs as the test's own user.
OWN_UID = str(os.geteuid())


def thin_hook(
    service: str,
    tool: str,
    tool_input: dict[str, Any],
    *,
    budget: float = 20.0,
    service_user: str | None = OWN_UID,
) -> tuple[int, dict[str, Any] | None, str, float]:
    """Run the thin hook as Claude Code would; (code, hookSpecificOutput, stderr, seconds).

    ``service_user=None`` runs it without ``--service-user``.
    """
    payload = {
        "session_id": "thin-session-1",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_thin",
    }
    argv = [sys.executable, "-c", LAUNCH_CODE, "--service", service, "--budget", str(budget)]
    if service_user is not None:
        argv += ["--service-user", service_user]
    started = time.monotonic()
    proc = subprocess.run(
        argv,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=budget + 30,
        env={"PATH": "/usr/bin:/bin"},  # no ZERTO_* variable, no config: the hook needs none
        check=False,
    )
    elapsed = time.monotonic() - started
    out = json.loads(proc.stdout)["hookSpecificOutput"] if proc.stdout.strip() else None
    return proc.returncode, out, proc.stderr, elapsed


def test_the_service_decides_every_row(service: str, box: Sandbox) -> None:
    """Confirmed → context; failed → deny; unlisted → ask; read-only → silent; all logged there."""
    code, out, _, _ = thin_hook(service, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"})
    assert code == 0
    assert out is not None
    assert "a Zerto checkpoint protects" in out["additionalContext"]
    _, failed, _, _ = thin_hook(service, "mcp__vsphere__power_off_vm", {"name": "sql-paused-1"})
    assert failed is not None
    assert failed["permissionDecision"] == "deny"
    assert "paused-vpg" in failed["permissionDecisionReason"]
    _, unlisted, _, _ = thin_hook(service, "mcp__other__thing", {})
    assert unlisted is not None
    assert unlisted["permissionDecision"] == "ask"
    code, silent, _, _ = thin_hook(service, "mcp__vsphere__list_vms", {})
    assert (code, silent) == (0, None)
    assert box.tag_requests("jp-local") == 1
    rows = [json.loads(line)["row"] for line in Path(box.log_path).read_text().splitlines()]
    assert rows == ["confirmed", "failed", "unlisted"]


def test_an_unreachable_service_denies_with_the_reason(tmp_path: Path) -> None:
    """No socket: deny, naming the service and what failed; never a silent pass."""
    service = f"unix:{tmp_path / 'absent.sock'}"
    code, out, _, _ = thin_hook(service, "mcp__vsphere__power_off_vm", {"name": "jp-ubuntu"})
    assert code == 0
    assert out is not None
    assert out["permissionDecision"] == "deny"
    assert "could not decide" in out["permissionDecisionReason"]
    assert "absent.sock" in out["permissionDecisionReason"]


def test_a_service_that_never_answers_is_a_deny_before_the_budget(tmp_path: Path) -> None:
    """A socket that accepts and then says nothing: deny before the hook's budget ends."""
    path = tmp_path / "mute.sock"
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(path))
    mute.listen(4)
    try:
        code, out, _, elapsed = thin_hook(f"unix:{path}", "mcp__vsphere__power_off_vm",
                                          {"name": "jp-ubuntu"}, budget=2.0)  # fmt: skip
    finally:
        mute.close()
    assert code == 0
    assert out is not None
    assert out["permissionDecision"] == "deny"
    assert elapsed < 2.0 + 1.0  # interpreter start-up is the slack


def test_a_service_that_answers_nonsense_is_a_deny(tmp_path: Path) -> None:
    """An HTTP answer that is not a decision: deny, with what was wrong."""
    import threading

    path = tmp_path / "liar.sock"
    liar = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    liar.bind(str(path))
    liar.listen(4)

    def answer() -> None:
        conn, _ = liar.accept()
        conn.recv(65536)
        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"ok": true}\n')
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        _, out, _, _ = thin_hook(f"unix:{path}", "mcp__vsphere__power_off_vm", {"name": "x"})
    finally:
        liar.close()
    assert out is not None
    assert out["permissionDecision"] == "deny"
    assert "no outcome" in out["permissionDecisionReason"]


def test_bad_stdin_blocks_the_call(tmp_path: Path) -> None:
    """Not a PreToolUse payload: exit 2 (Claude Code blocks the call), the reason on stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH_CODE, "--service", f"unix:{tmp_path / 's'}"],
        input="not json",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "not valid JSON" in proc.stderr


# ------------------------------------------------------------------ who answers


@contextmanager
def recording_listener(path: Path) -> Iterator[list[bytes]]:
    """A listener in a thread of this process (so served by this test's uid) that answers
    ``none`` (allow) to one connection; yields what that connection sent, once it closed."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(30)
    received: list[bytes] = []
    body = b'{"outcome": "none", "reason": "", "context": ""}'

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                got += chunk
            received.append(got)
            if got:
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                conn.sendall(head + body)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        thread.join(timeout=30)
        server.close()


def other_uid() -> int:
    """A uid that is not this test's (nobody's where it exists)."""
    try:
        uid = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        uid = 65534
    return uid if uid != os.geteuid() else uid - 1


def test_a_listener_of_another_uid_gets_nothing_and_the_call_is_denied(tmp_path: Path) -> None:
    """The hook expects the service's uid; this socket is served by the test's own: deny,
    naming both, before a byte of the call is sent."""
    path = tmp_path / "guard.sock"
    expected = other_uid()
    with recording_listener(path) as received:
        code, out, _, _ = thin_hook(
            f"unix:{path}",
            "mcp__vsphere__power_off_vm",
            {"name": "sql-paused-1"},
            service_user=str(expected),
        )
    assert code == 0
    assert out is not None
    assert out["permissionDecision"] == "deny"
    reason = out["permissionDecisionReason"]
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert f"the socket at {path} is served by uid {os.geteuid()} ({me}, pid " in reason
    assert f"not by the guard service's user {pwd.getpwuid(expected).pw_name} (uid {expected})" in (
        reason
    )
    assert "the call was not run" in reason
    assert "An operator can check the service's socket directory." in reason
    assert received == [b""]  # it connected, it sent nothing


@pytest.mark.parametrize("service_user", ["uid", "name"])
def test_a_listener_of_the_service_user_gets_the_call(tmp_path: Path, service_user: str) -> None:
    """The right uid (as a number, as install writes it, or as a name): the request goes
    through and the listener's answer is the hook's."""
    path = tmp_path / "guard.sock"
    user = OWN_UID if service_user == "uid" else pwd.getpwuid(os.geteuid()).pw_name
    with recording_listener(path) as received:
        code, out, stderr, _ = thin_hook(f"unix:{path}", "mcp__vsphere__power_off_vm",
                                         {"name": "jp-ubuntu"}, service_user=user)  # fmt: skip
    assert (code, out) == (0, None), stderr  # the listener said `none`
    [request] = received
    assert request.startswith(b"POST /v1/decide HTTP/1.1\r\n")


def test_a_hook_without_a_service_identity_sends_nothing(tmp_path: Path) -> None:
    """No --service-user: deny, for the operator to reinstall; the listener gets nothing."""
    path = tmp_path / "guard.sock"
    with recording_listener(path) as received:
        _, out, _, _ = thin_hook(f"unix:{path}", "mcp__vsphere__power_off_vm",
                                 {"name": "jp-ubuntu"}, service_user=None)  # fmt: skip
    assert out is not None
    assert out["permissionDecision"] == "deny"
    reason = out["permissionDecisionReason"]
    assert "no service identity (--service-user) names the guard service's user" in reason
    assert "The thin hook was installed without one; an operator must reinstall it" in reason
    assert "the call was not run" in reason
    assert f"zerto-rewind install claude-code --service unix:{path}" in reason
    assert received == [b""]


def test_an_unknown_service_user_name_denies(tmp_path: Path) -> None:
    path = tmp_path / "guard.sock"
    with recording_listener(path) as received:
        _, out, _, _ = thin_hook(f"unix:{path}", "mcp__vsphere__power_off_vm",
                                 {"name": "jp-ubuntu"}, service_user="zr-no-such-user")  # fmt: skip
    assert out is not None
    assert out["permissionDecision"] == "deny"
    assert "'zr-no-such-user' is no user of this machine" in out["permissionDecisionReason"]
    assert received == [b""]
