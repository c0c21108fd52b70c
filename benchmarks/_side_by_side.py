"""bench_gateway.py, part 5: this gateway and its peers side by side, in both protocol eras.

Every path is reached by the same SDK client, in front of the same upstream
(``_gw_upstream.py``): the upstream's own streamable HTTP ("direct", answering JSON as
the fast lane does, in both eras) in each era,
this gateway in each era (2026-07-28 single requests; 2025-11-25 sessions), with its
read-only fast lane on and off (``gateway.fast_lane``, two gateway processes), and each
peer of ``_peers.py`` in the era the client negotiates with it.

* added ms: read-only calls alternate between every path call by call (the order
  rotating each round); the median of per-round (path − direct of the same era).
* CPU ms/call: the path's own process (not its upstream), from /proc, over its
  throughput blocks.
* throughput ÷ direct: blocks of 20 sessions calling at once, alternating with the
  direct path of the same era; median ÷ median.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import _bench
import _peers
import anyio
import httpx2
from _bench import cpu_seconds
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

SESSIONS = 20
MODERN, LEGACY = "2026-07-28", "2025-11-25"


@dataclass
class Path:
    label: str
    url: str
    token: str | None
    mode: str  # the SDK client's: "auto" (2026-07-28 where served) or "legacy"
    pids: list[int]
    era: str = ""
    times: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    direct_rates: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    calls: int = 0


@asynccontextmanager
async def session(path: Path) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {path.token}"} if path.token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(
            streamable_http_client(path.url, http_client=http), cache=None, mode=path.mode
        ) as client,  # fmt: skip
    ):
        yield client


async def call(client: Client) -> None:
    result = await client.call_tool("get_vm", {"name": "jp-ubuntu"})
    if result.is_error:
        raise RuntimeError(" ".join(getattr(b, "text", "") for b in result.content)[:300])


async def block(sessions: list[Client], calls_each: int) -> float:
    async def work(client: Client) -> None:
        for _ in range(calls_each):
            await call(client)

    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for client in sessions:
            tg.start_soon(work, client)
    return len(sessions) * calls_each / (anyio.current_time() - started)


async def latency(paths: list[Path], directs: dict[str, Path], rounds: int) -> None:
    every = [*directs.values(), *paths]
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(session(p)) for p in every]
        for p, c in zip(every, clients, strict=True):
            version = c.protocol_version or ""
            p.era = MODERN if version in MODERN_PROTOCOL_VERSIONS else LEGACY
        pairs = list(zip(every, clients, strict=True))
        for n in range(rounds + 10):  # 10 rounds warm every path up
            k = n % len(pairs)
            for p, c in pairs[k:] + pairs[:k]:
                started = anyio.current_time()
                await call(c)
                if n >= 10:
                    p.times.append(anyio.current_time() - started)


async def throughput(path: Path, direct: Path, blocks: int, calls_each: int) -> None:
    async with AsyncExitStack() as stack:
        mine = [await stack.enter_async_context(session(path)) for _ in range(SESSIONS)]
        theirs = [await stack.enter_async_context(session(direct)) for _ in range(SESSIONS)]
        await block(mine, 2)
        await block(theirs, 2)
        for n in range(blocks):
            for which in ((path, mine), (direct, theirs))[:: 1 if n % 2 == 0 else -1]:
                p, sessions = which
                before = cpu_seconds(p.pids)
                rate = await block(sessions, calls_each)
                if p is path:
                    path.rates.append(rate)
                    path.cpu_s += cpu_seconds(p.pids) - before
                    path.calls += SESSIONS * calls_each
                else:
                    path.direct_rates.append(rate)


def ratio(path: Path) -> float:
    """Throughput ÷ direct: the median of the path's blocks ÷ that of the direct blocks
    alternating with them."""
    return _bench.median(path.rates) / _bench.median(path.direct_rates)


def added_ms(path: Path, direct: Path) -> float:
    paired = [a - b for a, b in zip(path.times, direct.times, strict=True)]
    return _bench.median(paired) * 1000


async def run(
    direct_url: str, direct_pid: int, gateways: list[tuple[str, str, str, int]],
    upstream: list[str], tmp: str, *, rounds: int, blocks: int, calls_each: int,
) -> tuple[list[Path], dict[str, Path]]:  # fmt: skip
    """Install and start the peers, measure every path: (the paths, ours first, two per
    gateway of ``gateways`` (label, url, token, pid): 2026-07-28, then 2025-11-25
    sessions; the direct path of each era)."""
    directs = {MODERN: Path("direct", direct_url, None, "auto", [direct_pid]),
               LEGACY: Path("direct", direct_url, None, "legacy", [direct_pid])}  # fmt: skip
    paths = []
    for label, gw_url, token, gw_pid in gateways:
        paths.append(Path(f"{label}, 2026-07-28", gw_url, token, "auto", [gw_pid]))
        paths.append(Path(f"{label}, 2025-11-25 (sessions)", gw_url, token, "legacy", [gw_pid]))
    not_installed = await anyio.to_thread.run_sync(_peers.install)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for peer in _peers.PEERS:
            if peer.label in not_installed:
                print(f"peer {peer.label}: not installed ({not_installed[peer.label]}); left out")
                continue
            try:
                proc, url = _peers.start(peer, upstream, f"{tmp}/{peer.package}.err")
            except RuntimeError as exc:
                print(f"peer {peer.label}: {exc}; left out")
                continue
            procs.append(proc)
            paths.append(Path(peer.label, url, None, peer.mode, [proc.pid]))
        await latency(paths, directs, rounds)
        for p in paths:
            await throughput(p, directs[p.era], blocks, calls_each)
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    rows: list[list[Any]] = []
    for p in paths:
        direct = directs[p.era]
        rows.append([p.label, p.era, f"{added_ms(p, direct):.2f}",
                     f"{p.cpu_s / p.calls * 1000:.2f}", f"{ratio(p):.2f}"])  # fmt: skip
    _bench.table(["path", "era", "added ms", "CPU ms/call", "throughput ÷ direct"], rows)
    print(
        f"\n{rounds} interleaved rounds over every path; {blocks} blocks of {SESSIONS} "
        f"sessions × {calls_each} read-only calls per path, alternating with direct\n"
    )
    return paths, directs
