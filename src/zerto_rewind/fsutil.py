"""Small, crash-safe file primitives shared by every process of zerto-rewind.

Hooks are separate processes started in parallel by the host, so everything
they share on disk (token cache, pending tags, the decision log) goes through
these helpers: whole-file atomic replacement, advisory locks that the kernel
drops when a process dies (so a SIGKILL never leaves a stale lock), and reads
that treat a truncated or corrupted file as absent after setting it aside.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from .errors import StateError

__all__ = [
    "append_line",
    "atomic_write_json",
    "atomic_write_text",
    "backup_name",
    "ensure_private_dir",
    "file_lock",
    "read_if_present",
    "read_json",
]


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (mode 0700) if needed and return it; raise StateError if unusable."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create state directory {path}: {exc.strerror}; set ZERTO_REWIND_STATE_DIR"
        raise StateError(msg) from exc
    return path


def atomic_write_json(path: str, obj: Any, *, mode: int = 0o600) -> None:
    """Write ``obj`` as compact JSON to ``path`` atomically (see :func:`atomic_write_text`)."""
    atomic_write_text(path, json.dumps(obj, separators=(",", ":"), sort_keys=True), mode=mode)


def atomic_write_text(
    path: str, text: str, *, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> None:
    """Write ``text`` to ``path`` by write-to-temp + fsync + rename, with exactly ``mode``.

    Readers see the old file or the new one, never a half-written one. ``owner``
    (uid, gid) is given to the new file before it replaces the old one (only
    root may give it away; otherwise nothing is replaced and StateError says why).
    """
    tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    data = memoryview(text.encode())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            if owner is not None and owner != (os.geteuid(), os.getegid()):
                os.fchown(fd, *owner)
            os.fchmod(fd, mode)  # the umask may have narrowed it (after fchown: it may clear bits)
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        msg = f"cannot write {path}: {exc.strerror}; check the permissions of its directory"
        raise StateError(msg) from exc


def backup_name(path: str) -> str:
    """An unused ``<path>.bak-<UTC time>`` (``-2``, ``-3``… appended if that name is taken)."""
    stamped = f"{path}.bak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    candidate, n = stamped, 1
    while os.path.exists(candidate):
        candidate, n = f"{stamped}-{n}", n + 1
    return candidate


def read_if_present(
    path: str, what: str = "", fix: str = "check the state directory's permissions"
) -> bytes | None:
    """The bytes of ``path``, or None if it is missing; StateError if it cannot be read,
    naming the file (``what`` it is) and how to ``fix`` that."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"cannot read {what}{' ' if what else ''}{path}: {exc.strerror}; {fix}"
        raise StateError(msg) from exc


def read_json(path: str) -> Any | None:
    """Return the JSON in ``path``, or ``None`` if it is missing.

    A file that is not valid JSON is renamed to ``<path>.corrupt-<time>`` so the
    caller can rebuild it; the bad copy is kept for inspection.
    """
    data = read_if_present(path)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        with contextlib.suppress(OSError):
            os.replace(path, f"{path}.corrupt-{int(time.time())}")
        return None


@contextlib.contextmanager
def file_lock(path: str, *, timeout_s: float | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the ``with`` block.

    The kernel releases it when the process exits, however it exits. With
    ``timeout_s`` it raises StateError instead of waiting forever.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        msg = f"cannot open lock file {path}: {exc.strerror}"
        raise StateError(msg) from exc
    try:
        _acquire(fd, path, timeout_s)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, path: str, timeout_s: float | None) -> None:
    if timeout_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    give_up = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= give_up:
                msg = f"timed out after {timeout_s:.1f}s waiting for lock {path}"
                raise StateError(msg) from None
            time.sleep(0.01)
        else:
            return


def append_line(path: str, line: str, *, mode: int = 0o600) -> None:
    """Append one line to ``path`` with a single ``write`` on an O_APPEND descriptor.

    One write per line keeps concurrent writers from interleaving; the lock
    makes that hold beyond the kernel's atomic-append guarantees too.
    """
    data = (line.rstrip("\n") + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    except OSError as exc:
        msg = f"cannot open log {path}: {exc.strerror}; set ZERTO_HOOK_LOG to a writable file"
        raise StateError(msg) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, data)
    finally:
        os.close(fd)
