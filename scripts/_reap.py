"""Run a command; fail when a process it started is still alive after it ended.

Usage: python scripts/_reap.py COMMAND [ARGS...]

This process becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): whatever the
command starts and leaves behind is re-parented here instead of to init. When the
command has ended, every process still below this one is a leak: each is named
(pid and program only; arguments may hold secrets), killed, and the exit code is
1 unless the command itself already failed. Stdlib only; Linux only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36
_GRACE_S = 2.0  # a process on its way out (a fixture's last kill) may take a moment


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[1]), fields[0]


def _program(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0", 1)[0]
    except OSError:
        return "?"
    return os.path.basename(argv0.decode(errors="replace")) or "?"


def descendants(root: int) -> list[int]:
    """Every live (not zombie) process below ``root``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None and found[1] not in ("Z", "X"):
                parents[int(entry)] = found[0]
    below: list[int] = []
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        below.extend(sorted(frontier))
    return below


def _reap_zombies() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: _reap.py COMMAND [ARGS...]\n")
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write("_reap.py: cannot become a child subreaper; leaks go unseen\n")
        return 2
    child = subprocess.Popen(argv)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    code = child.wait()
    deadline = time.monotonic() + _GRACE_S
    left = descendants(os.getpid())
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        _reap_zombies()
        left = descendants(os.getpid())
    if not left:
        return code
    names = ", ".join(f"{pid} {_program(pid)}" for pid in left)
    sys.stderr.write(
        f"scripts/test: {len(left)} process(es) started by the tests outlived them: {names}; "
        "killed now. Find the test that leaves them behind.\n"
    )
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    _reap_zombies()
    return code or 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
