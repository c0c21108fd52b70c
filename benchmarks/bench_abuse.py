"""Reliability 16: one abusive token beside a well-behaved one (issue 28, gateway.limits).

One gateway (``zerto-rewind gateway --listen``, loopback, default ``gateway.limits``)
in front of ``_gw_upstream.py``. The well-behaved token (``good``) runs read-only
calls (``get_vm``) over its own handshake-era session, one at a time. In the same
run it does so twice: alone, then while another process (``--abuser``), holding
the token ``abuser``:

* opens handshake-era sessions and abandons them (``initialize`` only) at
  ``--session-rate`` a second (400: issue 28's 10,000 in 25 s);
* keeps ``--workers`` calls (300, as in the issue) of large arguments
  (``--arg-bytes``, under gateway.max_body_bytes) waiting for an approver, each
  worker re-sending a second after a refusal, whatever Retry-After says;
* holds ``--slow-headers`` connections with half-sent request headers. Until the
  listener's header timeout is merged (issue 28 item 4) nothing ends them; the
  hook is :func:`slow_headers`.

The abuser's client runs at a lower OS priority (``--abuser-nice``, 10 by default;
0 for none): on a 2-core machine its own process (300 workers re-sending 900 kB bodies)
otherwise takes a core from the gateway and the good client alike, and the figure
would measure the abuser's client as much as the gateway. It still gets any CPU left
idle; the gateway runs at normal priority, as it would on a host where the abuser is
another machine.

It reports the good token's p50 and p99 alone and beside the abuser, their ratio
(goal ≤ 1.5×), what the abuser got (statuses), and the gateway's peak RSS and open
fds, read from /proc/PID/status (VmHWM) and /proc/PID/fd while it runs. Bounded:
``--calls`` good calls each phase, the abuser stops after ``--abuse-s``.

    .venv/bin/python benchmarks/bench_abuse.py [--calls 300] [--abuse-s 40]
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


def configure(box: _bench.Sandbox) -> None:
    upstream = {"command": [sys.executable, UPSTREAM, "stdio"], "timeout_s": 10}
    box.write_config(
        upstreams={"vsphere": upstream},
        gateway={"clients": {n: token_digest(t) for n, t in TOKENS.items()}},
        # unlisted calls wait for an approver nobody is: the abuser's large calls wait
        approvals={"approvers": {"users": ["root"]}, "wait_s": 120},
        state_dir=box.state_dir,
        log=box.log_path,
    )


def spawn_gateway(box: _bench.Sandbox, tmp: str) -> tuple[subprocess.Popen[bytes], Any]:
    ready = os.path.join(tmp, "ready.json")
    argv = [sys.executable, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
            "--ready-file", ready, "--allow-privileged-upstream"]  # fmt: skip
    with open(os.path.join(tmp, "gateway.stderr"), "wb") as err:
        proc = subprocess.Popen(argv, env=box.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the gateway did not start")
        time.sleep(0.05)
    with open(ready, encoding="utf-8") as fh:
        return proc, json.load(fh)


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


async def good_calls(url: str, calls: int) -> list[float]:
    """``calls`` read-only calls, one at a time, over a fresh session: each one's seconds."""
    times: list[float] = []
    async with good_client(url) as client:
        for n in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("get_vm", {"name": f"vm-{n}"})
            times.append(time.perf_counter() - started)
            if result.is_error:
                raise RuntimeError("a good read-only call failed")
    return times


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


async def abuse(
    url: str, seconds: float, arg_bytes: int, workers: int, slow: int, session_rate: float
) -> None:
    until = time.monotonic() + seconds
    seen: Counter[str] = Counter()
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    limits = httpx2.Limits(max_connections=workers + 16)
    transport = httpx2.AsyncHTTPTransport(limits=limits, local_address=ABUSER_SOURCE)
    async with httpx2.AsyncClient(timeout=180, transport=transport) as http:
        # The session first: opened after the slow heads, it would meet this address's
        # connection cap they fill, and the large calls would be refused without one
        # (400) instead of waiting for an approver as the attack means them to.
        session = await _one_session(http, url)
        sockets = slow_headers(host, int(port), slow)
        print("abuser: ready", file=sys.stderr, flush=True)
        async with anyio.create_task_group() as tg:
            for _ in range(FLOODERS):
                tg.start_soon(flood_sessions, http, url, until, seen, FLOODERS / session_rate)
            for _ in range(workers):
                tg.start_soon(wait_large, http, url, session, arg_bytes, until, seen)
    for sock in sockets:
        sock.close()
    print(json.dumps(dict(seen)), flush=True)


# ---------------------------------------------------------------------- the run


async def run(args: argparse.Namespace) -> int:
    box = _bench.sandbox()
    tmp = tempfile.mkdtemp(prefix="zr-abuse-")
    try:
        configure(box)
        gateway, info = spawn_gateway(box, tmp)
        url = info["mcp"]["vsphere"]
        try:
            with Peaks(gateway.pid) as peaks:
                await good_calls(url, 20)  # warm: the upstream's list, the caches
                _, rss_start = peaks.sample()
                cpu_before, phase_started = cpu_s(gateway.pid), time.monotonic()
                alone = await good_calls(url, args.calls)
                load_alone = os.getloadavg()[0]  # the machine's, other work included
                cpu_alone = (cpu_s(gateway.pid) - cpu_before) / (time.monotonic() - phase_started)
                abuser = subprocess.Popen(
                    [sys.executable, __file__, "--abuser", url, "--abuse-s", str(args.abuse_s),
                     "--arg-bytes", str(args.arg_bytes), "--workers", str(args.workers),
                     "--slow-headers", str(args.slow_headers),
                     "--session-rate", str(args.session_rate),
                     "--abuser-nice", str(args.abuser_nice),
                     *([] if args.abuser_cpu is None else ["--abuser-cpu", str(args.abuser_cpu)])],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                )  # fmt: skip
                assert abuser.stderr is not None
                abuser.stderr.readline()  # "abuser: ready"
                await anyio.sleep(args.warm_s)  # the flood reaches its caps
                cpu_before, phase_started = cpu_s(gateway.pid), time.monotonic()
                abuser_before = cpu_s(abuser.pid)
                beside = await good_calls(url, args.calls)
                load_beside = os.getloadavg()[0]
                phase_s = time.monotonic() - phase_started
                cpu = ((cpu_s(gateway.pid) - cpu_before) / phase_s,
                       (cpu_s(abuser.pid) - abuser_before) / phase_s)  # fmt: skip
                fds_during, rss_during = peaks.sample()
                out, _ = abuser.communicate(timeout=args.abuse_s + 120)
                await anyio.sleep(1.0)
                fds_after, rss_after = peaks.sample()
            report(args, alone, beside, json.loads(out.splitlines()[-1]), peaks,
                   (rss_start, rss_during, rss_after), (fds_during, fds_after))  # fmt: skip
            print(
                f"gateway CPU: {cpu_alone:.0%} of a core serving the good token alone, "
                f"{cpu[0]:.0%} beside the abuser; the abuser's own process {cpu[1]:.0%} "
                f"(the machine has {os.cpu_count()} cores; 1-minute load average "
                f"{load_alone:.1f} after the phase alone, {load_beside:.1f} after the one beside)"
            )
        finally:
            gateway.terminate()
            gateway.wait(timeout=10)
    finally:
        box.stop()
    p50 = pct(beside, 0.5) / pct(alone, 0.5)
    p99 = pct(beside, 0.99) / pct(alone, 0.99)
    return _bench.judge("p50 ratio", p50, RATIO_TARGET, unit="×") | _bench.judge(
        "p99 ratio", p99, RATIO_TARGET, unit="×"
    )


def report(
    args: argparse.Namespace,
    alone: list[float],
    beside: list[float],
    seen: dict[str, int],
    peaks: Peaks,
    rss: tuple[int, int, int],
    fds: tuple[int, int],
) -> None:
    print(f"good token: {args.calls} read-only calls a phase, one at a time, own session")
    print(f"abuser: {args.session_rate:g} abandoned sessions/s, {args.workers} workers of "
          f"{args.arg_bytes} B calls (each retried 1 s after a refusal), "
          f"{args.slow_headers} slow-header connections, {args.abuse_s:g} s, "
          f"its client at nice {args.abuser_nice}")  # fmt: skip
    _bench.table(
        ["good token", "p50 ms", "p99 ms"],
        [["alone", pct(alone, 0.5), pct(alone, 0.99)],
         ["beside the abuser", pct(beside, 0.5), pct(beside, 0.99)],
         ["ratio", pct(beside, 0.5) / pct(alone, 0.5), pct(beside, 0.99) / pct(alone, 0.99)]],
    )  # fmt: skip
    print("abuser got: " + ", ".join(f"{k}: {v}" for k, v in sorted(seen.items())))
    # What the abuser managed to send: at a lower priority on a busy machine it may fall
    # short of its rates, and then the run says less than it seems to.
    sent = {
        kind: sum(v for k, v in seen.items() if k.startswith(kind))
        for kind in ("initialize", "large call")
    }
    print(f"abuser sent: {sent['initialize'] / args.abuse_s:.0f} initialize/s "
          f"(asked {args.session_rate:g}), {sent['large call'] / args.abuse_s:.0f} large calls/s "
          f"(at most {args.workers} a second once refused)")  # fmt: skip
    print(f"gateway RSS: {rss[0] / 1024:.0f} MB warm, {rss[1] / 1024:.0f} MB under abuse, "
          f"peak {peaks.rss_kb / 1024:.0f} MB, {rss[2] / 1024:.0f} MB after")  # fmt: skip
    print(f"gateway fds: peak {peaks.fds}, {fds[0]} under abuse, {fds[1]} after")


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
        gateway, info = spawn_gateway(box, tmp)
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
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--abuse-s", type=float, default=40.0)
    parser.add_argument("--warm-s", type=float, default=3.0)
    parser.add_argument("--arg-bytes", type=int, default=900_000)
    parser.add_argument("--workers", type=int, default=300)
    parser.add_argument("--session-rate", type=float, default=400.0)
    parser.add_argument("--slow-headers", type=int, default=200)
    parser.add_argument("--abuser-nice", type=int, default=10)
    cpu = "run the abuser's client on this CPU alone, and the gateway and good client on the others"
    parser.add_argument("--abuser-cpu", type=int, metavar="N", default=None, help=cpu)
    parser.add_argument("--abuser", metavar="URL", help=argparse.SUPPRESS)
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
        anyio.run(abuse, args.abuser, args.abuse_s, args.arg_bytes, args.workers,
                  args.slow_headers, args.session_rate)  # fmt: skip
        return 0
    _bench.header("Reliability 16: an abusive token beside a good one", "bench_abuse.py")
    if args.abuser_cpu is not None:
        # Before the gateway starts, so it and its VM server inherit the other CPUs: the
        # abuser stands for a client on another machine, as an abusive agent would be.
        os.sched_setaffinity(0, os.sched_getaffinity(0) - {args.abuser_cpu})
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
