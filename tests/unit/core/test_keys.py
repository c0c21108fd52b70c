"""Key files only the guard's user may read: made private and atomically, refused when loose."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from zerto_rewind.core.keys import load_or_create_key, read_key_file
from zerto_rewind.errors import KeyFileError, StateError


def test_a_missing_key_is_made_private_and_then_read_back(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "state-mac.key"
    key = load_or_create_key(str(path))
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create_key(str(path)) == key
    assert [p.name for p in path.parent.iterdir()] == ["state-mac.key"]  # no temporary left


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o602])
def test_a_key_file_others_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "state-mac.key"
    path.write_bytes(os.urandom(32))
    path.chmod(mode)
    with pytest.raises(KeyFileError, match=f"mode {mode:04o}") as info:
        load_or_create_key(str(path))
    assert isinstance(info.value, StateError)  # so every caller's fail-closed path applies
    assert path.read_bytes() != b""  # refused, never repaired or replaced


def test_a_read_only_key_file_of_its_owner_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "state-mac.key"
    path.write_bytes(b"x" * 32)
    path.chmod(0o400)
    assert read_key_file(str(path)) == b"x" * 32


def test_a_short_key_a_symlink_and_a_directory_are_refused(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_bytes(b"x" * 8)
    short.chmod(0o600)
    with pytest.raises(KeyFileError, match="fewer than 32"):
        read_key_file(str(short))
    target = tmp_path / "real.key"
    target.write_bytes(b"x" * 32)
    target.chmod(0o600)
    link = tmp_path / "link.key"
    link.symlink_to(target)
    with pytest.raises(KeyFileError, match="cannot read"):
        load_or_create_key(str(link))
    folder = tmp_path / "folder.key"
    folder.mkdir(mode=0o700)
    with pytest.raises(KeyFileError):
        load_or_create_key(str(folder))


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    path = str(tmp_path / "keys" / "state-mac.key")
    start = threading.Barrier(8)
    keys: list[bytes] = []

    def make() -> None:
        start.wait()
        keys.append(load_or_create_key(path))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8
    assert len(set(keys)) == 1
