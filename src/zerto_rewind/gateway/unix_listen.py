"""The gateway's unix sockets (``--socket``, ``--approvals-socket``): where, and with what mode.

Two rules, both about a socket path someone else might control:

* **The directory.** Whoever can change the directory holding the socket, or any
  directory above it, can replace the socket with their own (and answer allow, or
  approve), or swap it for a symlink while it is made. So the gateway refuses a
  directory that any user but root and its own can change, as ``install --service``
  does, with the same judgement (:func:`..fsaccess.directory_writer`).
* **The mode.** The socket is born with its final mode: the umask is set around
  ``bind`` so that the kernel creates the file with ``mode`` and nothing else. There
  is no ``chmod`` by path afterwards, which would follow a symlink swapped in after
  ``bind`` and change the mode of whatever file it leads to; nor a ``chown``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

from ..errors import UsageError
from ..fsaccess import directory_writer, user_label, users_except

__all__ = ["bind_unix", "check_socket_directory"]


def check_socket_directory(path: str, option: str) -> None:
    """UsageError when any user but root and this process's own may change where ``path`` is."""
    service_uid = os.geteuid()
    found = directory_writer(path, users_except({0, service_uid}))
    if found is None:
        return
    user, access = found
    directory = os.path.dirname(os.path.abspath(path))
    owners = (
        "root" if service_uid == 0 else f"root and the gateway's user {user_label(service_uid)}"
    )
    msg = (
        f"{option} {path}: the directory {directory} can be changed by {user.name} "
        f"({access.why}), and only {owners} should: whoever can write there can put their "
        "own socket in the gateway's place, or swap it while it is made; serve the socket "
        "from a directory that only root or the gateway's user can write, every directory "
        "above it too (e.g. /run/zerto-rewind, mode 0755, owned by the gateway's user)"
    )
    raise UsageError(msg)


def bind_unix(path: str, mode: int, option: str) -> socket.socket:
    """A unix stream socket bound at ``path``, its file made with ``mode``; not yet listening.

    A stale socket file is replaced (never any other kind of file, nor a socket that
    something still listens on). UsageError when the directory is not the gateway's
    (:func:`check_socket_directory`), the socket is in use, or the bind fails.
    """
    check_socket_directory(path, option)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            _refuse_if_listening(path, option)
            os.unlink(path)  # unlink does not follow a symlink: only that name goes
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The kernel makes the file with 0777 & ~umask: with this umask, exactly ``mode``.
    # The umask is the whole process's for this one bind() call, so the gateway binds
    # before any thread of its own runs (gateway.run); it is put back even if bind fails.
    old = os.umask(0o777 & ~mode)
    try:
        listener.bind(path)
    except OSError as exc:
        listener.close()
        why = exc.strerror or str(exc)
        msg = f"{option} {path}: cannot listen there ({why}); check {option} and its directory"
        raise UsageError(msg) from None
    finally:
        os.umask(old)
    return listener


def _refuse_if_listening(path: str, option: str) -> None:
    """UsageError when a process accepts connections at ``path``: unlinking its socket
    would take its callers over silently (a second gateway on one ``--socket``)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return  # refused (no listener: a stale file) or unreachable: replace it
    finally:
        probe.close()
    msg = (
        f"{option} {path}: already in use (a process listens there); stop it "
        f"(`ss -lxp` shows it) or give {option} another path"
    )
    raise UsageError(msg)
