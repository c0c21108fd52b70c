"""Start one stdio upstream confined: its own user, a private directory, tied to the gateway.

The gateway spawns the VM MCP server with the SDK's stdio client; the command it
gives is this file, run as a script (``python -I -S confine.py --uid … -- argv``),
which then becomes the server with ``execvp``. In between, in this order:

1. no supplementary groups, then the group, then the user (``setres*id``: real,
   effective and saved, so no way back);
2. ``PR_SET_NO_NEW_PRIVS``: a setuid binary the server runs gains nothing;
3. ``PR_SET_PDEATHSIG`` = SIGKILL: the server dies with the gateway, SIGKILL of
   the gateway included. It comes after the credential change because the kernel
   clears it on one, and ``execve`` keeps it;
4. the parent is still the gateway (``--parent``); if the gateway died before
   step 3, no signal would ever come, so this process leaves instead;
5. a process group of its own (the SDK starts a new session, so it already leads
   one; a caller that did not gets one here), which the gateway kills on close;
6. ``chdir`` to the private directory and ``umask 077``.

Stdlib only and run with ``-I -S``: it starts in milliseconds and imports nothing
from a directory another user could write. Linux only (``prctl``).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys

__all__ = ["launcher_argv", "main"]

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


def launcher_argv(
    command: list[str], *, uid: int | None, gid: int | None, cwd: str, parent: int
) -> list[str]:
    """The argv that runs ``command`` through this launcher with the gateway's Python."""
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--cwd", cwd]
    argv += ["--parent", str(parent)]
    if uid is not None and gid is not None:
        argv += ["--uid", str(uid), "--gid", str(gid)]
    return [*argv, "--", *command]


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _drop(uid: int, gid: int) -> None:
    if (os.getuid(), os.getgid()) != (uid, gid) or os.getgroups():
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        msg = "the credentials did not change"
        raise OSError(msg)
    if uid != 0:
        try:
            os.setuid(0)
        except PermissionError:
            pass
        else:
            msg = "root could be regained after dropping to the upstream's user"
            raise OSError(msg)


def _fail(message: str) -> int:
    sys.stderr.write(f"zerto-rewind upstream launcher: {message}\n")
    return 126


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zerto-rewind upstream launcher")
    parser.add_argument("--uid", type=int)
    parser.add_argument("--gid", type=int)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        return _fail("no command to run")
    try:
        if args.uid is not None and args.gid is not None:
            _drop(args.uid, args.gid)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError as exc:
        return _fail(f"could not confine the upstream ({exc}); it was not started")
    if os.getppid() != args.parent:
        return _fail("the gateway ended before the upstream started; it was not started")
    if os.getpgrp() != os.getpid():
        try:
            os.setpgid(0, 0)
        except OSError as exc:
            return _fail(f"no process group of its own ({exc}); it was not started")
    try:
        os.chdir(args.cwd)
    except OSError as exc:
        return _fail(f"cannot enter the working directory {args.cwd}: {exc.strerror}")
    os.umask(0o077)
    try:
        os.execvp(command[0], command)  # noqa: S606 - the configured server, as the SDK would
    except OSError as exc:
        return _fail(f"cannot run {command[0]}: {exc.strerror}")


if __name__ == "__main__":
    sys.exit(main())
