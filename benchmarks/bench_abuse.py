"""Reliability 16: one abusive token beside a well-behaved one (issue 28, gateway.limits).

One gateway (``zerto-rewind gateway --listen``, loopback, default ``gateway.limits``)
in front of ``_gw_upstream.py``. The well-behaved token (``good``) runs read-only
calls (``get_vm``) over its own handshake-era session, one at a time, in phases of
``--calls`` (1,000): alone, then beside the abuser, ``--rounds`` times (2) in turn,
so that the machine's other work falls on both kinds of phase. The ratios are of
the pooled calls of each kind (2,000 each by default: the p99 is the 20th slowest).
In a phase beside it, another process (``--abuser``), holding the token ``abuser``:

* opens handshake-era sessions and abandons them (``initialize`` only) at
  ``--session-rate`` a second (400: issue 28's 10,000 in 25 s);
* keeps ``--workers`` calls (300, as in the issue) of large arguments
  (``--arg-bytes``, under gateway.max_body_bytes) waiting for an approver, each
  worker re-sending a second after a refusal, whatever Retry-After says;
* holds ``--slow-headers`` connections with half-sent request headers
  (:func:`slow_headers`), which the listener's header timeout ends;
* with ``--readers N`` (0 by default), also keeps N read-only calls going, one after
  another, each with ``--arg-bytes`` of small JSON objects as arguments
  (:func:`read_large`): forwarded at once, they keep the gateway parsing. ``--rate``
  sets gateway.limits.argument_bytes_per_s_per_token, which bounds them.

It is started for the phase, given ``--warm-s`` to reach the caps, and stopped
(its stdin closed) when the phase ends; ``--settle-s`` later the next phase begins.

The abuser's client runs at a lower OS priority (``--abuser-nice``, 10 by default;
0 for none): on a 2-core machine its own process (300 workers re-sending 900 kB bodies)
otherwise takes a core from the gateway and the good client alike, and the figure
would measure the abuser's client as much as the gateway. ``--abuser-cpu N`` runs it
on CPU N alone, and the gateway and the good client on the others.

It reports each phase's p50 and p99 with the gateway's CPU and the machine's load
average, the pooled p50 and p99 and their ratios (goal ≤ 1.5×), what the abuser got
(statuses) and sent (rates), the gateway's full garbage collections in each kind of
phase (a probe run in the gateway's process, ``GC_PROBE``) and how many of the
slowest 1% of good calls overlapped one, and the gateway's peak RSS and open fds,
read from /proc/PID/status (VmRSS) and /proc/PID/fd while it runs. ``--stalls`` also
logs every event-loop callback of the gateway over 3 ms, and every turn of the loop
whose shorter callbacks took over 5 ms together (a diagnosis; it slows the loop);
``--no-freeze`` runs the gateway without its ``gc.freeze()`` at start-up, to measure
what that does.

    .venv/bin/python benchmarks/bench_abuse.py [--calls 1000] [--rounds 2] [--abuser-cpu 1]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import _bench
import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from zerto_rewind.gateway.http import token_digest

UPSTREAM = str(Path(__file__).resolve().with_name("_gw_upstream.py"))
TOKENS = {"good": "bench-good-token-0123456789", "abuser": "bench-abuser-token-0123456789"}
RATIO_TARGET = 1.5
FLOODERS = 8
START_TIMEOUT_S = 60.0


def configure(box: _bench.Sandbox, rate: int | None = None) -> None:
    upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
    gateway: dict[str, Any] = {"clients": {n: token_digest(t) for n, t in TOKENS.items()}}
    if rate is not None:  # --rate: gateway.limits.argument_bytes_per_s_per_token
        gateway["limits"] = {"argument_bytes_per_s_per_token": rate}
    box.write_config(
        upstreams={"vsphere": upstream},
        gateway=gateway,
        # unlisted calls wait for an approver nobody is: the abuser's large calls wait
        approvals={"approvers": {"users": ["root"]}, "wait_s": 120},
        state_dir=box.state_dir,
        log=box.log_path,
    )


# Run before the CLI in the gateway's process: each full (generation 2) collection's
# start and end, CLOCK_MONOTONIC (one clock for every process), one line each, so the
# report can say whether the slowest good calls overlapped one.
GC_PROBE = """
import gc, os, runpy, sys, time
_out = open(os.environ["ZR_BENCH_GC_LOG"], "a", buffering=1)
_began = [0.0]
def _probe(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            _began[0] = time.monotonic()
        else:
            _out.write(f"{_began[0]:.6f} {time.monotonic():.6f}\\n")
gc.callbacks.append(_probe)
if os.environ.get("ZR_BENCH_NO_FREEZE"):  # --no-freeze: as before gc.freeze at start-up
    gc.freeze = lambda: None
if os.environ.get("ZR_BENCH_STALLS"):  # --stalls: every loop callback over 3 ms
    import asyncio.events
    _stalls = open(os.environ["ZR_BENCH_STALLS"], "a", buffering=1)
    _run = asyncio.events.Handle._run
    def _chain(what):  # the awaits a task is suspended in, outermost first
        names = []
        while what is not None and len(names) < 40:
            names.append(getattr(what, "__qualname__", type(what).__name__))
            what = getattr(what, "cr_await", None) or getattr(what, "gi_yieldfrom", None)
        return ">".join(names[:3] + names[-1:])
    _turn = {}  # this turn of the loop: what ran -> [seconds, callbacks]
    def _timed(self):
        coro = getattr(getattr(self._callback, "__self__", None), "get_coro", None)
        before = _chain(coro()) if coro else getattr(self._callback, "__qualname__", "?")
        began = time.monotonic()
        _run(self)
        took = time.monotonic() - began
        if took > 0.003:
            _stalls.write(f"{began:.6f} {took * 1000:.1f} {before}\\n")
        spent = _turn.setdefault(before, [0.0, 0])
        spent[0] += took
        spent[1] += 1
    asyncio.events.Handle._run = _timed
    import asyncio.base_events
    _run_once = asyncio.base_events.BaseEventLoop._run_once
    def _once(self):  # a turn whose callbacks, none over 3 ms, took over 5 ms together
        _turn.clear()
        _run_once(self)
        spent = sum(v[0] for v in _turn.values())
        if spent > 0.005 and all(v[0] / v[1] <= 0.003 for v in _turn.values()):
            what = max(_turn.items(), key=lambda kv: kv[1][0])[0]
            _stalls.write(f"{time.monotonic() - spent:.6f} {spent * 1000:.1f} "
                          f"(a turn of callbacks under 3 ms; most of it) {what}\\n")
    asyncio.base_events.BaseEventLoop._run_once = _once
sys.argv[0] = "zerto_rewind"
runpy.run_module("zerto_rewind", run_name="__main__", alter_sys=True)
"""


def spawn_gateway(
    box: _bench.Sandbox, tmp: str, gc_log: str, *, stalls: bool = False, freeze: bool = True
) -> tuple[subprocess.Popen[bytes], Any]:
    ready = os.path.join(tmp, "ready.json")
    argv = [sys.executable, "-c", GC_PROBE, "gateway", "--listen", "127.0.0.1:0",
            "--ready-file", ready, "--allow-privileged-upstream"]  # fmt: skip
    env = {**box.env(), "ZR_BENCH_GC_LOG": gc_log}
    if not freeze:
        env["ZR_BENCH_NO_FREEZE"] = "1"
    if stalls:
        env["ZR_BENCH_STALLS"] = os.path.join(tmp, "stalls.log")
    with open(os.path.join(tmp, "gateway.stderr"), "wb") as err:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the gateway did not start")
        time.sleep(0.05)
    with open(ready, encoding="utf-8") as fh:
        return proc, json.load(fh)


def full_collections(gc_log: str) -> list[tuple[float, float]]:
    """The gateway's full collections so far: (start, end), CLOCK_MONOTONIC."""
    with open(gc_log, encoding="utf-8") as fh:
        return [(float(a), float(b)) for a, b in (line.split() for line in fh if line.strip())]


class Peaks:
    """The gateway's peak RSS (VmHWM) and open fds, sampled from /proc while it runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fds = 0
        self.rss_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> tuple[int, int]:
        fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        rss = 0
        with open(f"/proc/{self.pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return fds, rss

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                fds, rss = self.sample()
            except OSError:
                return
            self.fds, self.rss_kb = max(self.fds, fds), max(self.rss_kb, rss)


# ---------------------------------------------------------------------- the good token


@asynccontextmanager
async def good_client(url: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKENS['good']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, mode="legacy") as c,
    ):
        yield c


async def good_calls(client: Client, calls: int) -> list[tuple[float, float]]:
    """``calls`` read-only calls, one at a time: each one's (start, end), CLOCK_MONOTONIC."""
    spans: list[tuple[float, float]] = []
    for n in range(calls):
        started = time.monotonic()
        result = await client.call_tool("get_vm", {"name": f"vm-{n}"})
        spans.append((started, time.monotonic()))
        if result.is_error:
            raise RuntimeError("a good read-only call failed")
    return spans


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of a process so far, from /proc."""
    with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


# ---------------------------------------------------------------------- the abuser


# The abuser's own loopback address: another machine, as the listener counts sources
# (the good token calls from 127.0.0.1).
ABUSER_SOURCE = "127.0.0.2"


def _headers(session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {TOKENS['abuser']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION,
    }
    if session:
        headers["Mcp-Session-Id"] = session
    return headers


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "abuser", "version": "0"},
    },
}


async def flood_sessions(
    http: httpx2.AsyncClient, url: str, until: float, seen: Counter[str], every_s: float
) -> None:
    """Open sessions and abandon them, one each ``every_s`` (this worker's share)."""
    due = time.monotonic()
    while time.monotonic() < until:
        try:
            response = await http.post(url, json=INIT, headers=_headers())
            seen[f"initialize {response.status_code}"] += 1
        except httpx2.HTTPError as exc:  # closed at once past the listener's caps
            seen[f"initialize {type(exc).__name__}"] += 1
        due += every_s
        await anyio.sleep(max(0.0, due - time.monotonic()))


async def wait_large(
    http: httpx2.AsyncClient, url: str, session: str, size: int, until: float, seen: Counter[str]
) -> None:
    body = json.dumps({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "mystery_tool", "arguments": {"blob": "x" * size}},
    }).encode()  # fmt: skip
    headers = _headers(session)
    while time.monotonic() < until:
        with anyio.move_on_after(max(0.1, until - time.monotonic())):
            try:
                async with http.stream("POST", url, content=body, headers=headers) as response:
                    seen[f"large call {response.status_code}"] += 1
                    if response.status_code == 200:  # waiting for an approver: held
                        await response.aread()
                        continue
            except httpx2.HTTPError as exc:  # closed at once past the listener's caps
                seen[f"large call {type(exc).__name__}"] += 1
        await anyio.sleep(1.0)  # refused: again a second later, whatever Retry-After says


async def _one_session(http: httpx2.AsyncClient, url: str) -> str:
    """A session for the large calls; "" if the gateway keeps refusing this source."""
    for _ in range(50):
        try:
            opened = await http.post(url, json=INIT, headers=_headers())
            session = opened.headers.get("mcp-session-id", "")
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(url, json=note, headers=_headers(session))
            return session
        except httpx2.HTTPError:
            await anyio.sleep(0.1)
    return ""


def slow_headers(host: str, port: int, count: int) -> list[socket.socket]:
    """The listener hook: ``count`` connections whose request headers never end.

    Bounded by the listener's header timeout and per-source cap once issue 28 item 4
    is in; until then they stay open for the whole run.
    """
    held = []
    for _ in range(count):
        try:
            sock = socket.create_connection((host, port), source_address=(ABUSER_SOURCE, 0))
        except OSError:  # refused at once past the listener's per-source cap
            continue
        sock.sendall(b"POST /mcp/vsphere HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        held.append(sock)
    return held


async def read_large(
    http: httpx2.AsyncClient, url: str, session: str, size: int, until: float, seen: Counter[str]
) -> None:
    """Read-only calls with ``size`` bytes of small JSON objects as arguments, each sent as
    soon as the last is answered: forwarded at once, they keep the gateway parsing."""
    filler = [{"k": n, "v": "abc"} for n in range(size // 27)]  # 26 bytes or fewer each
    body = json.dumps({
        "jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "get_vm", "arguments": {"name": "vm-1", "filter": filler}},
    }).encode()  # fmt: skip
    headers = _headers(session)
    while time.monotonic() < until:
        try:
            response = await http.post(url, content=body, headers=headers)
            seen[f"large read {response.status_code}"] += 1
            if response.status_code == 200:
                continue
        except httpx2.HTTPError as exc:
            seen[f"large read {type(exc).__name__}"] += 1
        await anyio.sleep(1.0)  # refused: again a second later, whatever Retry-After says


async def abuse(url: str, args: argparse.Namespace) -> None:
    seconds, arg_bytes, workers = args.abuse_s, args.arg_bytes, args.workers
    slow, session_rate, session = args.slow_headers, args.session_rate, args.session
    until = time.monotonic() + seconds
    seen: Counter[str] = Counter()
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    limits = httpx2.Limits(max_connections=workers + 16)
    transport = httpx2.AsyncHTTPTransport(limits=limits, local_address=ABUSER_SOURCE)
    async with httpx2.AsyncClient(timeout=180, transport=transport) as http:
        # The session first: opened after the slow heads, it would meet this address's
        # connection cap they fill, and the large calls would be refused without one
        # (400) instead of waiting for an approver as the attack means them to.
        # A later phase's abuser takes the first one's session: its own initialize would
        # meet sessions_per_token, held by the sessions the first one abandoned.
        session = session or await _one_session(http, url)
        sockets = slow_headers(host, int(port), slow)
        print(f"abuser: ready {session}", file=sys.stderr, flush=True)
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_at_eof, tg.cancel_scope)
            for _ in range(FLOODERS):
                tg.start_soon(flood_sessions, http, url, until, seen, FLOODERS / session_rate)
            for _ in range(workers):
                tg.start_soon(wait_large, http, url, session, arg_bytes, until, seen)
            for _ in range(args.readers):
                tg.start_soon(read_large, http, url, session, arg_bytes, until, seen)
        seconds = time.monotonic() - started
    for sock in sockets:
        sock.close()
    print(json.dumps({"seen": dict(seen), "seconds": seconds}), flush=True)


async def _stop_at_eof(scope: anyio.CancelScope) -> None:
    """The run closes the abuser's stdin to end its phase (``--abuse-s`` is the most)."""
    await anyio.to_thread.run_sync(sys.stdin.read)
    scope.cancel()


# ---------------------------------------------------------------------- the run


class Phase:
    """One phase of the good token's calls: alone, or beside the abuser."""

    def __init__(self, beside: bool, spans: list[tuple[float, float]], cpu: float) -> None:
        self.beside = beside
        self.spans = spans
        self.cpu = cpu  # the gateway's, in cores
        self.load = os.getloadavg()[0]  # the machine's after it, other work included
        self.abuser_cpu = 0.0
        self.abuser: dict[str, Any] = {}

    @property
    def times(self) -> list[float]:
        return [end - start for start, end in self.spans]


async def measured(client: Client, pid: int, calls: int, beside: bool) -> Phase:
    cpu_before, started = cpu_s(pid), time.monotonic()
    spans = await good_calls(client, calls)
    return Phase(beside, spans, (cpu_s(pid) - cpu_before) / (time.monotonic() - started))


async def beside_abuser(client: Client, url: str, pid: int, args: argparse.Namespace) -> Phase:
    """A phase with the abuser running: started, warmed to its caps, then stopped."""
    abuser = subprocess.Popen(
        [sys.executable, __file__, "--abuser", url, "--abuse-s", str(args.abuse_s),
         "--arg-bytes", str(args.arg_bytes), "--workers", str(args.workers),
         "--readers", str(args.readers),
         "--slow-headers", str(args.slow_headers), "--session-rate", str(args.session_rate),
         "--abuser-nice", str(args.abuser_nice), "--session", args.session,
         *([] if args.abuser_cpu is None else ["--abuser-cpu", str(args.abuser_cpu)])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert abuser.stderr is not None
    ready = abuser.stderr.readline().decode().split()  # "abuser: ready SESSION"
    args.session = ready[2] if len(ready) > 2 else ""
    await anyio.sleep(args.warm_s)  # the flood reaches its caps
    abuser_before, started = cpu_s(abuser.pid), time.monotonic()
    phase = await measured(client, pid, args.calls, beside=True)
    phase.abuser_cpu = (cpu_s(abuser.pid) - abuser_before) / (time.monotonic() - started)
    out, _ = abuser.communicate(input=b"", timeout=120)  # its stdin closed: it stops
    phase.abuser = json.loads(out.splitlines()[-1])
    await anyio.sleep(args.settle_s)  # its connections closed, its calls ended
    return phase


async def run(args: argparse.Namespace) -> int:
    box = _bench.sandbox()
    tmp = tempfile.mkdtemp(prefix="zr-abuse-")
    gc_log = os.path.join(tmp, "gc.log")
    try:
        configure(box, args.rate)
        gateway, info = spawn_gateway(
            box, tmp, gc_log, stalls=args.stalls, freeze=not args.no_freeze
        )
        url = info["mcp"]["vsphere"]
        try:
            with Peaks(gateway.pid) as peaks:
                async with good_client(url) as client:
                    await good_calls(client, 50)  # warm: the upstream's list, the caches
                    _, rss_start = peaks.sample()
                    load_before = os.getloadavg()[0]
                    phases: list[Phase] = []
                    # Interleaved (alone, beside, alone, beside…): the machine's other work
                    # falls on both kinds of phase, not on whichever ran when it peaked.
                    for _ in range(args.rounds):
                        phases.append(await measured(client, gateway.pid, args.calls, False))
                        phases.append(await beside_abuser(client, url, gateway.pid, args))
                fds_after, rss_after = peaks.sample()
            report(args, phases, full_collections(gc_log), load_before)
            if args.stalls:
                stalls(os.path.join(tmp, "stalls.log"), phases)
            rss = (rss_start / 1024, peaks.rss_kb / 1024, rss_after / 1024)
            print(f"gateway RSS: {rss[0]:.0f} MB warm, peak {rss[1]:.0f} MB, {rss[2]:.0f} MB "
                  f"after; fds: peak {peaks.fds}, {fds_after} after")  # fmt: skip
        finally:
            gateway.terminate()
            gateway.wait(timeout=10)
    finally:
        box.stop()
    alone, beside = pooled(phases, False), pooled(phases, True)
    p50 = pct(beside, 0.5) / pct(alone, 0.5)
    p99 = pct(beside, 0.99) / pct(alone, 0.99)
    return _bench.judge("p50 ratio", p50, RATIO_TARGET, unit="×") | _bench.judge(
        "p99 ratio", p99, RATIO_TARGET, unit="×"
    )


def pooled(phases: list[Phase], beside: bool) -> list[float]:
    return [t for phase in phases if phase.beside == beside for t in phase.times]


def report(
    args: argparse.Namespace,
    phases: list[Phase],
    collections: list[tuple[float, float]],
    load_before: float,
) -> None:
    print(
        f"good token: {args.rounds} rounds of {args.calls} read-only calls alone, then "
        f"{args.calls} beside the abuser; one at a time, one session"
    )
    print(f"abuser: {args.session_rate:g} abandoned sessions/s, {args.workers} workers of "
          f"{args.arg_bytes} B calls (each retried 1 s after a refusal), "
          f"{args.slow_headers} slow-header connections, its client at nice {args.abuser_nice}"
          + ("" if args.abuser_cpu is None else f" on CPU {args.abuser_cpu} alone")
          + ("; the gateway without gc.freeze" if args.no_freeze else ""))  # fmt: skip
    if args.readers:
        rate = "its default" if args.rate is None else f"{args.rate}"
        print(f"and {args.readers} callers of read-only calls with {args.arg_bytes} B of small "
              f"objects, one after another; argument_bytes_per_s_per_token: {rate}")  # fmt: skip
    rows: list[list[Any]] = []
    for n, phase in enumerate(phases):
        name = f"{'beside the abuser' if phase.beside else 'alone'} ({n // 2 + 1})"
        rows.append([name, pct(phase.times, 0.5), pct(phase.times, 0.99),
                     f"{phase.cpu:.0%}", f"{phase.load:.2f}"])  # fmt: skip
    alone, beside = pooled(phases, False), pooled(phases, True)
    rows.append([f"alone, all {len(alone)}", pct(alone, 0.5), pct(alone, 0.99), "", ""])
    rows.append([f"beside, all {len(beside)}", pct(beside, 0.5), pct(beside, 0.99), "", ""])
    rows.append(["ratio", pct(beside, 0.5) / pct(alone, 0.5), pct(beside, 0.99) / pct(alone, 0.99),
                 "", ""])  # fmt: skip
    _bench.table(["good token", "p50 ms", "p99 ms", "gateway CPU", "load avg after"], rows)
    print(
        f"1-minute load average {load_before:.2f} before the first phase ({os.cpu_count()} cores)"
    )
    for kind in (False, True):
        print(_collections_line(phases, kind, collections))
    _abuser_lines(args, [phase for phase in phases if phase.beside])


def _collections_line(
    phases: list[Phase], beside: bool, collections: list[tuple[float, float]]
) -> str:
    """The gateway's full collections in one kind of phase, and the slowest 1% they hit."""
    mine = [phase for phase in phases if phase.beside == beside]
    spans = [span for phase in mine for span in phase.spans]
    windows = [(phase.spans[0][0], phase.spans[-1][1]) for phase in mine]
    ours = [(a, b) for a, b in collections if any(s <= b and a <= e for s, e in windows)]
    slowest = sorted(spans, key=lambda span: span[0] - span[1])[: max(1, len(spans) // 100)]
    hit = sum(1 for s, e in slowest if any(a <= e and s <= b for a, b in ours))
    pauses = [(b - a) * 1000 for a, b in ours]
    kind = "beside the abuser" if beside else "alone"
    return (f"gateway full collections {kind}: {len(pauses)}, {sum(pauses):.0f} ms in all, "
            f"longest {max(pauses, default=0):.1f} ms; {hit} of the slowest {len(slowest)} "
            "good calls overlapped one")  # fmt: skip


def stalls(path: str, phases: list[Phase]) -> None:
    """The gateway's event-loop callbacks over 3 ms in each kind of phase, by what ran."""
    with open(path, encoding="utf-8") as fh:
        logged = [
            (float(at), float(ms), what) for at, ms, what in (ln.split(maxsplit=2) for ln in fh)
        ]
    print(f"event-loop callbacks over 3 ms ({path}):")
    for beside in (False, True):
        windows = [(p.spans[0][0], p.spans[-1][1]) for p in phases if p.beside == beside]
        by_what: dict[str, list[float]] = {}
        for at, ms, what in logged:
            if any(a <= at <= b for a, b in windows):
                by_what.setdefault(what.strip(), []).append(ms)
        seconds = sum(b - a for a, b in windows)
        count, total = sum(len(v) for v in by_what.values()), sum(sum(v) for v in by_what.values())
        kind = "beside the abuser" if beside else "alone"
        print(f"  {kind}: {count} in {seconds:.0f} s, {total:.0f} ms in all")
        for what, took in sorted(by_what.items(), key=lambda kv: -sum(kv[1]))[:6]:
            print(f"    {len(took):5d} {sum(took):7.0f} ms, longest {max(took):6.1f}  {what}")


def _abuser_lines(args: argparse.Namespace, phases: list[Phase]) -> None:
    seen: Counter[str] = Counter()
    for phase in phases:
        seen.update(phase.abuser["seen"])
    seconds = sum(phase.abuser["seconds"] for phase in phases)
    print("abuser got: " + ", ".join(f"{k}: {v}" for k, v in sorted(seen.items())))
    # What the abuser managed to send: at a lower priority on a busy machine it may fall
    # short of its rates, and then the run says less than it seems to.
    sent = {
        kind: sum(v for k, v in seen.items() if k.startswith(kind))
        for kind in ("initialize", "large call", "large read")
    }
    print(f"abuser sent: {sent['initialize'] / seconds:.0f} initialize/s "
          f"(asked {args.session_rate:g}), {sent['large call'] / seconds:.0f} large calls/s "
          f"(at most {args.workers} a second once refused), "
          f"{sent['large read'] / seconds:.1f} large reads/s over {seconds:.0f} s; its "
          f"process {sum(p.abuser_cpu for p in phases) / len(phases):.0%} of a core")  # fmt: skip


# ---------------------------------------------------------------------- what a refusal costs


def refusal_cost(args: argparse.Namespace) -> int:
    """The gateway's CPU per refused request of each kind, one at a time from 127.0.0.2.

    CPU seconds (utime + stime from /proc), not wall time: a busy machine delays a
    refusal but hardly changes what it costs the gateway. Caps lowered so that each
    request is refused: sessions_per_token 1, argument_bytes_per_token 800,000 (a
    700 kB call without a session fits it, and is refused as no opening; 900 kB not).
    """
    box = _bench.sandbox()
    tmp = tempfile.mkdtemp(prefix="zr-abuse-")
    try:
        upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
        limits = {"sessions_per_token": 1, "argument_bytes_per_token": 800_000}
        box.write_config(
            upstreams={"vsphere": upstream},
            gateway={"clients": {n: token_digest(t) for n, t in TOKENS.items()}, "limits": limits},
            approvals={"approvers": {"users": ["root"]}, "wait_s": 120},
            state_dir=box.state_dir,
            log=box.log_path,
        )
        gateway, info = spawn_gateway(box, tmp, os.path.join(tmp, "gc.log"))
        try:
            rows = _costs(gateway.pid, info["mcp"]["vsphere"], args.refusal_cost, args.arg_bytes)
        finally:
            gateway.terminate()
            gateway.wait(timeout=10)
    finally:
        box.stop()
    _bench.table(["refused request", "status", "gateway CPU ms each"], rows)
    return 0


def _costs(pid: int, url: str, n: int, size: int) -> list[list[Any]]:
    import httpx

    def call(blob: int) -> str:
        params = {"name": "mystery_tool", "arguments": {"blob": "x" * blob}}
        return json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})

    transport = httpx.HTTPTransport(local_address=ABUSER_SOURCE)
    with httpx.Client(transport=transport, timeout=60) as http:
        opened = http.post(url, content=json.dumps(INIT), headers=_headers())
        session = opened.headers["mcp-session-id"]
        kinds = [
            ("initialize past sessions_per_token", json.dumps(INIT), None),
            (f"{size} B call past argument_bytes_per_token", call(size), session),
            (f"{size - 200_000} B call without a session", call(size - 200_000), None),
        ]
        rows: list[list[Any]] = []
        for name, body, sid in kinds:
            statuses: Counter[str] = Counter()
            before = cpu_s(pid)
            for _ in range(n):
                try:
                    answered = http.post(url, content=body, headers=_headers(sid))
                    statuses[str(answered.status_code)] += 1
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1
            each = (cpu_s(pid) - before) / n * 1000
            rows.append([name, ", ".join(f"{k} × {v}" for k, v in statuses.items()), each])
    return [*rows, _accept_refusals(pid, url, n * 16)]  # each costs little: many, for /proc's ticks


# Where the connections past the per-source cap come from: an address of their own.
FLOOD_SOURCE = "127.0.0.3"


def _accept_refusals(pid: int, url: str, n: int) -> list[Any]:
    """``n`` connections past gateway.max_connections_per_source, refused at accept(), in
    bursts of 64 (as a flood arrives): what each costs the gateway, its event loop's wake-ups
    included."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    where, source = (host, int(port)), (FLOOD_SOURCE, 0)
    # The address's room, filled with connections that send nothing (the header timeout,
    # 10 s, ends them after this measurement).
    held = [socket.create_connection(where, source_address=source) for _ in range(128)]
    statuses: Counter[str] = Counter()
    before = cpu_s(pid)
    for _ in range(0, n, 64):
        burst = [socket.create_connection(where, source_address=source) for _ in range(64)]
        for sock in burst:
            sock.settimeout(10)
            try:
                statuses[sock.recv(12).decode(errors="replace")[9:] or "closed"] += 1
            except OSError as exc:
                statuses[type(exc).__name__] += 1
            sock.close()
    each = (cpu_s(pid) - before) / (len(range(0, n, 64)) * 64) * 1000
    for sock in held:
        sock.close()
    name = "connection past max_connections_per_source (at accept)"
    return [name, ", ".join(f"{k} × {v}" for k, v in statuses.items()), each]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=1000, help="good calls per phase")
    parser.add_argument("--rounds", type=int, default=2, help="(alone, beside) pairs")
    parser.add_argument("--abuse-s", type=float, default=300.0, help="an abuser phase's most")
    parser.add_argument("--warm-s", type=float, default=3.0)
    parser.add_argument("--settle-s", type=float, default=2.0)
    parser.add_argument("--arg-bytes", type=int, default=900_000)
    parser.add_argument("--workers", type=int, default=300)
    parser.add_argument("--session-rate", type=float, default=400.0)
    parser.add_argument("--slow-headers", type=int, default=200)
    readers = "the abuser's read-only callers of --arg-bytes of small JSON objects"
    parser.add_argument("--readers", type=int, default=0, help=readers)
    rate = "gateway.limits.argument_bytes_per_s_per_token (the gateway's default if not given)"
    parser.add_argument("--rate", type=int, metavar="BYTES", default=None, help=rate)
    parser.add_argument("--abuser-nice", type=int, default=10)
    cpu = "run the abuser's client on this CPU alone, and the gateway and good client on the others"
    parser.add_argument("--abuser-cpu", type=int, metavar="N", default=None, help=cpu)
    stalls = "log the gateway's event-loop callbacks over 3 ms, and turns of the loop over 5 ms"
    parser.add_argument("--stalls", action="store_true", help=stalls)
    no_freeze = "the gateway without gc.freeze() at start-up (to measure what it does)"
    parser.add_argument("--no-freeze", action="store_true", help=no_freeze)
    parser.add_argument("--abuser", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--session", default="", help=argparse.SUPPRESS)  # the abuser's
    cost = "instead: the gateway's CPU per refused request, N of each kind"
    parser.add_argument("--refusal-cost", type=int, metavar="N", default=0, help=cost)
    args = parser.parse_args()
    if args.refusal_cost:
        _bench.header("Reliability 16: what a refused request costs the gateway", "bench_abuse.py")
        return refusal_cost(args)
    if args.abuser:
        os.nice(args.abuser_nice)  # the abuser's client, not the gateway: see the docstring
        if args.abuser_cpu is not None:
            os.sched_setaffinity(0, {args.abuser_cpu})
        anyio.run(abuse, args.abuser, args)
        return 0
    _bench.header("Reliability 16: an abusive token beside a good one", "bench_abuse.py")
    if args.abuser_cpu is not None:
        # Before the gateway starts, so it and its VM server inherit the other CPUs: the
        # abuser stands for a client on another machine, as an abusive agent would be.
        os.sched_setaffinity(0, os.sched_getaffinity(0) - {args.abuser_cpu})
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
