"""A stdio upstream's transport: the SDK's ``stdio_client``, with a tap for the read-only fast lane.

Everything the SDK's client sends and receives goes as in ``mcp.client.stdio``:
the same process start (its own session, the SDK's environment), the same
framing and parsing, the same shutdown (stdin closed, a grace period, then the
process tree killed). The one addition is :class:`LaneTap`: the fast lane writes
one re-serialized ``tools/call`` to the server's stdin, under an id of its own
(``zr-lane-N``, never an id the SDK's dispatcher mints, which are integers), and
the server's answer to that id is handed back to the fast lane as parsed JSON
instead of to the SDK's session. Every other line (the SDK's answers, the
server's requests and notifications, and a line that merely quotes such an
id) reaches the SDK's session exactly as before.

Why not the SDK client's own request path: on a busy machine its dispatcher,
models and the memory-stream hops between its tasks were about 0.4 ms of CPU
per call, most of what the fast lane is there to save.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.lowlevel
from anyio.streams.text import TextReceiveStream
from mcp.client import stdio as sdk_stdio
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from anyio.abc import ByteSendStream
    from mcp.client._transport import TransportStreams
    from mcp.client.stdio import StdioServerParameters

__all__ = ["LaneClosedError", "LaneTap", "tapped_stdio_client"]

_ID_PREFIX = "zr-lane-"
_MARK = f'"{_ID_PREFIX}'


class LaneClosedError(ConnectionError):
    """The server's pipes closed (or were never open) while a fast-lane call waited."""


class LaneTap:
    """The fast lane's own requests on a stdio server's pipes, correlated by id."""

    def __init__(self) -> None:
        self._stdin: ByteSendStream | None = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0

    @property
    def open(self) -> bool:
        return self._stdin is not None

    async def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``message`` (a JSON-RPC request without an id) and return the server's answer
        (the whole response object); TimeoutError past ``timeout_s``."""
        stdin = self._stdin
        if stdin is None:
            msg = "the server's pipes are closed"
            raise LaneClosedError(msg)
        self._next += 1
        request_id = f"{_ID_PREFIX}{self._next}"
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, **message}, separators=(",", ":"))
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any]] = loop.create_future()
        # A timer on the future, not a cancel scope: the same bound for less work per call.
        expiry = loop.call_later(timeout_s, _expire, answer)
        self._pending[request_id] = answer
        try:
            await stdin.send(line.encode() + b"\n")
            return await answer
        finally:
            expiry.cancel()
            self._pending.pop(request_id, None)

    def claim(self, line: str) -> bool:
        """Take ``line`` if it answers a fast-lane request still waiting; else leave it."""
        if _MARK not in line:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        request_id = message.get("id") if isinstance(message, dict) else None
        answer = self._pending.get(request_id) if isinstance(request_id, str) else None
        if answer is None or answer.done():
            return False
        answer.set_result(message)
        return True

    def attach(self, stdin: ByteSendStream) -> None:
        self._stdin = stdin

    def detach(self) -> None:
        """The pipes are closing: no new request, and every waiting one fails."""
        self._stdin = None
        pending, self._pending = self._pending, {}
        for answer in pending.values():
            if not answer.done():
                answer.set_exception(LaneClosedError("the server's pipes closed"))


def _expire(answer: asyncio.Future[dict[str, Any]]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())


@asynccontextmanager
async def tapped_stdio_client(
    server: StdioServerParameters, errlog: TextIO, tap: LaneTap
) -> AsyncGenerator[TransportStreams, None]:
    """``mcp.client.stdio.stdio_client``, with ``tap`` on the server's pipes."""
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    pipes = _Pipes(server, process, tap)
    assert process.stdin is not None
    tap.attach(process.stdin)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pipes.stdout_reader)
        tg.start_soon(pipes.stdin_writer)
        try:
            yield pipes.read_stream, pipes.write_stream
        finally:
            pipes.shutting_down = True
            with anyio.CancelScope(shield=True):
                await pipes.shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


class _Pipes:
    """The two pipe tasks and the shutdown of ``stdio_client``, as the SDK writes them."""

    def __init__(self, server: StdioServerParameters, process: Any, tap: LaneTap) -> None:
        self.server = server
        self.process = process
        self.tap = tap
        self.read_writer, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.write_stream, self.write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self.shutting_down = False
        self.writer_done = anyio.Event()

    async def stdout_reader(self) -> None:
        process, server = self.process, self.server
        assert process.stdout, "Opened process is missing stdout"
        stdout = TextReceiveStream(
            process.stdout, encoding=server.encoding, errors=server.encoding_error_handler
        )
        try:
            async with self.read_writer:
                try:
                    buffer = ""
                    async for chunk in stdout:
                        lines = (buffer + chunk).split("\n")
                        buffer = lines.pop()
                        for line in lines:
                            if self.tap.claim(line):  # the fast lane's own answer
                                continue
                            try:
                                await self.read_writer.send(sdk_stdio._parse_line(line))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    self.tap.detach()
                    await sdk_stdio._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            if not self.shutting_down:
                sdk_stdio.logger.exception(
                    "Reading from the MCP server's stdout failed mid-session"
                )

    async def stdin_writer(self) -> None:
        process, server = self.process, self.server
        assert process.stdin, "Opened process is missing stdin"
        try:
            async with self.write_reader:
                async for session_message in self.write_reader:
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    data = (text + "\n").encode(
                        encoding=server.encoding, errors=server.encoding_error_handler
                    )
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await self.read_writer.aclose()
        finally:
            self.writer_done.set()

    async def shutdown(self) -> None:
        """Stop traffic, flush, stop the server (the SDK's escalation), release the streams."""
        self.tap.detach()
        self.read_stream.close()
        self.write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT) as flush_scope:
            await self.writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await sdk_stdio._stop_server_process(self.process)
        await sdk_stdio._aclose_all(
            self.read_stream, self.write_stream, self.read_writer, self.write_reader
        )
        await anyio.lowlevel.checkpoint()
