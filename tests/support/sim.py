"""The suite's simulator: one configuration, one fixture factory, settings that trust it.

A folder's ``conftest.py`` makes its ``sim`` fixture with :func:`sim_fixture`::

    from support.sim import sim_fixture

    sim = sim_fixture()                      # a fresh simulator per test
    sim = sim_fixture(scope="module", ...)   # one per module, SimConfig fields overridden
    sim = sim_fixture(estate_file=THREE_SITES)  # a ZVM per site of the packaged estate

A test of the simulator as a process starts it with :func:`launch_sim` and reads
its ready file with :func:`wait_ready_file`; :func:`site_fields` picks one ZVM's
entry of either a ready file or ``SimServer.credentials``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.config import ZvmSettings
from zerto_rewind.sim import SimConfig, SimServer
from zerto_rewind.sim.estate import ESTATES_DIR
from zerto_rewind.testing import FAST_CADENCES

__all__ = [
    "PAIRED_ESTATES",
    "THREE_SITES",
    "Launched",
    "estate_sim_fixture",
    "estate_sims",
    "launch_sim",
    "set_site_fault",
    "share_journals",
    "sim_config",
    "sim_fixture",
    "sim_settings",
    "site_fields",
    "wait_ready_file",
]

# The packaged multi-site estate: hq, dr, azure and aws, each with its own ZVM.
THREE_SITES = ESTATES_DIR / "three-sites.json"


def sim_config(**overrides: Any) -> SimConfig:
    """FAST_CADENCES, no jitter (journal boundaries are exact), quick tags and tasks, seed 7.

    ``overrides`` replace :class:`SimConfig` fields.
    """
    values: dict[str, Any] = {
        "cadences": dict(FAST_CADENCES),
        "jitter": 0.0,
        "tag_lag_s": 0.3,
        "task_duration_s": 0.2,
        "seed": 7,
    }
    values.update(overrides)
    return SimConfig(**values)


def sim_fixture(
    *, scope: str = "function", config: Callable[[], SimConfig] | None = None, **overrides: Any
) -> Any:
    """A pytest fixture named ``sim``: a :class:`SimServer` on a free port, over TLS.

    It runs :func:`sim_config` with ``overrides``, or ``config()`` when given, and
    stops the simulator after the test (or the module, with ``scope="module"``).
    """

    @pytest.fixture(scope=scope, name="sim")  # type: ignore[call-overload]
    def sim() -> Iterator[SimServer]:
        """An in-process simulator on a free port, over TLS, with fast cadences."""
        with SimServer(config() if config else sim_config(**overrides)) as server:
            yield server

    return sim


def site_fields(ready: dict[str, Any], site: str | None = None) -> dict[str, Any]:
    """One ZVM's url, CA and credentials from a ready file (or ``SimServer.credentials``).

    ``site`` None: the top-level keys, which are the first ZVM's.
    """
    if site is None:
        return ready
    found: dict[str, Any] = ready["sites"][site]
    return found


def sim_settings(
    sim: SimServer, *, grant: str = "password", site: str | None = None, **overrides: Any
) -> ZvmSettings:
    """ZvmSettings pointing at the simulator, trusting its CA (``grant``: password or client).

    ``site``: the ZVM of that site of a multi-site estate (default: the first ZVM).
    """
    creds = site_fields(sim.credentials, site)
    values: dict[str, Any] = {"url": creds["url"], "ca_bundle": creds["ca_bundle"]}
    if grant == "password":
        values.update(
            grant="password",
            client_id="zerto-client",
            username=creds["username"],
            secret_source=("inline", creds["password"]),
        )
    else:
        values.update(
            grant="client_credentials",
            client_id=creds["client_id"],
            username=None,
            secret_source=("inline", creds["client_secret"]),
        )
    values.update(overrides)
    return ZvmSettings(**values)


def wait_ready_file(proc: subprocess.Popen[str], ready: Path, timeout: float) -> dict[str, Any]:
    """The simulator process's ready file once written; fail if it exits or takes too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready.exists():
            fields: dict[str, Any] = json.loads(ready.read_text())
            return fields
        if proc.poll() is not None:
            raise AssertionError(f"simulator exited {proc.returncode}: {proc.stderr}")
        time.sleep(0.05)
    raise AssertionError("no ready file")


def estate_sim_fixture(*args: str, estate: str = "three-sites") -> Any:
    """A module-scoped pytest fixture named ``ready``: one ``sim --estate ESTATE ARGS``
    process (every site's ZVM over TLS) for the module, its ready file as a dict."""

    @pytest.fixture(scope="module", name="ready")
    def ready(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
        with launch_sim(tmp_path_factory.mktemp("sim")) as start:
            _proc, fields = start("--estate", estate, *args)
            yield fields

    return ready


def set_site_fault(ready: Mapping[str, Any], site: str, fault: Mapping[str, Any] | None) -> None:
    """Set (or with None clear) a fault of one site of a multi-site simulator process,
    through another site's port (a ``down`` site's own port cannot clear it)."""
    import ssl

    import httpx

    via = next(s for s in ready["sites"] if s != site)
    entry = ready["sites"][via]
    url = f"{entry['url']}/_sim/faults"
    verify = ssl.create_default_context(cafile=entry["ca_bundle"])
    with httpx.Client(verify=verify, timeout=10) as http:
        if fault is None:
            http.delete(url, params={"site": site}).raise_for_status()
        else:
            http.post(url, params={"site": site}, json=dict(fault)).raise_for_status()


Launched = tuple[subprocess.Popen[str], dict[str, Any]]


@contextlib.contextmanager
def launch_sim(tmp_path: Path) -> Iterator[Callable[..., Launched]]:
    """``start(*args)`` runs ``python -m zerto_rewind.sim --port 0 --ready-file F *args``.

    Each start returns the process and its ready file; every process still running
    is killed on exit.
    """
    started: list[subprocess.Popen[str]] = []

    def start(*extra: str, timeout: float = 30) -> Launched:
        ready = tmp_path / f"ready-{len(started)}.json"
        command = [sys.executable, "-m", "zerto_rewind.sim", "--port", "0"]
        command += ["--ready-file", str(ready), "--cert-dir", str(tmp_path / "certs"), *extra]
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc, wait_ready_file(proc, ready, timeout)

    try:
        yield start
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()


# Two sites that know each other: hq protects web-vpg (web-01) to dr; dr protects
# dr-vpg (db-01) to hq; hq also protects hq-only (app-01, app-02) to an AWS site no ZVM of the
# estate is. Each site's backend sees the estate from its own side, as its ZVM would:
# the same VPG, site and VM identifiers, protected on one side, recovering on the other.
def _vpg(name: str, protected: str, recovery: str, *vms: tuple[str, str]) -> dict[str, Any]:
    kind = "aws" if protected == "aws" else "vcenter"
    return {
        "name": name, "site_kind": kind, "protected_site": protected, "recovery_site": recovery,
        "vms": [{"name": vm, "vcenter_id": moref} for vm, moref in vms],
    }  # fmt: skip


_WEB = _vpg("web-vpg", "hq", "dr", ("web-01", "vm-11"))
_DB = _vpg("dr-vpg", "dr", "hq", ("db-01", "vm-21"))
_HQ: dict[str, Any] = {
    "local_site": {"name": "hq", "kind": "vcenter"},
    "sites": [{"name": "dr", "kind": "vcenter"}, {"name": "aws", "kind": "aws"}],
    "vpgs": [
        _WEB,
        _DB,
        _vpg("hq-only", "hq", "aws", ("app-01", "vm-12"), ("app-02", "vm-13")),
        _vpg("from-aws", "aws", "hq", ("cloud-01", "vm-31")),
    ],
}
_DR: dict[str, Any] = {
    "local_site": {"name": "dr", "kind": "vcenter"},
    "sites": [{"name": "hq", "kind": "vcenter"}],
    "vpgs": [_WEB, _DB, _vpg("dr-own", "dr", "hq", ("web-01b", "vm-22"))],
}
PAIRED_ESTATES: dict[str, dict[str, Any]] = {"hq": _HQ, "dr": _DR}


def share_journals(*sims: SimServer) -> None:
    """One journal per VPG, as in Zerto: a VPG several simulators hold (same identifier)
    gets the first one's journal in every other, and all take one lock, so a tag taken
    through one site's ZVM is in the other's listing (the guard's second witness)."""
    first_lock = sims[0].world.lock
    journals: dict[str, Any] = {}
    for sim in sims:
        sim.world.lock = first_lock
        for view in sim.world.views:
            view.lock = first_lock
        for vpg_id, vpg in sim.world.vpgs.items():
            vpg.journal = journals.setdefault(vpg_id, vpg.journal)


@contextmanager
def estate_sims(
    directory: Path, estates: Mapping[str, Mapping[str, Any]] | None = None, **overrides: Any
) -> Iterator[dict[str, SimServer]]:
    """One simulator per site (default :data:`PAIRED_ESTATES`), each over TLS with its own
    CA, credentials and estate file; all stopped on exit.

    Each site's ZVM is its own process-less server; a VPG both hold shares one journal
    (:func:`share_journals`), as in Zerto, so a tag taken on one is listed by the other.
    """
    estates = estates or PAIRED_ESTATES
    with ExitStack() as stack:
        sims: dict[str, SimServer] = {}
        for site, estate in estates.items():
            path = directory / f"estate-{site}.json"
            path.write_text(json.dumps(estate))
            sims[site] = stack.enter_context(SimServer(sim_config(estate_file=path, **overrides)))
        share_journals(*sims.values())
        yield sims
