"""The gateway's unix sockets are born with their final mode; nothing is changed by path after.

Real sockets in directories the test controls. The moment between ``bind`` and
``listen`` is reached by wrapping ``os.umask`` (its second call puts the umask
back right after ``bind`` returns): there the test reads the new file's mode,
and plays the attacker of issue 28, who swaps the fresh socket for a symlink to a
0600 file. Whatever the gateway does next must leave that file's mode alone; a
``chmod`` by path (what the gateway did before) would make it 0666, and the
control case shows the race is real.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from zerto_rewind.errors import UsageError
from zerto_rewind.gateway import unix_listen
from zerto_rewind.gateway.unix_listen import bind_unix, check_socket_directory


def _after_bind(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """Run ``act`` when bind_unix puts the umask back: just after bind() returned."""
    real = os.umask
    calls: list[int] = []

    def umask(mask: int) -> int:
        calls.append(mask)
        if len(calls) == 2:
            act()
        return real(mask)

    monkeypatch.setattr(unix_listen.os, "umask", umask)


@pytest.fixture
def own_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "run"
    directory.mkdir(mode=0o755)
    return directory


@pytest.mark.parametrize("mode", [0o600, 0o660, 0o666])
def test_the_socket_has_its_mode_when_bind_returns(
    own_dir: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    path = own_dir / "gw.sock"
    seen: list[int] = []
    real_umask = os.umask
    before = real_umask(0o022)
    try:
        _after_bind(monkeypatch, lambda: seen.append(os.lstat(path).st_mode))
        listener = bind_unix(str(path), mode, "--socket")
        monkeypatch.undo()
        assert real_umask(0o022) == 0o022  # put back as it was
    finally:
        real_umask(before)
    with listener:
        (at_bind,) = seen
        assert stat.S_ISSOCK(at_bind)
        assert stat.S_IMODE(at_bind) == mode
        assert stat.S_IMODE(os.lstat(path).st_mode) == mode


def test_a_symlink_swapped_in_after_bind_leaves_its_target_alone(
    own_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = own_dir / "approvals.sock"
    target = tmp_path / "secret"
    target.write_text("root's own\n")
    target.chmod(0o600)

    def swap() -> None:
        os.unlink(path)
        os.symlink(target, path)

    _after_bind(monkeypatch, swap)
    listener = bind_unix(str(path), 0o666, "--approvals-socket")
    with listener:
        listener.listen(8)
        assert os.path.islink(path)  # the swap happened where the attacker wanted it
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    # Control: what a chmod by path at that moment does (the old code's).
    os.chmod(path, 0o666)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666


def test_no_chmod_or_chown_by_path(own_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    for name in ("chmod", "chown", "lchown", "lchmod"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, lambda *a, _n=name, **k: called.append(_n))
    stale = own_dir / "gw.sock"
    with bind_unix(str(stale), 0o660, "--socket"):
        pass
    with bind_unix(str(stale), 0o600, "--socket") as again:  # a stale socket is replaced
        assert stat.S_IMODE(os.lstat(stale).st_mode) == 0o600
        again.listen(1)
    assert called == []


def test_a_file_that_is_not_a_socket_is_never_replaced(own_dir: Path) -> None:
    path = own_dir / "gw.sock"
    path.write_text("not a socket\n")
    with pytest.raises(UsageError, match=r"--socket .*gw\.sock: cannot listen there"):
        bind_unix(str(path), 0o660, "--socket")
    assert path.read_text() == "not a socket\n"


def test_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: sticky does not help, the path can be made first
    with pytest.raises(UsageError) as raised:
        check_socket_directory(str(shared / "gw.sock"), "--socket")
    message = str(raised.value)
    assert f"--socket {shared}/gw.sock: the directory {shared} can be changed by" in message
    assert "only root or the gateway's user can write" in message
    with pytest.raises(UsageError, match="can be changed by"):
        bind_unix(str(shared / "gw.sock"), 0o660, "--socket")
    assert not (shared / "gw.sock").exists()  # refused before anything was made


def test_a_directory_only_we_can_write_is_accepted(own_dir: Path) -> None:
    check_socket_directory(str(own_dir / "gw.sock"), "--socket")


def test_a_socket_something_listens_on_is_in_use_not_replaced(own_dir: Path) -> None:
    """A second gateway on one --socket must not take the first one's callers over."""
    path = own_dir / "gw.sock"
    with bind_unix(str(path), 0o660, "--socket") as first:
        first.listen(1)
        inode = os.lstat(path).st_ino
        with pytest.raises(UsageError, match=r"--socket .*gw\.sock: already in use") as info:
            bind_unix(str(path), 0o660, "--socket")
        assert "another path" in str(info.value)
        assert os.lstat(path).st_ino == inode  # the first one's socket is still there
