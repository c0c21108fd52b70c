"""Peer MCP gateways for bench_gateway.py: installed from their registries, run side by side.

Each peer stands in front of the same upstream (``_gw_upstream.py`` over stdio),
as this gateway does, and is measured in the same run, by the same client:

* ``mcp-proxy`` 0.13.0 from PyPI (Python, the official SDK), in a venv of its own;
* ``supergateway`` 4.0.0 from npm (Node), stdio → streamable HTTP, stateful, measured
  with 2025-11-25 sessions (see ``Peer.mode``);
* ``mcp-proxy`` 6.7.19 from npm (Node), stdio → streamable HTTP.

They are installed once into ``.cache/bench-peers/`` (ignored by git) with pip and
npm. One that cannot be installed (no registry, no network) or does not start is
named in the output with the reason, and the run goes on without it.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench-peers"
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 30.0

Argv = Callable[[int, list[str]], list[str]]


@dataclass(frozen=True)
class Peer:
    label: str
    registry: str  # "pypi" or "npm"
    package: str
    version: str
    argv: Argv  # (port, upstream argv) -> the peer's own argv
    path: str = "/mcp"
    # The SDK client's mode with it: "auto" takes 2026-07-28 where the peer serves it.
    # supergateway serves a 2026-07-28 request (no session) with a server started for it
    # alone, hundreds of ms each; its sessions (2025-11-25) keep one, as the others do.
    mode: str = "auto"


def _py_mcp_proxy(port: int, upstream: list[str]) -> list[str]:
    binary = str(CACHE / "py" / "bin" / "mcp-proxy")
    return [binary, "--port", str(port), "--host", "127.0.0.1", "--log-level", "WARNING",
            "--pass-environment", "--", *upstream]  # fmt: skip


def _supergateway(port: int, upstream: list[str]) -> list[str]:
    script = str(CACHE / "node" / "node_modules" / "supergateway" / "dist" / "index.js")
    return ["node", script, "--stdio", shlex.join(upstream), "--outputTransport",
            "streamableHttp", "--stateful", "--port", str(port), "--logLevel", "none"]  # fmt: skip


def _npm_mcp_proxy(port: int, upstream: list[str]) -> list[str]:
    script = str(CACHE / "node" / "node_modules" / "mcp-proxy" / "dist" / "bin" / "mcp-proxy.mjs")
    return ["node", script, "--port", str(port), "--host", "127.0.0.1", "--server", "stream",
            "--", *upstream]  # fmt: skip


PEERS = (
    Peer("`mcp-proxy` 0.13.0 (Python)", "pypi", "mcp-proxy", "0.13.0", _py_mcp_proxy),
    Peer(
        "`supergateway` 4.0.0 (Node)", "npm", "supergateway", "4.0.0", _supergateway, mode="legacy"
    ),
    Peer("`mcp-proxy` 6.7.19 (npm)", "npm", "mcp-proxy", "6.7.19", _npm_mcp_proxy),
)


def _run(argv: list[str]) -> str | None:
    """None when ``argv`` succeeds; else the last lines it printed."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                              check=False, cwd=CACHE)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return " / ".join(tail) or f"exit {done.returncode}"


def _installed(peer: Peer) -> bool:
    if peer.registry == "pypi":
        return (CACHE / "py" / "bin" / peer.package).exists() and _py_version(peer)
    manifest = CACHE / "node" / "node_modules" / peer.package / "package.json"
    return manifest.exists() and f'"version": "{peer.version}"' in manifest.read_text()


def _py_version(peer: Peer) -> bool:
    dist = f"lib/python*/site-packages/mcp_proxy-{peer.version}.dist-info"
    return any((CACHE / "py").glob(dist))


def install() -> dict[str, str]:
    """Install every peer not installed yet; {label: why not} for those that failed."""
    CACHE.mkdir(parents=True, exist_ok=True)
    failed: dict[str, str] = {}
    npm = [p for p in PEERS if p.registry == "npm" and not _installed(p)]
    if npm:
        why = _run(["npm", "install", "--prefix", "node", "--no-audit", "--no-fund",
                    *[f"{p.package}@{p.version}" for p in npm]])  # fmt: skip
        failed.update({p.label: why for p in npm if why is not None and not _installed(p)})
    for peer in (p for p in PEERS if p.registry == "pypi" and not _installed(p)):
        why = None
        if not (CACHE / "py" / "bin" / "pip").exists():
            why = _run([sys.executable, "-m", "venv", "py"])
        why = why or _run([str(CACHE / "py" / "bin" / "pip"), "install", "-q",
                           f"{peer.package}=={peer.version}"])  # fmt: skip
        if why is not None or not _installed(peer):
            failed[peer.label] = why or "installed, but not at the version asked"
    return failed


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(peer: Peer, upstream: list[str], err: str) -> tuple[subprocess.Popen[bytes], str]:
    """The peer, listening; (process, its MCP endpoint). RuntimeError if it does not listen."""
    port = free_port()
    env = {**os.environ, "NODE_ENV": "production"}
    with open(err, "wb") as fh:
        proc = subprocess.Popen(peer.argv(port, upstream), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=fh, env=env)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}{peer.path}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                tail = Path(err).read_text(errors="replace")[-300:].strip()
                msg = f"did not listen within {START_TIMEOUT_S:g} s: {tail}"
                raise RuntimeError(msg) from None
            time.sleep(0.1)
