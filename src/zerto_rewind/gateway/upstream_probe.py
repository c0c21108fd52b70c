"""Can a stdio upstream start as its user? Checked before anything depends on it.

Two checks, both through the launcher (:mod:`.confine`), so they see what the
server will see: the same user, no supplementary groups, the same environment.

- :func:`check_reachable` (gateway start-up): the launcher, as the upstream's
  user, walks the way to the command (each directory, each symbolic link and its
  target, a script's interpreter) and runs nothing. A confined upstream that
  could not start stops the gateway with the first path its user cannot pass,
  instead of a ready gateway whose server fails on every retry.
- :func:`probe_start` (``install mcp-host --upstream-user``, ``doctor``): starts
  the server for real, sends the MCP ``initialize`` request, and stops it (its
  whole process group) at the answer or after a short timeout.

The server's own stderr is not shown (it may hold anything); the launcher's own
line is, and the last line of the server's stderr, redacted, when it exited early.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import ConfigError
from .confine import LAUNCHER_PREFIX, launcher_argv
from .upstream_log import Redactor
from .upstream_user import (
    UpstreamIdentity,
    confined_argv,
    private_dir,
    stdio_env,
    upstream_identity,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..config.settings import Settings, UpstreamSettings

__all__ = ["ProbeResult", "check_reachable", "probe_start"]

_CHECK_TIMEOUT_S = 10.0
_STOP_GRACE_S = 2.0
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "zerto-rewind-probe", "version": "1"},
    },
}


def check_reachable(settings: Settings, names: Iterable[str]) -> None:
    """Refuse to serve a confined stdio upstream whose user cannot reach its command."""
    for name in names:
        spec = settings.upstreams[name]
        if spec.command is None or spec.user is None:
            continue
        identity = upstream_identity(spec, settings.path)
        program = spec.command[0]
        if "/" in program and not os.path.isabs(program):
            continue  # relative to its private directory, which does not exist yet
        ids = {"uid": identity.uid, "gid": identity.gid}
        argv = launcher_argv(spec.command, **ids, cwd="/", parent=os.getpid(), check=True)
        env = stdio_env(spec, identity, "/")
        try:
            done = subprocess.run(
                argv, env=env, capture_output=True, text=True, timeout=_CHECK_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            msg = f"upstream {name!r}: could not check that its user can run it ({exc})"
            raise ConfigError(msg, path=settings.path, key=f"upstreams.{name}.command") from None
        if done.returncode == 0:
            continue
        said = _launcher_line(done.stderr) or f"the check exited with {done.returncode}"
        msg = (
            f"upstream {name!r} cannot start: {said}. Make each directory on that way "
            f"searchable by {identity.label} (chmod o+x), or install the server where that "
            "user can reach it (a venv made with `python3 -m venv --copies` under /opt)"
        )
        raise ConfigError(msg, path=settings.path, key=f"upstreams.{name}.command")


@dataclass(frozen=True)
class ProbeResult:
    """What a trial start showed: ``ok`` (answered), ``slow`` (runs, no answer yet), ``failed``."""

    outcome: Literal["ok", "slow", "failed"]
    detail: str


def probe_start(
    spec: UpstreamSettings, identity: UpstreamIdentity, timeout_s: float
) -> ProbeResult:
    """Start ``spec``'s server as ``identity``, ask ``initialize``, then stop it."""
    assert spec.command is not None  # callers pass stdio upstreams only
    who = identity.label
    with private_dir(spec, identity) as home:
        argv = confined_argv(spec.command, identity, home)
        try:
            proc = subprocess.Popen(
                argv,
                env=stdio_env(spec, identity, home),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return ProbeResult("failed", f"the launcher did not start: {exc.strerror}")
        answer = None
        try:
            answer = _initialize(proc, timeout_s)
            if answer is None:  # its output closed (it is exiting), or the time is up
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_STOP_GRACE_S if proc.stdout is None or proc.stdout.closed else 0)
        finally:
            running = _stop(proc)
        try:
            stderr = proc.communicate(timeout=_STOP_GRACE_S)[1].decode("utf-8", "replace")
        except subprocess.TimeoutExpired:  # a child that left the group holds the pipe
            stderr = ""
    if answer is not None:
        return ProbeResult("ok", f"started as {who} and answered initialize ({answer})")
    if not running:
        said = _launcher_line(stderr) or _last_line(stderr, spec.env.values())
        return ProbeResult("failed", f"as {who}, it exited ({proc.returncode}): {said}")
    return ProbeResult(
        "slow", f"started as {who}, but did not answer initialize within {timeout_s:g} s"
    )


def _initialize(proc: subprocess.Popen[bytes], timeout_s: float) -> str | None:
    """Send ``initialize``; the server's name and version from its answer, or None."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
    except OSError:
        return None  # it is gone already: its exit says why
    deadline = time.monotonic() + timeout_s
    buffered = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                proc.stdout.close()  # it closed its output: it is exiting
                return None
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                named = _answer(line)
                if named is not None:
                    return named
    return None


def _answer(line: bytes) -> str | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None  # not JSON-RPC: noise on stdout
    if not isinstance(message, dict) or message.get("id") != 1:
        return None
    if "error" in message:
        return "an error answer, but it speaks MCP"
    info = (message.get("result") or {}).get("serverInfo") or {}
    return f"{info.get('name', 'a server')} {info.get('version', '')}".strip()


def _stop(proc: subprocess.Popen[bytes]) -> bool:
    """SIGTERM to its process group, SIGKILL after a grace period; was it still running?"""
    running = proc.poll() is None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            continue
    return running


def _launcher_line(stderr: str) -> str | None:
    lines = [ln for ln in stderr.splitlines() if ln.startswith(LAUNCHER_PREFIX)]
    return lines[-1].removeprefix(LAUNCHER_PREFIX) if lines else None


def _last_line(stderr: str, secrets: Iterable[str]) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if not lines:
        return "it printed nothing on stderr"
    return "its last line on stderr: " + Redactor(secrets)(lines[-1])[:300]
