"""The doctor fails a guard service socket whose directory another user can change.

As the gateway refuses to make its sockets there, the doctor says so of the
sockets it is shown: a thin hook's ``--service unix:PATH`` and the approvals CLI's
``ZERTO_REWIND_APPROVALS``. Real sockets, and a real user made by useradd who owns
the bad directory; a root-owned 0755 directory passes. Without ``--as-user``:
every user but root and the socket's owner counts.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.users import reachable_dir, unix_user
from zerto_rewind.cli.doctor import Check, run_checks
from zerto_rewind.hooks.thin import LAUNCH_CODE


@pytest.fixture
def base() -> Iterator[Path]:
    with reachable_dir("zr-doc-sock-") as path:
        yield path


@pytest.fixture
def someone() -> Iterator[Any]:
    with unix_user("zr-doc-sock-") as entry:
        yield entry


def _socket_in(directory: Path) -> socket.socket:
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(directory / "guard.sock"))  # root's, not listening
    return bound


def _thin_settings(path: Path, sock: Path) -> Path:
    command = shlex.join([sys.executable, "-c", LAUNCH_CODE, "hook", "--service",
                          f"unix:{sock}", "--service-user", "root"])  # fmt: skip
    hook = {"type": "command", "command": command, "timeout": 180, "onFailure": "block"}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": ".*", "hooks": [hook]}]}}))
    return path


def _directory_checks(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.name == "socket directory"]


def test_a_socket_in_another_users_directory_fails(base: Path, someone: Any) -> None:
    theirs = base / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, someone.pw_uid, someone.pw_gid)
    with _socket_in(theirs):
        sock = theirs / "guard.sock"
        settings = _thin_settings(base / "settings.json", sock)
        env = {"HOME": str(base), "ZERTO_REWIND_APPROVALS": f"unix:{sock}"}
        checks = run_checks(settings_files=[str(settings)], env=env, project_dirs=[])
    found = _directory_checks(checks)
    assert [c.status for c in found] == ["fail", "fail"]  # the hook's, the approvals CLI's
    details = " | ".join(c.detail for c in found)
    assert f"the hook's unix:{sock}" in details
    assert f"ZERTO_REWIND_APPROVALS unix:{sock}" in details
    for check in found:
        assert f"{theirs} can be changed by {someone.pw_name}" in check.detail
        assert "the gateway refuses to serve a socket there" in check.detail
        assert "only root or the service's user can write" in (check.fix or "")


def test_a_socket_in_roots_own_directory_passes(base: Path, someone: Any) -> None:
    run = base / "run"
    run.mkdir(mode=0o755)
    with _socket_in(run):
        env = {"HOME": str(base), "ZERTO_REWIND_APPROVALS": f"unix:{run / 'guard.sock'}"}
        checks = run_checks(settings_files=[], env=env, project_dirs=[])
    (check,) = _directory_checks(checks)
    assert check.status == "pass", check.detail
    assert f"only root and the service's user root (uid 0) can change {run}" in check.detail
