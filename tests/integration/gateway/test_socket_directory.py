"""The gateway refuses to make its sockets where another user could replace them.

The real gateway process, as root, and a real user made by useradd: a directory
that user owns (0755), one its group may write (0775), and a world-writable
sticky one (as /tmp) are refused for the decide socket (``--socket``) and for the
approvals socket (``--approvals-socket``), with an error that names the directory,
who can change it, and what to do; nothing is made there. A root-owned 0755
directory is accepted, and both sockets are born with their modes.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.gateway.gateway_helpers import gateway_config, gateway_process
from support.users import reachable_dir, unix_user
from zerto_rewind.testing import Sandbox


@pytest.fixture
def base() -> Iterator[Path]:
    """Root's 0755 directory straight under /tmp, which every user may search."""
    with reachable_dir("zr-sockdir-") as path:
        yield path


@pytest.fixture
def someone() -> Iterator[Any]:
    with unix_user("zr-sockdir-") as entry:
        yield entry


def _bad_directories(base: Path, someone: Any) -> dict[str, Path]:
    owned = base / "owned"
    owned.mkdir(mode=0o755)
    os.chown(owned, someone.pw_uid, someone.pw_gid)
    group = base / "group"
    group.mkdir()
    group.chmod(0o775)
    os.chown(group, 0, someone.pw_gid)
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    return {"owned": owned, "group": group, "sticky": sticky}


@pytest.mark.parametrize("option", ["--socket", "--approvals-socket"])
def test_a_directory_another_user_can_change_is_refused(
    box: Sandbox, actions_log: Path, base: Path, someone: Any, option: str
) -> None:
    gateway_config(box, actions_log, approvals={"approvers": {"users": ["root"]}})
    for kind, directory in _bad_directories(base, someone).items():
        sock = directory / "zr.sock"
        listen = ["--listen", "127.0.0.1:0"] if option == "--approvals-socket" else []
        done = subprocess.run(
            [sys.executable, "-m", "zerto_rewind", "gateway", *listen,
             "--allow-privileged-upstream", option, str(sock)],
            env=box.env(), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode != 0, (kind, done.stderr)
        assert f"{option} {sock}: the directory {directory} can be changed by" in done.stderr
        if kind != "sticky":  # there any user may, the first listed is named
            assert someone.pw_name in done.stderr, (kind, done.stderr)
        assert "only root or the gateway's user can write" in done.stderr
        assert not os.path.lexists(sock), kind


def test_a_directory_only_root_can_change_is_served_with_the_modes_asked(
    box: Sandbox, tmp_path: Path, actions_log: Path, base: Path
) -> None:
    gateway_config(box, actions_log, approvals={"approvers": {"users": ["root"]}})
    run = base / "run"
    run.mkdir(mode=0o755)
    decide, approvals = run / "gw.sock", run / "approvals.sock"
    args = ("--also-socket", str(decide), "--socket-mode", "0640",
            "--approvals-socket", str(approvals))  # fmt: skip
    with gateway_process(box, tmp_path, extra_args=args) as process:
        ready = process.info or {}
        assert ready["socket"] == f"unix:{decide}"
        assert ready["approvals_socket"] == f"unix:{approvals}"
        for path, mode in ((decide, 0o640), (approvals, 0o666)):
            info = os.lstat(path)
            assert stat.S_ISSOCK(info.st_mode)
            assert stat.S_IMODE(info.st_mode) == mode
