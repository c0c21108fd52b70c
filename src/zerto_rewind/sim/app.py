"""SimServer (in-process) and ``main(argv)`` (the ``zerto-rewind sim`` command)."""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import ssl
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from zerto_rewind.errors import describe
from zerto_rewind.sim import vsphere
from zerto_rewind.sim.auth import Credentials
from zerto_rewind.sim.certs import CertFiles, write_certs
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.dispatch import SimHTTPServer
from zerto_rewind.sim.enums import SITE_KINDS
from zerto_rewind.sim.estate import EstateError
from zerto_rewind.sim.faults import FaultTable
from zerto_rewind.sim.handlers import Context
from zerto_rewind.sim.replica import Replica, attach, link_estate
from zerto_rewind.sim.state import Backend, World, load_config_estate

if TYPE_CHECKING:
    from zerto_rewind.sim.vmstate import VcenterLink


def _free_host(host: str) -> str:
    """The URL host of a bind address: a wildcard bind is reachable on loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)  # noqa: S104
    return f"[{host}]" if ":" in host else host


class SimSite:
    """One simulated ZVM: its backend (a view of the shared estate), faults and socket.

    A ``down`` fault closes its listening socket (connections are refused) and
    clearing it listens again on the same port.
    """

    def __init__(self, server: SimServer, backend: Backend, port: int) -> None:
        self.server = server
        self.backend = backend
        self.faults = FaultTable()
        self.faults.on_connection = self._connection_fault
        self.name = backend.local.name
        self.ctx = Context(backend, self.faults, self.name, server.contexts, server.config.tls)
        self._port = port
        self._httpd: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._listening = threading.Lock()

    @property
    def credentials(self) -> Credentials:
        """This ZVM's client and user."""
        return self.backend.tokens.credentials

    def listen(self) -> None:
        """Bind (the same port again after a ``down``) and serve in a daemon thread."""
        config = self.server.config
        self._httpd = SimHTTPServer(
            (config.host, self._port), self.ctx, self.server.tls, self.server.wrong_tls
        )
        self._port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"zerto-sim-{self.name}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop listening and cut the open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def stop(self) -> None:
        """Stop for good: release held requests, then close."""
        self.faults.on_connection = None
        self.faults.stop()
        with self._listening:
            self.close()

    def _connection_fault(self, kind: str | None) -> None:
        with self._listening:
            if kind == "down" and self._httpd is not None:
                self.close()
            elif kind != "down" and self._httpd is None and not self.faults.stopping:
                self.listen()

    @property
    def port(self) -> int:
        """The port (kept while the site is down)."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``https://127.0.0.1:54321``."""
        scheme = "https" if self.server.config.tls else "http"
        return f"{scheme}://{_free_host(self.server.config.host)}:{self.port}"

    @property
    def ready(self) -> dict[str, Any]:
        """Its entry under ``sites`` in the ready file."""
        creds = self.credentials
        return {
            "url": self.url,
            "client_id": creds.client_id,
            "client_secret": creds.client_secret,
            "ca_bundle": self.server.ca_bundle,
            "username": creds.username,
            "password": creds.password,
            "site_identifier": self.backend.local.identifier,
            "kind": self.backend.local.kind,
        }


class SimServer:
    """A simulated ZVM 10.x on a real socket; one per ``"zvm": true`` site of an estate.

    ``state`` and ``faults`` are the first ZVM's (the only one of a one-ZVM estate);
    ``sites`` has every ZVM by site name.

    >>> with SimServer(SimConfig(port=0)) as sim:  # doctest: +SKIP
    ...     httpx.get(f"{sim.url}/v1/vpgs", verify=ssl.create_default_context(cafile=sim.ca_bundle))
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.world, self.replica = _world(self.config)
        self.contexts: dict[str, Context] = {}
        self.sites: dict[str, SimSite] = {}
        zvms = self.world.estate.zvms
        for i, name in enumerate(zvms or (None,)):
            backend = Backend(
                self.config, world=self.world, site=name, credentials=self._credentials(i, name)
            )
            port = self.config.port + i if self.config.port and i else self.config.port
            site = SimSite(self, backend, port)
            self.sites[site.name] = site
            self.contexts[site.name.lower()] = site.ctx
        self.first = next(iter(self.sites.values()))
        self.state = self.first.backend
        self.faults = self.first.faults
        self.tls: ssl.SSLContext | None = None
        self._running = False
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._cert_dir: Path | None = None
        self._ca: Path | None = None
        self._wrong_tls: ssl.SSLContext | None = None

    def _credentials(self, index: int, name: str | None) -> Credentials | None:
        """The first ZVM has the config's credentials; every other its own client and secrets."""
        if name is None:
            return None
        declared = self.world.estate.site(name).client_id
        if index == 0:
            own = Credentials.of(self.config)
            return None if declared is None else replace(own, client_id=declared)
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        return Credentials(
            declared or f"{self.config.client_id}-{slug}",
            secrets.token_urlsafe(18),
            self.config.username,
            secrets.token_urlsafe(18),
        )

    @property
    def multi_site(self) -> bool:
        """Whether the estate has a ZVM per ``"zvm": true`` site."""
        return self.world.estate.multi_site

    def site(self, name: str) -> SimSite:
        """The ZVM of a site (case-insensitive name); KeyError naming the sites."""
        for site in self.sites.values():
            if site.name.lower() == name.lower():
                return site
        msg = f"no simulated ZVM site {name!r} (sites: {', '.join(self.sites)})"
        raise KeyError(msg)

    def start(self) -> SimServer:
        """Bind, generate the certificate if TLS, and serve each ZVM in a daemon thread."""
        self.tls = self._tls_context() if self.config.tls else None
        started: list[SimSite] = []
        try:
            for site in self.sites.values():
                site.listen()
                started.append(site)
        except OSError:
            for site in started:
                site.stop()
            raise
        if self.replica is not None:
            self.replica.start()
        self._running = True
        return self

    def _tls_context(self) -> ssl.SSLContext:
        directory = self.config.cert_dir
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="zerto-sim-")
            directory = Path(self._tmp.name)
        self._cert_dir = directory
        files = write_certs(directory, self.config.host)
        self._ca = files.ca
        return _server_context(files)

    def wrong_tls(self) -> ssl.SSLContext:
        """A server context whose certificate another CA signed (the ``wrong_cert`` fault)."""
        if self._wrong_tls is None:
            assert self._cert_dir is not None
            files = write_certs(self._cert_dir / "wrong-ca", self.config.host)
            self._wrong_tls = _server_context(files)
        return self._wrong_tls

    def stop(self) -> None:
        """Stop serving, release held requests and cut open connections."""
        if not self._running:
            return
        self._running = False
        for site in self.sites.values():
            site.stop()
        if self.replica is not None:
            self.replica.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SimServer:
        return self.start() if not self._running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (of the first ZVM)."""
        return self._running_first().port

    @property
    def url(self) -> str:
        """Base URL of the first ZVM, e.g. ``https://127.0.0.1:54321``."""
        return self._running_first().url

    def _running_first(self) -> SimSite:
        if not self._running:
            msg = "the simulator is not running"
            raise RuntimeError(msg)
        return self.first

    @property
    def ca_bundle(self) -> str | None:
        """Path of the CA certificate to trust (None over plain HTTP); one CA for every ZVM."""
        return None if self._ca is None else str(self._ca)

    @property
    def credentials(self) -> dict[str, Any]:
        """The ready-file fields: url, ca_bundle, client id/secret, username/password.

        A multi-site estate adds ``sites``: every ZVM's url, client, CA and site id.
        """
        creds = self.first.credentials
        fields: dict[str, Any] = {
            "url": self.url,
            "ca_bundle": self.ca_bundle,
            "client_id": creds.client_id,
            "client_secret": creds.client_secret,
            "username": creds.username,
            "password": creds.password,
        }
        if self.multi_site:
            fields["sites"] = {name: site.ready for name, site in self.sites.items()}
        return fields


def _world(config: SimConfig) -> tuple[World, Replica | None]:
    """The estate, its VMs given their vCenter identity when ``config.vcenter`` links one."""
    if config.vcenter_link is not None:
        link: VcenterLink = config.vcenter_link
        where = "in memory"
    elif config.vcenter is not None:
        link, where = vsphere.connect(config.vcenter), config.vcenter.display
    else:
        return World(config), None
    try:
        estate, linked = link_estate(load_config_estate(config), link)
        world = World(config, estate)
    except BaseException:
        link.close()
        raise
    world.replica = attach(world.vpgs.values(), world.clock, link)
    names = ", ".join(sorted(linked)) or "none"
    print(
        f"zerto-rewind sim: linked to vCenter {where}; VMs: {names}",
        file=sys.stderr,
        flush=True,
    )
    return world, world.replica


def _server_context(files: CertFiles) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert, files.key)
    return context


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
    add(
        "--estate",
        dest="estate_file",
        metavar="ESTATE",
        type=Path,
        help="estate JSON file, or a packaged one by name (three-sites); default: built-in",
    )
    add("--vms", type=int, default=0, help="add N generated VMs vm-00001...")
    add("--vms-per-vpg", type=int, default=1, help="generated VMs per VPG (default 1)")
    add("--cadence", type=_cadence, action="append", default=[], metavar="KIND=SECONDS")
    add(
        "--tag-lag",
        dest="tag_lag_s",
        metavar="TAG_LAG",
        type=float,
        default=1.0,
        help="seconds after a boundary a tag lands",
    )
    add(
        "--task-duration",
        dest="task_duration_s",
        metavar="TASK_DURATION",
        type=float,
        default=0.3,
        help="seconds a task runs",
    )
    add(
        "--token-ttl",
        dest="token_ttl_s",
        metavar="TOKEN_TTL",
        type=int,
        default=300,
        help="access token lifetime in seconds",
    )
    add("--jitter", type=float, default=0.03, help="cadence jitter fraction (0: none)")
    add("--history-minutes", type=int, default=60, help="journal history (default 60)")
    add("--status-numbering", choices=("docs", "community"), default="docs")
    add("--seed", type=int, help="fix phases and ids for repeatable runs")
    add("--client-id", default="zerto-rewind-sim")
    add("--client-secret", default=os.environ.get("ZERTO_SIM_CLIENT_SECRET"))
    add("--username", default="admin")
    add("--password", default=os.environ.get("ZERTO_SIM_PASSWORD"))
    vsphere.add_arguments(p)
    return p


# the options whose parsed value is the SimConfig field of the same name, as it is
_SAME_AS_CONFIG = (
    "host", "port", "cert_dir", "estate_file", "vms", "vms_per_vpg", "jitter", "tag_lag_s",
    "task_duration_s", "token_ttl_s", "history_minutes", "status_numbering", "seed",
    "client_id", "username",
)  # fmt: skip


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """A SimConfig from parsed command-line arguments."""
    same = {name: getattr(args, name) for name in _SAME_AS_CONFIG}
    config = SimConfig(
        **same,
        tls=not args.plain_http,
        cadences=dict(args.cadence),
        vcenter=vsphere.spec_from_args(args),
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
    for site in server.sites.values():
        where = f" (ZVM of site {site.name})" if server.multi_site else ""
        print(f"zerto-rewind sim: serving {site.url}{where}", file=sys.stderr, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0
