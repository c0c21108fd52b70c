"""``zerto-rewind approvals`` checks who serves its socket before it sends or shows anything.

A look-alike service, run by a real user made with useradd, listens where the
approver's CLI connects and answers a forged request. The CLI must refuse it
from the kernel's word (SO_PEERCRED) before a byte leaves: the look-alike
records every byte it receives, and receives none. The real service's side
(the CLI accepted by the gateway's own socket) is test_approvals_socket_users.py.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.users import unix_user

FORGED = "FORGED-LOOKALIKE"
LOOKALIKE = textwrap.dedent(
    f"""
    import os, socket, sys
    path, seen = sys.argv[1], sys.argv[2]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(8)
    open(seen, "wb").close()
    while True:
        conn, _ = server.accept()
        conn.settimeout(3)
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        with open(seen, "ab") as out:
            out.write(data)
        try:
            conn.sendall(b'{{"ok": true, "pending": [{{"id": "AAAA-BBBB", "tool": "{FORGED}",'
                         b' "vms": [], "principal": "x", "expires": 0, "state": "pending",'
                         b' "row": "no_vm", "args_digest": "0", "why": "w", "created": 0}}]}}\\n')
        except OSError:
            pass
        conn.close()
    """
)


class Lookalike:
    def __init__(self, directory: Path, user: pwd.struct_passwd) -> None:
        self.socket = directory / "approvals.sock"
        self.seen = directory / "seen.bin"
        script = directory / "lookalike.py"
        script.write_text(LOOKALIKE)
        script.chmod(0o644)
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", str(script), str(self.socket), str(self.seen)],
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while not (self.socket.exists() and self.seen.exists()):
            assert self.proc.poll() is None, "the look-alike did not start"
            assert time.monotonic() < deadline, "the look-alike did not listen"
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def impostor() -> Iterator[pwd.struct_passwd]:
    with unix_user("zr-fake") as user:
        yield user


def directory(owner: int, mode: int) -> Path:
    path = Path(tempfile.mkdtemp(prefix="zr-lookalike-"))
    os.chown(path, owner, -1)
    path.chmod(mode)
    return path


def approvals(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "approvals", *args],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_lookalike_of_another_uid_is_refused_before_anything_is_sent(
    impostor: pwd.struct_passwd,
) -> None:
    """The service's user is named (root here, as the tests' gateway runs): the
    look-alike in a directory its own user owns is refused, and gets no byte."""
    where = directory(impostor.pw_uid, 0o755)
    fake = Lookalike(where, impostor)
    try:
        for how in (["--service-user", "root"], ["--service-user", "0"]):
            shown = approvals("--service", f"unix:{fake.socket}", *how, "list", "--json")
            assert shown.returncode != 0
            assert FORGED not in shown.stdout + shown.stderr
            assert f"served by uid {impostor.pw_uid} ({impostor.pw_name}" in shown.stderr
            assert "not by the guard service's user root (uid 0)" in shown.stderr
            assert "look-alike" in shown.stderr
        by_env = approvals(
            "--service", f"unix:{fake.socket}", "approve", "AAAA-BBBB",
            env={"ZERTO_REWIND_SERVICE_USER": "root"},
        )  # fmt: skip
        assert by_env.returncode != 0
        assert "served by uid" in by_env.stderr
        assert fake.seen.read_bytes() == b""  # not one byte of any request left the CLI
        # Named as the service's user, the same listener is believed: the check is the uid.
        believed = approvals(
            "--service", f"unix:{fake.socket}", "--service-user", impostor.pw_name, "list"
        )
        assert believed.returncode == 0, believed.stderr
        assert FORGED in believed.stdout
    finally:
        fake.stop()
        shutil.rmtree(where, ignore_errors=True)


def test_without_a_service_user_a_shared_directory_is_refused(
    impostor: pwd.struct_passwd,
) -> None:
    """No --service-user, and a directory anyone may write in (as /tmp): refused unsent."""
    where = directory(0, 0o1777)
    fake = Lookalike(where, impostor)
    try:
        shown = approvals("--service", f"unix:{fake.socket}", "list")
        assert shown.returncode != 0
        assert "writable by others than its owner" in shown.stderr
        assert "--service-user" in shown.stderr
        assert FORGED not in shown.stdout
        assert fake.seen.read_bytes() == b""
    finally:
        fake.stop()
        shutil.rmtree(where, ignore_errors=True)


def test_without_a_service_user_the_directory_owner_must_serve(
    impostor: pwd.struct_passwd,
) -> None:
    """No --service-user: a root-owned 0755 directory means root must serve; the
    look-alike's socket there (put by root for the test, served by the impostor) is refused."""
    where = directory(0, 0o755)
    os.chown(where, impostor.pw_uid, -1)  # let the impostor bind ...
    where.chmod(0o755)
    fake = Lookalike(where, impostor)
    os.chown(where, 0, -1)  # ... then the directory is root's, as a service's would be
    try:
        shown = approvals("--service", f"unix:{fake.socket}", "show", "AAAA-BBBB")
        assert shown.returncode != 0
        assert f"served by uid {impostor.pw_uid}" in shown.stderr
        assert FORGED not in shown.stdout
        assert fake.seen.read_bytes() == b""
    finally:
        fake.stop()
        shutil.rmtree(where, ignore_errors=True)
