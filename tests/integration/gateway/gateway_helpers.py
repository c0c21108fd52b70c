"""Helpers for the gateway's tests: a sandbox config with upstreams, a gateway process, a client;
what several test modules share (the rug-pull and traced stand-ins, /metrics samples, raw
sockets to the listener) lives here too, never in a test module."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from support.users import as_user
from zerto_rewind.gateway.http import token_digest
from zerto_rewind.testing import Sandbox

STAND_IN = Path(__file__).resolve().parents[2] / "e2e" / "vm_mcp_server.py"
TOKENS = {"agent-a": "token-a-0123456789", "agent-b": "token-b-0123456789"}
# A gateway.metrics_clients token: reads /metrics and /healthz's details.
METRICS_TOKEN = "token-metrics-0123456789"
METRICS_HEADERS = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def stand_in_upstream(box: Sandbox, actions_log: Path) -> dict[str, Any]:
    """The stand-in vSphere server as a stdio upstream; it records each call that reaches it."""
    assert box.sim.ca_bundle is not None
    return {
        "command": [sys.executable, str(STAND_IN)],
        "env": {
            "E2E_VM_ACTIONS_LOG": str(actions_log),
            "E2E_SIM_URL": box.sim.url,
            "E2E_SIM_CA": box.sim.ca_bundle,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        "timeout_s": 10,
    }


def legacy_upstream(box: Sandbox, actions_log: Path, **env: str) -> dict[str, Any]:
    """The stand-in as a handshake-era server (legacy_server.py); ``env`` sets its knobs
    (``LEGACY_START_DELAY_S``, ``LEGACY_DISCOVERS``)."""
    upstream = stand_in_upstream(box, actions_log)
    upstream["command"] = [sys.executable, str(Path(__file__).with_name("legacy_server.py"))]
    upstream["env"].update(env)
    return upstream


def gateway_config(
    box: Sandbox,
    actions_log: Path | None = None,
    *,
    upstream: dict[str, Any] | None = None,
    **extra: Any,
) -> str:
    """Rewrite the sandbox config with a `vsphere` upstream and the test clients' digests.

    The upstream is the stand-in server recording to ``actions_log``, or ``upstream``.
    """
    if upstream is None:
        assert actions_log is not None, "the stand-in upstream records to actions_log"
        upstream = stand_in_upstream(box, actions_log)
    gateway: dict[str, Any] = {
        "clients": {name: token_digest(tok) for name, tok in TOKENS.items()},
        "metrics_clients": {"prometheus": token_digest(METRICS_TOKEN)},
    }
    gateway.update(extra.pop("gateway", {}))
    return box.write_config(
        upstreams={"vsphere": upstream},
        gateway=gateway,
        state_dir=box.state_dir,
        log=box.log_path,
        **extra,
    )


def actions(actions_log: Path) -> list[dict[str, Any]]:
    """Every call that reached the stand-in server."""
    if not actions_log.exists():
        return []
    return [json.loads(line) for line in actions_log.read_text().splitlines() if line.strip()]


def log_lines(box: Sandbox) -> list[dict[str, Any]]:
    """Every line of the decision log: decisions, approval events, results."""
    return box.log_records()


def decisions(box: Sandbox) -> list[dict[str, Any]]:
    """The log's lines without the forwarded calls' result lines (``results``)."""
    return box.decision_records()


def results(box: Sandbox) -> list[dict[str, Any]]:
    """The result lines of the calls the gateway forwarded (core/call_result.py)."""
    return box.result_records()


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    url: str
    mcp: dict[str, str]
    stderr: Path
    info: dict[str, Any] | None = None

    def endpoint(self, name: str = "vsphere") -> str:
        return self.mcp[name]


# The conftest's start_gateway fixture: start_gateway(**config) -> a running gateway.
StartGateway = Callable[..., GatewayProcess]


@contextmanager
def gateway_process(
    box: Sandbox,
    tmp: Path,
    *,
    listen: str = "127.0.0.1:0",
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> Iterator[GatewayProcess]:
    """`zerto-rewind gateway --listen` as a child process, until the block ends."""
    ready = tmp / "gateway-ready.json"
    stderr = tmp / "gateway.stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zerto_rewind",
                "gateway",
                "--listen",
                listen,
                "--ready-file",
                str(ready),
                "--allow-privileged-upstream",  # the stand-in upstreams run as the tests' user
                *extra_args,
            ],
            env=env if env is not None else box.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=preexec,  # e.g. a lower descriptor limit for the child alone
        )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway did not start: {stderr.read_text()}")
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        yield GatewayProcess(proc, info["url"], info["mcp"], stderr, info)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def client(url: str, token: str | None, **kwargs: Any) -> AsyncIterator[Client]:
    """The SDK's own client over streamable HTTP, with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, **kwargs) as c,
    ):
        yield c


def stdio_gateway(box: Sandbox, **kwargs: Any) -> Client:
    """The SDK's client starting `gateway --stdio --upstream vsphere`, as a host does.

    ``kwargs`` go to the client (``client_info``, ``mode``).
    """
    args = ["-m", "zerto_rewind", "gateway", "--stdio", "--upstream", "vsphere"]
    args.append("--allow-privileged-upstream")  # the stand-in upstreams run as the tests' user
    params = StdioServerParameters(command=sys.executable, args=args, env=box.env())
    return Client(params, cache=None, **kwargs)


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def environ_without_ours() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}


def approvals_cli(*args: str, env: dict[str, str] | None = None, user: str | None = None) -> Any:
    """``zerto-rewind approvals ARGS`` as a person runs it (optionally as another unix user).

    Another user runs it in a mount namespace of its own where this checkout is reachable
    (``support.users.as_user``).
    """
    argv = [sys.executable, "-m", "zerto_rewind", "approvals", *args]
    env = env if env is not None else environ_without_ours()
    if user is not None:
        return as_user(user, argv, env=env)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


# ---- the rug-pull stand-in (test_gateway_pins, the fast lane's tests)

RUG_PULL_SERVER = Path(__file__).with_name("rug_pull_server.py")
RUG_PASSWORD = "vc-Pa55-rug-7f3e9c"  # the stand-in's credential, to be redacted


def rug_pull_upstream(actions_log: Path) -> dict[str, Any]:
    """The rug-pull stand-in (rug_pull_server.py) as a stdio upstream; it records each call."""
    return {
        "command": [sys.executable, str(RUG_PULL_SERVER)],
        "env": {
            "RUG_ACTIONS": str(actions_log),
            "RUG_PASSWORD": RUG_PASSWORD,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        "timeout_s": 10,
    }


def scan_rug_pull(actions_log: Path) -> dict[str, Any]:
    """`zerto-rewind catalog scan` of the stand-in, as an operator runs it before review."""
    env = {**os.environ, "RUG_ACTIONS": str(actions_log), "RUG_PASSWORD": RUG_PASSWORD}
    done = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "catalog", "scan", "--server", "vsphere",
         "--quiet", "--", sys.executable, str(RUG_PULL_SERVER)],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    scanned: dict[str, Any] = json.loads(done.stdout)
    return scanned


def configure_rug_pull(
    box: Sandbox, actions_log: Path, pins: dict[str, str] | None, **extra: Any
) -> None:
    """A gateway config in front of the rug-pull stand-in, with these catalog pins."""
    catalog = {"pins": pins} if pins is not None else {}
    gateway_config(
        box,
        upstream=rug_pull_upstream(actions_log),
        # The review: the glob that a rug pull would slip list_and_delete_vms under.
        read_only_tools=[
            "mcp__vsphere__list_*",
            "mcp__vsphere__upgrade",
            "mcp__vsphere__inventory",
        ],
        tools={"mcp__vsphere__power_off_vm": {"vm_arg": "name"}},
        catalog=catalog,
        **extra,
    )


def ran_tools(actions_log: Path) -> list[str]:
    """The tools that reached the rug-pull stand-in, in order."""
    if not actions_log.exists():
        return []
    return [json.loads(line)["tool"] for line in actions_log.read_text().splitlines()]


def metric(url: str, name: str, **labels: str) -> float | None:
    """One sample of the gateway's /metrics, or None when it has no such series."""
    text = httpx.get(f"{url}/metrics", headers=METRICS_HEADERS, timeout=10).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_metric(url: str, name: str, value: float, **labels: str) -> None:
    """Wait up to 15 s for a /metrics sample to become ``value``."""
    deadline = time.monotonic() + 15
    while metric(url, name, **labels) != value:
        assert time.monotonic() < deadline, f"{name}{labels} never became {value}"
        time.sleep(0.1)


# ---- the traced stand-in (test_gateway_tracing, the fast lane's tests)

TRACED_SERVER = Path(__file__).with_name("traced_server.py")
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def traced_upstream(record: Path) -> dict[str, Any]:
    """traced_server.py as a stdio upstream: it records the trace context each call carries."""
    return {
        "command": [sys.executable, str(TRACED_SERVER)],
        "env": {"TRACED_ACTIONS": str(record), "PYTHONDONTWRITEBYTECODE": "1"},
        "timeout_s": 10,
    }


# ---- raw sockets to the listener (test_gateway_listener*, the TLS listener's tests)


def port_of(gw: GatewayProcess) -> int:
    """The TCP port a gateway process listens on."""
    port = urlsplit(gw.url).port
    assert port is not None
    return port


def connect(gw: GatewayProcess, source: str = "127.0.0.1") -> socket.socket:
    """A raw client socket to the gateway from the loopback address ``source``."""
    return socket.create_connection(
        ("127.0.0.1", port_of(gw)), timeout=5, source_address=(source, 0)
    )


def read_until_closed(sock: socket.socket, seconds: float) -> tuple[bytes, bool]:
    """What the gateway sent, and whether it closed the connection within ``seconds``."""
    data = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def closed_by_gateway(socks: list[socket.socket], seconds: float) -> dict[int, bytes]:
    """Which of ``socks`` (by index) the gateway closed within ``seconds``, and what it sent."""
    poller = select.poll()
    by_fd = {s.fileno(): n for n, s in enumerate(socks)}
    for fd in by_fd:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    closed: dict[int, bytes] = {}
    data: dict[int, bytes] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(closed) < len(socks):
        for fd, _ in poller.poll(100):
            n = by_fd[fd]
            try:
                chunk = socks[n].recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                chunk = b""
            if chunk:
                data[n] = data.get(n, b"") + chunk
                continue
            closed[n] = data.get(n, b"")
            poller.unregister(fd)
    return closed
