"""stdin and stdout as event-loop pipes, for the SDK's ``stdio_server``.

The SDK's default stdio streams are ``anyio.wrap_file`` objects: every line read
and every write and flush is a hop to a worker thread and back, three per
call. On a busy machine those hops were most of the gateway's own cost over
stdio (see docs/performance.md, section 7). When stdin and stdout are pipes or
sockets (as when an MCP host starts the gateway), they are served here by the
event loop instead; anything else (a terminal, a file) keeps the SDK's streams.

The SDK's framing, parsing and validation are unchanged: these objects only
replace the file under ``stdio_server(stdin=..., stdout=...)``. As the SDK does
for its own streams, fd 0 and fd 1 are diverted while serving (fd 0 reads
``/dev/null``, fd 1 writes to stderr), so stray output never reaches the wire,
and restored on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["event_loop_stdio"]


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _LineReader:
    """``async for line in ...`` over a pipe, lines of any length (as a text file)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._reader.readuntil(b"\n"))
                break
            except asyncio.LimitOverrunError as exc:  # a long line: take what is buffered
                chunks.append(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:  # EOF
                chunks.append(exc.partial)
                break
        line = b"".join(chunks)
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Writer:
    """``write`` buffers in the pipe transport; ``flush`` waits until the pipe took it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def event_loop_stdio() -> AsyncIterator[tuple[Any, Any] | None]:
    """``(stdin, stdout)`` for ``stdio_server``, or None when they are not pipes or sockets."""
    if not (_is_pipe_or_socket(0) and _is_pipe_or_socket(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    # Private duplicates carry the wire; fd 0 and fd 1 are diverted meanwhile.
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    read_transport: asyncio.BaseTransport | None = None
    writer: asyncio.StreamWriter | None = None
    try:
        reader = asyncio.StreamReader(limit=1 << 20)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(wire_in, "rb", buffering=0, closefd=False),
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin,
            os.fdopen(wire_out, "wb", buffering=0, closefd=False),
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _LineReader(reader), _Writer(writer)
    finally:
        if writer is not None:
            with contextlib.suppress(Exception), anyio.move_on_after(5.0):
                await writer.drain()  # what was written reaches the host before we leave
            writer.transport.abort()
        if read_transport is not None:
            read_transport.close()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
