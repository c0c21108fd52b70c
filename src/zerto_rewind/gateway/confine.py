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

When ``execvp`` fails, it says which path on the way the user could not pass
(:func:`blocked`): each directory, each symbolic link and its target, and for a
script its ``#!`` interpreter (a venv's ``python`` links into the home of whoever
built it, often ``/root``, which other users cannot search). ``--check`` walks
that way as the user without running anything: the gateway's start-up check.

Stdlib only and run with ``-I -S``: it starts in milliseconds and imports nothing
from a directory another user could write. Linux only (``prctl``).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pwd
import signal
import stat
import sys

__all__ = ["LAUNCHER_PREFIX", "blocked", "launcher_argv", "main"]

LAUNCHER_PREFIX = "zerto-rewind upstream launcher: "
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_MAX_LINKS = 40  # as the kernel's own limit on a path's symbolic links


def launcher_argv(
    command: list[str],
    *,
    uid: int | None,
    gid: int | None,
    cwd: str,
    parent: int,
    check: bool = False,
) -> list[str]:
    """The argv that runs ``command`` through this launcher with the gateway's Python.

    ``check``: only walk the way to ``command`` as the user (:func:`blocked`), run nothing.
    """
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--cwd", cwd]
    argv += ["--parent", str(parent)]
    if uid is not None and gid is not None:
        argv += ["--uid", str(uid), "--gid", str(gid)]
    if check:
        argv.append("--check")
    return [*argv, "--", *command]


def _walk(path: str, links: list[str] | None = None) -> str | None:
    """The first component of absolute ``path`` this process cannot pass; None: all pass.

    Each directory must be searchable; each symbolic link is followed (its target
    walked in turn, and named in ``links``); the last component must be an
    executable file.
    """
    links = [] if links is None else links
    current = "/"
    parts = [p for p in path.split("/") if p]
    for i, name in enumerate(parts):
        if not os.access(current, os.X_OK):
            return f"{current} is not searchable"
        step = os.path.join(current, name)
        try:
            mode = os.lstat(step).st_mode
        except OSError as exc:
            return f"{step}: {exc.strerror}"
        if stat.S_ISLNK(mode):
            if len(links) >= _MAX_LINKS:
                return f"{step}: too many levels of symbolic links"
            resolved = os.path.normpath(os.path.join(current, os.readlink(step), *parts[i + 1 :]))
            links.append(f"{step} -> {resolved}")
            return _walk(resolved, links)
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            return f"{step} is not a directory"
        current = step
    if stat.S_ISDIR(os.stat(current).st_mode):
        return f"{current} is a directory"
    if not os.access(current, os.X_OK):
        return f"{current} is not executable"
    return None


def _walked(path: str) -> str | None:
    """:func:`_walk`, naming the symbolic links it followed to the step that failed."""
    links: list[str] = []
    why = _walk(path, links)
    if why is None or not links:
        return why
    return f"{why}, on the way through {'; '.join(links)}"


def _find(program: str, search: str) -> tuple[str | None, str | None]:
    """``program`` as ``execvp`` finds it: (its path, None), or (None, why not)."""
    if "/" in program:
        return os.path.abspath(program), None
    first: str | None = None
    for directory in search.split(os.pathsep):
        candidate = os.path.join(os.path.abspath(directory or "."), program)
        if _walk(candidate) is None:
            return candidate, None
        why = _walked(candidate)
        if first is None and why is not None and ": No such file or directory" not in why:
            first = why  # there, but out of reach: say so rather than "not found"
    return None, first or f"{program} is in no directory of PATH ({search})"


def _interpreter(path: str) -> list[str]:
    """A script's ``#!`` line split in words; [] for a binary or an unreadable file."""
    try:
        with open(path, "rb") as fh:
            head = fh.readline(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].decode("utf-8", "replace").split()


def blocked(program: str, search: str | None = None, depth: int = 0) -> str | None:
    """Why this process could not run ``program``, naming the first path it cannot pass.

    ``program`` is looked up on ``search`` (``PATH``) as ``execvp`` would; then
    each directory and symbolic link on its way is walked, and for a script, its
    interpreter's way too (``#!/usr/bin/env NAME`` looks NAME up on ``search``).
    None when every step passes. Permission bits and ACLs count (``access(2)``
    with the real ids); a ``noexec`` mount or an LSM may still refuse.
    """
    search = os.defpath if search is None else search
    found, why = _find(program, search)
    if found is None:
        return why
    why = _walked(found)
    if why is not None or depth > 3:
        return why
    words = _interpreter(found)
    if not words:
        return None
    named = [w for w in words[1:] if not w.startswith("-")]
    if os.path.basename(words[0]) == "env" and named:  # #!/usr/bin/env NAME: NAME on PATH
        interpreter = named[0]
        inner = blocked(words[0], search, depth + 1) or blocked(interpreter, search, depth + 1)
    else:
        interpreter = words[0]
        inner = blocked(interpreter, search, depth + 1)
    return None if inner is None else f"the interpreter of {found}, {interpreter}: {inner}"


def _who() -> str:
    uid = os.getuid()
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


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
    sys.stderr.write(f"{LAUNCHER_PREFIX}{message}\n")
    sys.stderr.flush()
    return 126


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zerto-rewind upstream launcher")
    parser.add_argument("--uid", type=int)
    parser.add_argument("--gid", type=int)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--check", action="store_true")
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
    if args.check:
        why = blocked(command[0], os.environ.get("PATH"))
        return 0 if why is None else _fail(f"cannot run {command[0]} (as {_who()}: {why})")
    try:
        os.execvp(command[0], command)  # noqa: S606 - the configured server, as the SDK would
    except OSError as exc:
        why = blocked(command[0], os.environ.get("PATH"))
        detail = f" (as {_who()}: {why})" if why else ""
        return _fail(f"cannot run {command[0]}: {exc.strerror}{detail}")


if __name__ == "__main__":
    sys.exit(main())
