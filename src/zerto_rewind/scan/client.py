"""Read a server's ``tools/list`` with the official ``mcp`` SDK client: stdio or streamable HTTP.

The tools come back as plain dicts in the wire shape (``name``, ``description``,
``inputSchema``, ``annotations``), which is what :mod:`.heuristics` reads and
what ``tests/data/servers/*.tools.json`` hold.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ZertoRewindError

__all__ = ["ScanError", "list_tools_http", "list_tools_stdio"]

DEFAULT_TIMEOUT_S = 60.0
_STDERR_TAIL = 2000


class ScanError(ZertoRewindError):
    """The server could not be started or reached, or did not list its tools."""


def list_tools_stdio(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Start ``command args`` as a stdio MCP server, list its tools, stop it.

    The server inherits ``env`` (default: this process's environment); its
    stderr is kept aside and quoted when it fails.
    """
    import anyio
    from mcp import Client, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=command,
        args=list(args),
        env=dict(env if env is not None else os.environ),
        cwd=cwd,
    )
    with tempfile.TemporaryFile("w+") as errlog:

        async def scan() -> list[dict[str, Any]]:
            with anyio.fail_after(timeout_s):
                async with Client(stdio_client(params, errlog=errlog)) as client:
                    return await _all_tools(client)

        where = " ".join([command, *args])
        try:
            return anyio.run(scan)
        except Exception as exc:
            errlog.seek(0)
            raise ScanError(_failure(where, exc, errlog.read(), timeout_s)) from exc


def list_tools_http(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Connect to a streamable HTTP MCP server at ``url`` and list its tools."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def scan() -> list[dict[str, Any]]:
        with anyio.fail_after(timeout_s):
            async with (
                httpx2.AsyncClient(headers=dict(headers or {}), timeout=timeout_s) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return await _all_tools(client)

    try:
        return anyio.run(scan)
    except Exception as exc:
        raise ScanError(_http_failure(url, exc, timeout_s)) from exc


async def _all_tools(client: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(
            tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in page.tools
        )
        cursor = page.next_cursor
        if not cursor:
            return tools


def _failure(where: str, exc: BaseException, stderr: str, timeout_s: float) -> str:
    """The cause first (the server's own exception when it died), then its stderr."""
    lines = _without_warnings(stderr)
    described = _describe(exc, timeout_s).replace("; ", ", ")
    cause = _exception_line(lines)
    if not cause and not _timed_out(exc):
        # No traceback: a server that exits with a message of its own (argparse, click,
        # sys.exit("…")) says why on its last line.
        cause = next((ln.strip() for ln in reversed(lines) if ln.strip()), "")[:300]
    head = f"the server stopped: {cause.replace('; ', ', ')} ({described})" if cause else described
    msg = (
        f"could not list the tools of `{where}`: {head}; check the command and the "
        "environment it needs (variables, working directory), then scan again"
    )
    text = "\n".join(lines)
    tail = text[-_STDERR_TAIL:]
    if len(text) > _STDERR_TAIL:
        tail = tail.partition("\n")[2]  # whole lines only
    tail = tail.strip()
    if tail:
        msg += f".\nIts stderr, warnings left out:\n{tail}"
    return msg


def _http_failure(url: str, exc: BaseException, timeout_s: float) -> str:
    """The cause, then what to check: the advice follows the first ``"; "``."""
    described = _describe(exc, timeout_s).replace("; ", ", ")
    return (
        f"could not list the tools at {url}: {described}; check that the server answers MCP "
        "at that URL and give the headers it needs (--header NAME:VALUE), then scan again"
    )


# ``path.py:12: DeprecationWarning: text`` (any *Warning), as the warnings module prints it.
_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")


def _without_warnings(stderr: str) -> list[str]:
    """The stderr's lines without Python warnings: each one's message (which may run over
    several lines) up to the indented source line the warnings module prints under it."""
    kept: list[str] = []
    held: list[str] = []  # lines after a warning, until its source line ends it
    for line in stderr.splitlines():
        if _WARNING.match(line):
            held = [line]  # a warning with no source line (not found) ends at the next one
        elif held and line.startswith((" ", "\t")):
            held = []  # the source line: the warning is over, all of it dropped
        elif held and not line.startswith("Traceback (most recent"):
            held.append(line)
        else:
            held = []
            kept.append(line)
    return kept


def _exception_line(lines: list[str]) -> str:
    """The exception that ended the last traceback in ``lines`` (``Type: message``), or ""."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if not starts:
        return ""
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and not line.startswith((" ", "\t")):
            return line.strip()
    return ""


def _timed_out(exc: BaseException) -> bool:
    inner = getattr(exc, "exceptions", None)
    return isinstance(exc, TimeoutError) or any(_timed_out(e) for e in inner or ())


def _describe(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:.0f} s"
    inner = getattr(exc, "exceptions", None)  # an exception group from the task group
    if inner:
        return "; ".join(_describe(e, timeout_s) for e in inner)
    return f"{type(exc).__name__}: {exc}"
