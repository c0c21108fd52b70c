"""`zerto-rewind gateway` on an address something else holds: one line, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import gateway_config
from zerto_rewind.gateway.approvals_web import hash_password
from zerto_rewind.testing import Sandbox


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(str(tmp_path / "box")) as sandbox:
        yield sandbox


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another listener holds for the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        yield int(other.getsockname()[1])


def _gateway(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "zerto_rewind", "gateway", "--allow-privileged-upstream"]
    return subprocess.run(
        [*command, *args], env=box.env(), capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("option", ["--listen", "--approvals-listen"])
def test_a_busy_port_is_one_line_saying_what_to_do(
    box: Sandbox, tmp_path: Path, held_port: int, option: str
) -> None:
    approvers = {"olivia": hash_password("correct horse battery")}
    gateway_config(box, tmp_path / "actions.jsonl", approvals={"web_approvers": approvers})
    busy = f"127.0.0.1:{held_port}"
    listen = busy if option == "--listen" else "127.0.0.1:0"
    extra = ("--approvals-listen", busy) if option == "--approvals-listen" else ()
    done = _gateway(box, "--listen", listen, *extra)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "zerto-rewind gateway" in line]
    assert lines == [
        f"zerto-rewind gateway: UsageError: {option} {busy}: already in use (Address already "
        f"in use) — stop what listens there (`ss -ltnp` shows it) or give {option} another "
        "address"
    ], done.stderr
    assert "Traceback" not in done.stderr


def test_a_socket_path_another_process_serves_is_one_line_and_left_alone(
    box: Sandbox, tmp_path: Path
) -> None:
    """--socket where a live listener is: refused in one line; that listener keeps its path."""
    gateway_config(box, tmp_path / "actions.jsonl")
    path = tmp_path / "gw.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(path))
        other.listen(1)
        done = _gateway(box, "--socket", str(path))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
            caller.connect(str(path))  # still the other process's
            accepted, _ = other.accept()
            accepted.close()
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "zerto-rewind gateway" in line]
    assert lines == [
        f"zerto-rewind gateway: UsageError: --socket {path}: already in use (a process "
        "listens there) — stop it (`ss -lxp` shows it) or give --socket another path"
    ], done.stderr
    assert "Traceback" not in done.stderr
