"""The shared state directory and its crash-safe file primitives (state.py, fsutil.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.core.state import GuardState, TagRecord, VpgRecord
from zerto_rewind.errors import StateError
from zerto_rewind.fsutil import append_line, atomic_write_json, file_lock, read_json


def mode_of(path: Path | str) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(os.stat(path).st_mode)


# -------------------------------------------------------------------- GuardState.vpg


def test_state_dirs_are_private(tmp_path: Path) -> None:
    """The state directory and its subdirectories are created 0700."""
    state = GuardState(str(tmp_path / "state"))
    for sub in ("", "vpgs", "locks", "cache"):
        assert mode_of(os.path.join(state.root, sub)) == 0o700


def test_vpg_record_round_trip(tmp_path: Path) -> None:
    """What a locked block changes is saved and read back by a new GuardState."""
    state = GuardState(str(tmp_path))
    tag = TagRecord(name="zr t web01", requested_at=1.0, expected_at=6.0, overdue_at=66.0)
    with state.vpg("vpg-1") as record:
        assert record == VpgRecord("vpg-1")
        record.vpg_name = "VPG One"
        record.tag = tag
        record.cadence_s, record.cadence_source = 5.0, "observed"
        record.history.append({"name": "old"})
    again = GuardState(str(tmp_path))
    with again.vpg("vpg-1") as record:
        assert record.vpg_name == "VPG One"
        assert record.tag == tag
        assert (record.cadence_s, record.cadence_source) == (5.0, "observed")
        assert record.history == [{"name": "old"}]
    assert again.peek_vpg("vpg-1").tag == tag
    assert again.peek_vpg("vpg-1").vpg_name == "VPG One"


def test_record_file_is_private_json(tmp_path: Path) -> None:
    """A saved record is valid JSON in a 0600 file."""
    state = GuardState(str(tmp_path))
    with state.vpg("vpg-1") as record:
        record.allowed_since_landing = 2
    path = tmp_path / "vpgs" / "vpg-1.json"
    assert mode_of(path) == 0o600
    assert json.loads(path.read_text())["allowed_since_landing"] == 2


def test_unchanged_record_not_written(tmp_path: Path) -> None:
    """A block that changes nothing writes nothing."""
    state = GuardState(str(tmp_path))
    with state.vpg("vpg-1"):
        pass
    assert os.listdir(tmp_path / "vpgs") == []


def test_unsafe_vpg_ids_get_distinct_files(tmp_path: Path) -> None:
    """Ids with path characters are hashed into the state dir, never used as paths."""
    state = GuardState(str(tmp_path))
    ids = ("../../etc/passwd", "a/b", "ab", ".hidden", "x" * 300)
    for vpg_id in ids:
        with state.vpg(vpg_id) as record:
            record.vpg_name = vpg_id
    names = os.listdir(tmp_path / "vpgs")
    assert len(names) == 5
    assert all("/" not in n and not n.startswith(".") for n in names)
    assert [state.peek_vpg(vpg_id).vpg_name for vpg_id in ids] == list(ids)
    assert not (tmp_path.parent / "etc").exists()


@pytest.mark.parametrize("garbage", [b"{not json", b"", b'{"vpg_id": "vpg-1", "tag": {', b"\xff"])
def test_corrupted_record_set_aside_and_rebuilt(tmp_path: Path, garbage: bytes) -> None:
    """A damaged record is renamed *.corrupt-<time>, a fresh one starts, and is saved."""
    state = GuardState(str(tmp_path))
    path = tmp_path / "vpgs" / "vpg-1.json"
    path.write_bytes(garbage)
    with state.vpg("vpg-1") as record:
        assert record == VpgRecord("vpg-1")
        record.vpg_name = "rebuilt"
    aside = [p for p in os.listdir(tmp_path / "vpgs") if ".corrupt-" in p]
    assert len(aside) == 1
    assert (tmp_path / "vpgs" / aside[0]).read_bytes() == garbage
    assert json.loads(path.read_text())["vpg_name"] == "rebuilt"


@pytest.mark.parametrize(
    "raw",
    [
        [1, 2],
        "text",
        {"vpg_id": "vpg-1", "tag": {"name": "t"}},  # tag missing required fields
        {"vpg_id": "vpg-1", "tag": {"bogus": 1}},
        {"vpg_name": "no id"},
    ],
)
def test_incompatible_record_starts_over(tmp_path: Path, raw: Any) -> None:
    """Valid JSON of the wrong shape gives a fresh record rather than an exception."""
    state = GuardState(str(tmp_path))
    (tmp_path / "vpgs" / "vpg-1.json").write_text(json.dumps(raw))
    with state.vpg("vpg-1") as record:
        assert record == VpgRecord("vpg-1")


def test_unknown_fields_ignored(tmp_path: Path) -> None:
    """Fields a newer version added are ignored; known ones are kept."""
    state = GuardState(str(tmp_path))
    raw = {"vpg_id": "vpg-1", "vpg_name": "A", "future_field": 1}
    sealed = state.mac.seal("vpg", "vpg-1", raw)  # written by a newer guard, with the key
    (tmp_path / "vpgs" / "vpg-1.json").write_text(json.dumps(sealed))
    assert state.peek_vpg("vpg-1").vpg_name == "A"


def test_vpg_lock_serialises_threads(tmp_path: Path) -> None:
    """Concurrent read-modify-write blocks on one VPG lose no update."""
    state = GuardState(str(tmp_path))

    def bump() -> None:
        for _ in range(20):
            with state.vpg("vpg-1") as record:
                record.allowed_since_landing += 1

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state.peek_vpg("vpg-1").allowed_since_landing == 80


# ------------------------------------------------------------------------- caches


def test_cache_round_trip_and_ttl(tmp_path: Path) -> None:
    """A stored value is returned while younger than the TTL, and not after."""
    state = GuardState(str(tmp_path))
    state.store("vms", "web01", [["vm-1", "vpg-1", "VPG One"]])
    assert state.cached("vms", "web01", ttl_s=60) == [["vm-1", "vpg-1", "VPG One"]]
    assert state.cached("vms", "web01", ttl_s=-1) is None
    (cache_file,) = (tmp_path / "cache").iterdir()
    assert mode_of(cache_file) == 0o600
    payload = json.loads(cache_file.read_text())
    payload["stored_at"] = time.time() - 120
    cache_file.write_text(json.dumps(state.mac.seal("cache:vms", "web01", payload)))
    assert state.cached("vms", "web01", ttl_s=60) is None
    assert state.cached("vms", "web01", ttl_s=300) == [["vm-1", "vpg-1", "VPG One"]]


def test_cache_keys_and_kinds_are_separate(tmp_path: Path) -> None:
    """Different keys or kinds never see each other's values; a miss is None."""
    state = GuardState(str(tmp_path))
    state.store("vms", "a", 1)
    state.store("entitytypes", "a", 2)
    assert state.cached("vms", "a", 60) == 1
    assert state.cached("entitytypes", "a", 60) == 2
    assert state.cached("vms", "b", 60) is None


@pytest.mark.parametrize(
    "payload",
    [
        {"key": "other", "stored_at": 1e18, "value": 1},
        {"key": "a", "stored_at": "now", "value": 1},
        {"key": "a", "value": 1},
        [1],
    ],
)
def test_cache_entry_of_wrong_shape_is_a_miss(tmp_path: Path, payload: Any) -> None:
    """A cache file for another key, or without a usable timestamp, is a miss."""
    state = GuardState(str(tmp_path))
    state.store("vms", "a", 1)
    (cache_file,) = (tmp_path / "cache").iterdir()
    cache_file.write_text(json.dumps(payload))
    assert state.cached("vms", "a", 60) is None


def test_corrupted_cache_is_a_miss(tmp_path: Path) -> None:
    """A truncated cache file is a miss and is set aside."""
    state = GuardState(str(tmp_path))
    state.store("vms", "a", 1)
    (cache_file,) = (tmp_path / "cache").iterdir()
    cache_file.write_text('{"key": "a", "sto')
    assert state.cached("vms", "a", 60) is None
    assert any(".corrupt-" in p.name for p in (tmp_path / "cache").iterdir())


def test_unusable_state_dir_is_state_error(tmp_path: Path) -> None:
    """A state dir that cannot be created is a StateError naming it and the variable."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StateError, match="ZERTO_REWIND_STATE_DIR") as info:
        GuardState(str(blocker / "state"))
    assert str(blocker / "state") in str(info.value)


# ---------------------------------------------------------------- atomic_write_json


def test_atomic_write_json_mode_0600(tmp_path: Path) -> None:
    """The file is written 0600 and holds the JSON, with no temp file left behind."""
    path = tmp_path / "token.json"
    atomic_write_json(str(path), {"b": 1, "a": [1, "é"]})
    assert mode_of(path) == 0o600
    assert json.loads(path.read_text()) == {"b": 1, "a": [1, "é"]}
    assert os.listdir(tmp_path) == ["token.json"]


def test_atomic_write_replaces_loose_file_with_private_one(tmp_path: Path) -> None:
    """Overwriting a 0644 file leaves a 0600 file (a new inode, not a chmod race)."""
    path = tmp_path / "token.json"
    path.write_text("{}")
    path.chmod(0o644)
    atomic_write_json(str(path), {"v": 2})
    assert mode_of(path) == 0o600
    assert read_json(str(path)) == {"v": 2}


def test_atomic_write_failure_is_state_error_and_cleans_up(tmp_path: Path) -> None:
    """Writing into a missing directory raises StateError and leaves no temp file."""
    with pytest.raises(StateError, match="cannot write"):
        atomic_write_json(str(tmp_path / "missing" / "x.json"), {})
    assert os.listdir(tmp_path) == []


def test_unserialisable_value_is_not_written(tmp_path: Path) -> None:
    """A value JSON cannot encode raises before any file is created."""
    with pytest.raises(TypeError):
        atomic_write_json(str(tmp_path / "x.json"), {"a": object()})
    assert os.listdir(tmp_path) == []


def test_read_json_missing_is_none(tmp_path: Path) -> None:
    """A missing file reads as None, without side effects."""
    assert read_json(str(tmp_path / "nope.json")) is None
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------- append_line


def test_append_line_one_write_per_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line, newline included, goes to the file in exactly one write()."""
    path = tmp_path / "log"
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        if b"zr-line" in data:
            writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)  # the module fsutil calls it through
    long_line = "zr-line " + "x" * 100_000
    append_line(str(path), long_line)
    append_line(str(path), "zr-line two\n")
    monkeypatch.undo()
    assert writes == [(long_line + "\n").encode(), b"zr-line two\n"]
    assert path.read_text().splitlines() == [long_line, "zr-line two"]
    assert mode_of(path) == 0o600


def test_append_line_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    """Several processes appending long lines at once leave every line whole."""
    path = tmp_path / "log"
    code = textwrap.dedent(
        """
        import sys
        from zerto_rewind.fsutil import append_line
        who = sys.argv[2]
        for i in range(100):
            append_line(sys.argv[1], f"{who}:{i}:" + who * 20_000)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), who]) for who in "abcd"]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 400
    for line in lines:
        who, index, body = line.split(":")
        assert body == who * 20_000
        assert 0 <= int(index) < 100


def test_append_line_unwritable_is_state_error(tmp_path: Path) -> None:
    """A log that cannot be opened is a StateError that points at ZERTO_HOOK_LOG."""
    with pytest.raises(StateError, match="ZERTO_HOOK_LOG"):
        append_line(str(tmp_path / "missing" / "log"), "x")


# ------------------------------------------------------------------------- file_lock

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from zerto_rewind.fsutil import file_lock
    with file_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
    """
)


@contextlib.contextmanager
def lock_holder(lock: str) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that holds ``lock`` until killed; yields once it has it."""
    with subprocess.Popen([sys.executable, "-c", _HOLDER, lock], stdout=subprocess.PIPE) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == b"locked\n"
            yield child
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=10)


def test_lock_timeout_while_held_elsewhere(tmp_path: Path) -> None:
    """While another process holds the lock, a timed acquire raises StateError naming it."""
    lock = str(tmp_path / "vpg.lock")
    with lock_holder(lock):
        started = time.monotonic()
        with (
            pytest.raises(StateError, match=r"timed out.*vpg\.lock"),
            file_lock(lock, timeout_s=0.2),
        ):
            pass
        assert 0.2 <= time.monotonic() - started < 2.0


def test_lock_released_when_holder_is_killed(tmp_path: Path) -> None:
    """A holder killed by SIGKILL leaves no stale lock: the parent acquires it at once."""
    lock = str(tmp_path / "vpg.lock")
    with lock_holder(lock) as child:
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        started = time.monotonic()
        with file_lock(lock, timeout_s=5.0):
            acquired_after = time.monotonic() - started
        assert acquired_after < 0.5


def test_lock_reacquired_after_release(tmp_path: Path) -> None:
    """A released lock can be taken again in the same process, and the file is 0600."""
    lock = str(tmp_path / "x.lock")
    with file_lock(lock, timeout_s=1.0):
        pass
    with file_lock(lock, timeout_s=0.1):
        pass
    assert mode_of(lock) == 0o600


def test_lock_excludes_other_descriptor_in_same_process(tmp_path: Path) -> None:
    """flock locks are per open file: a second acquire in the same process waits too."""
    lock = str(tmp_path / "x.lock")
    with file_lock(lock), pytest.raises(StateError), file_lock(lock, timeout_s=0.05):
        pass


def test_unopenable_lock_is_state_error(tmp_path: Path) -> None:
    """A lock path that cannot be opened raises StateError."""
    with (
        pytest.raises(StateError, match="cannot open lock"),
        file_lock(str(tmp_path / "missing" / "x.lock")),
    ):
        pass
