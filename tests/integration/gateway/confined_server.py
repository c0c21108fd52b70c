"""A stdio MCP server that tells who it is and tries the guard's files: a confinement probe.

Tools (read-only in the tests' catalog):

- ``get_identity``: uid, gid, supplementary groups, cwd (and its owner and mode),
  ``HOME``, ``TMPDIR``, the names of its environment variables, its pid, parent pid,
  process group and parent-death signal;
- ``get_file(path)``: reads ``path``; ``OK <n bytes>`` or the error's name;
- ``get_written(path)``: appends a line to ``path``; ``OK`` or the error's name;
- ``get_stuck``: writes its pid to ``$CONFINED_STUCK`` and never answers (it
  does not read stdin meanwhile, so only a signal ends it).
"""

from __future__ import annotations

import ctypes
import json
import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("confined")
_PR_GET_PDEATHSIG = 2


def _pdeathsig() -> int:
    value = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(_PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)
    return value.value


# Read here, in the main thread: the setting is per thread (a new thread's is 0), and
# the kernel signals the thread that holds it; tools may run in worker threads.
_PDEATHSIG = _pdeathsig()


@server.tool()
def get_identity() -> str:
    """Who and where this server is."""
    cwd = os.getcwd()
    st = os.stat(cwd)
    return json.dumps(
        {
            "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
            "egid": os.getegid(), "groups": os.getgroups(), "cwd": cwd,
            "cwd_uid": st.st_uid, "cwd_mode": st.st_mode & 0o777,
            "home": os.environ.get("HOME"), "tmpdir": os.environ.get("TMPDIR"),
            "user": os.environ.get("USER"), "logname": os.environ.get("LOGNAME"),
            "env": sorted(os.environ), "pid": os.getpid(), "ppid": os.getppid(),
            "pgid": os.getpgrp(), "pdeathsig": _PDEATHSIG,
        }
    )  # fmt: skip


@server.tool()
def get_file(path: str) -> str:
    """Read a local file."""
    try:
        with open(path, "rb") as fh:
            return f"OK {len(fh.read())}"
    except OSError as exc:
        return type(exc).__name__


@server.tool()
def get_written(path: str) -> str:
    """Append a line to a local file."""
    try:
        with open(path, "a") as fh:
            fh.write("written by the upstream\n")
    except OSError as exc:
        return type(exc).__name__
    return "OK"


@server.tool()
async def get_stuck() -> str:
    """Never answer; a blocking sleep in the event loop, so not even stdin's end is seen."""
    with open(os.environ["CONFINED_STUCK"], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(3600)  # blocking on purpose
    return "late"


if __name__ == "__main__":
    server.run("stdio")
