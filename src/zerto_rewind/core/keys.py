"""Secret key files that only the guard's user may read.

A key that gates a decision (the MAC key of the shared state, a signing key)
is worth only as much as its file's permissions: if an agent's user can read
it, the agent can sign what it forges. So a key file must belong to the user
that reads it and be readable by nobody else (mode 0600 or 0400); anything
looser is refused, never repaired, because by then its bytes may be known.

A missing key is created on first use, atomically: written in full to a
private temporary file, then linked into place, so two processes starting
together agree on one key and none ever reads a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

from ..errors import KeyFileError
from ..fsutil import ensure_private_dir

__all__ = ["load_or_create_key", "read_key_file"]

# Bits a key file must not have: any access by group or others.
_LOOSE = stat.S_IRWXG | stat.S_IRWXO


def read_key_file(path: str) -> bytes:
    """The bytes of the key file at ``path``; KeyFileError unless it is ours and private."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        msg = f"cannot read the key file {path}: {exc.strerror}"
        raise KeyFileError(msg) from exc
    try:
        info = os.fstat(fd)
        _check_private(path, info)
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    if len(data) < 32:
        msg = (
            f"the key file {path} holds {len(data)} bytes, fewer than 32; "
            "the guard's operator should remove it so that a new one is made"
        )
        raise KeyFileError(msg)
    return data


def load_or_create_key(path: str, *, size: int = 32) -> bytes:
    """The key at ``path``, made (``size`` random bytes, mode 0600) if it does not exist."""
    try:
        return read_key_file(path)
    except FileNotFoundError:
        pass
    directory = ensure_private_dir(os.path.dirname(path))
    temp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(size))
            fh.flush()
            os.fsync(fh.fileno())
        # link, not rename: a key another process linked first is kept, never replaced.
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    except OSError as exc:
        msg = f"cannot create the key file {path}: {exc.strerror}"
        raise KeyFileError(msg) from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    return read_key_file(path)


def _check_private(path: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        msg = f"the key file {path} is not a regular file"
        raise KeyFileError(msg)
    if info.st_uid != os.geteuid():
        msg = (
            f"the key file {path} belongs to uid {info.st_uid}, not to this process's user "
            f"(uid {os.geteuid()}), so it is not used; only the guard's user may hold it"
        )
        raise KeyFileError(msg)
    if info.st_mode & _LOOSE:
        msg = (
            f"the key file {path} has mode {stat.S_IMODE(info.st_mode):04o}, so others may have "
            "read it and it is not used; the guard's operator should remove it (a new key is "
            "made, and records signed with the old one are ignored)"
        )
        raise KeyFileError(msg)
