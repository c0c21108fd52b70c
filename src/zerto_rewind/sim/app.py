"""SimServer (in-process) and ``main(argv)`` (the ``zerto-rewind sim`` command)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from zerto_rewind.errors import describe
from zerto_rewind.sim.certs import write_certs
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.dispatch import SimHTTPServer
from zerto_rewind.sim.enums import SITE_KINDS
from zerto_rewind.sim.estate import EstateError
from zerto_rewind.sim.faults import FaultTable
from zerto_rewind.sim.handlers import Context
from zerto_rewind.sim.state import Backend


class SimServer:
    """A simulated ZVM 10.x on a real socket.

    >>> with SimServer(SimConfig(port=0)) as sim:  # doctest: +SKIP
    ...     httpx.get(f"{sim.url}/v1/vpgs", verify=ssl.create_default_context(cafile=sim.ca_bundle))
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.state = Backend(self.config)
        self.faults = FaultTable()
        self._httpd: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._ca: Path | None = None

    def start(self) -> SimServer:
        """Bind, generate the certificate if TLS, and serve in a daemon thread."""
        tls = self._tls_context() if self.config.tls else None
        address = (self.config.host, self.config.port)
        self._httpd = SimHTTPServer(address, Context(self.state, self.faults), tls)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="zerto-sim",
            daemon=True,
        )
        self._thread.start()
        return self

    def _tls_context(self) -> ssl.SSLContext:
        directory = self.config.cert_dir
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="zerto-sim-")
            directory = Path(self._tmp.name)
        files = write_certs(directory, self.config.host)
        self._ca = files.ca
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(files.cert, files.key)
        return context

    def stop(self) -> None:
        """Stop serving, release held requests and cut open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.faults.stop()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SimServer:
        return self.start() if self._httpd is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            msg = "the simulator is not running"
            raise RuntimeError(msg)
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``https://127.0.0.1:54321``."""
        host = self.config.host
        # A wildcard bind is reachable on loopback; that is the URL to hand out.
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)  # noqa: S104
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.config.tls else 'http'}://{host}:{self.port}"

    @property
    def ca_bundle(self) -> str | None:
        """Path of the CA certificate to trust (None over plain HTTP)."""
        return None if self._ca is None else str(self._ca)

    @property
    def credentials(self) -> dict[str, Any]:
        """The ready-file fields: url, ca_bundle, client id/secret, username/password."""
        return {
            "url": self.url,
            "ca_bundle": self.ca_bundle,
            "client_id": self.config.client_id,
            "client_secret": self.config.client_secret,
            "username": self.config.username,
            "password": self.config.password,
        }


def _cadence(text: str) -> tuple[str, float]:
    kind, _, seconds = text.partition("=")
    kind = kind.strip().lower()
    try:
        value = float(seconds)
    except ValueError:
        value = 0.0
    if kind not in SITE_KINDS or value <= 0:
        msg = f"expected KIND=SECONDS with KIND in {', '.join(SITE_KINDS)}, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return kind, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zerto-rewind sim", description="Run a simulated ZVM 10.x.")
    add = p.add_argument
    add("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    add("--port", type=int, default=0, help="port (default 0: pick a free one)")
    add("--plain-http", action="store_true", help="serve plain HTTP instead of HTTPS")
    add("--cert-dir", type=Path, help="where to write ca.pem and the server certificate")
    add("--ready-file", type=Path, help="write url and credentials here once serving")
    add("--estate", type=Path, help="estate JSON file (default: the built-in estate)")
    add("--vms", type=int, default=0, help="add N generated VMs vm-00001...")
    add("--vms-per-vpg", type=int, default=1, help="generated VMs per VPG (default 1)")
    add("--cadence", type=_cadence, action="append", default=[], metavar="KIND=SECONDS")
    add("--tag-lag", type=float, default=1.0, help="seconds after a boundary a tag lands")
    add("--task-duration", type=float, default=0.3, help="seconds a task runs")
    add("--token-ttl", type=int, default=300, help="access token lifetime in seconds")
    add("--jitter", type=float, default=0.03, help="cadence jitter fraction (0: none)")
    add("--history-minutes", type=int, default=60, help="journal history (default 60)")
    add("--status-numbering", choices=("docs", "community"), default="docs")
    add("--seed", type=int, help="fix phases and ids for repeatable runs")
    add("--client-id", default="zerto-rewind-sim")
    add("--client-secret", default=os.environ.get("ZERTO_SIM_CLIENT_SECRET"))
    add("--username", default="admin")
    add("--password", default=os.environ.get("ZERTO_SIM_PASSWORD"))
    return p


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """A SimConfig from parsed command-line arguments."""
    config = SimConfig(
        host=args.host,
        port=args.port,
        tls=not args.plain_http,
        cert_dir=args.cert_dir,
        estate_file=args.estate,
        vms=args.vms,
        vms_per_vpg=args.vms_per_vpg,
        cadences=dict(args.cadence),
        jitter=args.jitter,
        tag_lag_s=args.tag_lag,
        task_duration_s=args.task_duration,
        token_ttl_s=args.token_ttl,
        history_minutes=args.history_minutes,
        status_numbering=args.status_numbering,
        seed=args.seed,
        client_id=args.client_id,
        username=args.username,
    )
    if args.client_secret:
        config.client_secret = args.client_secret
    if args.password:
        config.password = args.password
    return config


def write_ready_file(path: Path, fields: dict[str, Any]) -> None:
    """Write the ready file atomically (temp + rename), owner-only: it holds secrets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(fields, out, indent=2)
    os.replace(temp, path)


def main(argv: list[str] | None = None) -> int:
    """Run the simulator until SIGINT/SIGTERM; exit 0 then, 2 on a bad estate."""
    args = _parser().parse_args(argv)
    try:
        server = SimServer(config_from_args(args)).start()
    # Reported here, in the CLI's one format, not at its edge: `python -m zerto_rewind.sim`
    # runs this without the CLI, and a bad estate has its own documented exit code, 2.
    except EstateError as exc:
        print(f"zerto-rewind sim: {describe(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        problem = f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        print(f"zerto-rewind sim: {problem} — choose another --port or --host", file=sys.stderr)
        return 1
    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.ready_file is not None:
        write_ready_file(args.ready_file, server.credentials)
    print(f"zerto-rewind sim: serving {server.url}", file=sys.stderr, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0
