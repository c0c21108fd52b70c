"""A private redis-server for tests: Debian's binary, on a free loopback port, no persistence.

Each test module that needs Redis starts its own (a module fixture in its ``conftest.py``), so
tests never share data with a developer's Redis or with each other's modules,
and a test may stop its server to see what the guard does without it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType

import pytest
import redis

from support.ports import free_port

_START_TIMEOUT_S = 10.0


class RedisServer:
    """One redis-server process listening on 127.0.0.1 only."""

    def __init__(
        self,
        directory: Path,
        *,
        password: str | None = None,
        socket_perm: int | None = None,
        socket_dir: Path | None = None,
    ) -> None:
        self.directory = directory
        self.password = password
        # Also listen on ``socket_path`` (in ``socket_dir``) with these permissions.
        self.socket_perm = socket_perm
        self.socket_dir = socket_dir or directory
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://[:password@]127.0.0.1:<port>/0``."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> Path:
        """The unix socket, when ``socket_perm`` was given."""
        return self.socket_dir / "redis.sock"

    def client(self) -> redis.Redis:
        """A plain redis-py client for arranging and inspecting data."""
        return redis.Redis.from_url(self.url, socket_timeout=5.0)

    def start(self) -> None:
        """Start the server; a port taken between choosing and binding gets another try."""
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is missing: apt-get install redis-server")
        for _attempt in range(5):
            self.port = free_port()
            args = [
                binary,
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.directory),
                "--logfile", str(self.directory / "redis.log"),
            ]  # fmt: skip
            if self.password:
                args += ["--requirepass", self.password]
            if self.socket_perm is not None:
                perm = f"{self.socket_perm:o}"
                args += ["--unixsocket", str(self.socket_path), "--unixsocketperm", perm]
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
            if self._wait_ready():
                return
            self.stop()
        log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        pytest.fail(f"redis-server did not start; its log ends:\n{log}")

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def flush(self) -> None:
        """Empty every database."""
        with self.client() as client:
            client.flushall()

    def _wait_ready(self) -> bool:
        give_up = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < give_up:
            if self._proc is None or self._proc.poll() is not None:
                return False  # exited: most likely the port was taken meanwhile
            try:
                with self.client() as client:
                    if client.ping():
                        return True
            except redis.RedisError:
                time.sleep(0.05)
        return False

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
