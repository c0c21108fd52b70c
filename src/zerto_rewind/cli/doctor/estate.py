"""The doctor's checks of an estate (``zvms``: one ZVM per site): every ZVM, and their pairing.

Every configured ZVM is probed at once, each within the doctor's deadline, with a fresh
token (no cache: the credentials must really work):

* ``zvm: SITE`` — one line per site: its secret is found, it answers, a token is issued,
  and its site identifier (``GET /v1/localsite``);
* ``pairing: SITE`` — one line per site, as seen from both sides: each site's
  ``GET /v1/peersites`` lists the other configured sites and they list it back; a VPG
  two configured ZVMs list is protected on one and recovering on the other, and a VPG
  protected from one configured site to another is listed by both. A configured site
  paired with no other configured site warns; so does a peer site that has no entry in
  ``zvms``: the guard denies every VM protected from it (it cannot take its tag).

A site that does not answer is named on its own line and nowhere else fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import (
    ApiError,
    AuthError,
    ConfigError,
    ZertoRewindError,
    ZvmConnectionError,
    ZvmTimeout,
    ZvmTlsError,
)
from .check import Check

if TYPE_CHECKING:
    from ...config.settings import Settings, ZvmSettings
    from ...zvm.models import Vpg

__all__ = ["EnvSecret", "estate_checks", "zvm_failure"]


@dataclass
class _Probe:
    """What one site's ZVM said, or the failed line."""

    site: str
    zvm: ZvmSettings
    failed: Check | None = None
    local_id: str | None = None
    local_name: str = ""
    version: str = ""
    elapsed_ms: int = 0
    peers: dict[str, str] = field(default_factory=dict)  # identifier -> peer site name
    vpgs: dict[str, Vpg] = field(default_factory=dict)  # lowercased identifier -> VPG


def estate_checks(settings: Settings, env: Mapping[str, str], deadline_s: float) -> list[Check]:
    """``zvm: SITE`` and ``pairing: SITE`` for every site of ``zvms``, in config order."""
    probes = {site: _Probe(site, zvm) for site, zvm in settings.zvms.items()}
    threads = [
        threading.Thread(target=_probe, args=(p, env, deadline_s), daemon=True)
        for p in probes.values()
    ]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline_s + 1.0
    for thread, probe in zip(threads, probes.values(), strict=True):
        thread.join(max(0.0, end - time.monotonic()))
        if thread.is_alive() and probe.failed is None and probe.local_id is None:
            detail = f"{probe.zvm.url} did not answer within {deadline_s:g} s"
            probe.failed = Check(f"zvm: {probe.site}", "fail", detail, _reach_fix(probe))
    checks = [p.failed or _site_line(p) for p in probes.values()]
    checks += _same_zvm(probes)
    checks += [_pairing(p, probes) for p in probes.values()]
    return checks


def _reach_fix(probe: _Probe) -> str:
    return (
        f"check zvms.{probe.site}.url ({probe.zvm.url}), that the ZVM is up, and the network "
        "path to it; until it answers, the guard denies the VMs that may be that site's"
    )


def _probe(probe: _Probe, env: Mapping[str, str], deadline_s: float) -> None:
    from ...zvm.client import ZvmClient

    name, zvm = f"zvm: {probe.site}", probe.zvm
    try:
        zvm.secret(env)
    except ZertoRewindError as exc:
        fix = f"make the secret of site {probe.site} available where the hook runs"
        probe.failed = Check(name, "fail", f"secret: {exc}", f"{fix} ({zvm.secret_hint})")
        return
    started = time.monotonic()
    deadline = started + deadline_s
    try:
        with ZvmClient(EnvSecret(zvm, env), retries=1, backoff_s=0.1) as client:
            local = client.local_site(deadline=deadline)
            probe.elapsed_ms = int((time.monotonic() - started) * 1000)
            peers = client.peer_sites(deadline=deadline)
            vpgs = client.list_vpgs(deadline=deadline)
    except ZertoRewindError as exc:
        detail, fix = zvm_failure(exc, zvm, f"zvms.{probe.site}")
        probe.failed = Check(name, "fail", detail, fix)
        return
    probe.peers = {
        str(p["SiteIdentifier"]): str(p.get("PeerSiteName") or p["SiteIdentifier"])
        for p in peers
        if p.get("SiteIdentifier")
    }
    probe.vpgs = {v.vpg_id.lower(): v for v in vpgs}
    probe.local_name = str(local.get("SiteName") or "unnamed site")
    probe.version = str(local.get("DisplayVersion") or local.get("Version") or "unknown version")
    found = local.get("SiteIdentifier")
    if not (isinstance(found, str) and found):
        detail = f"{zvm.url} answered, but GET /v1/localsite names no SiteIdentifier"
        fix = "without it the guard cannot tell which VPGs this site protects; check the ZVM"
        probe.failed = Check(name, "fail", detail, fix)
        return
    probe.local_id = found


def zvm_failure(exc: ZertoRewindError, zvm: ZvmSettings, key: str) -> tuple[str, str]:
    """(what failed, what to do) when the ZVM of config section ``key`` failed with ``exc``."""
    if isinstance(exc, ZvmTlsError):
        return str(
            exc
        ), f"set {key}.ca_bundle to the PEM file of the CA that signed the ZVM's certificate"
    if isinstance(exc, ZvmConnectionError | ZvmTimeout):
        return str(
            exc
        ), f"check {key}.url ({zvm.url}), that the ZVM is up, and the network path to it"
    if isinstance(exc, ConfigError):
        return str(exc), f"fix the {key} section of the config"
    if isinstance(exc, AuthError):
        detail = f"{zvm.url} answered, but its Keycloak refused the login: {exc}"
        return detail, f"check {key}.client_id / {key}.username and the secret in {zvm.secret_hint}"
    if isinstance(exc, ApiError):
        detail = f"{zvm.url} answered, but refused the request: {exc}"
        return detail, "give the account a Zerto role that may read the site (e.g. admin)"
    return f"{type(exc).__name__}: {exc}", f"check {key}.url ({zvm.url}) and the ZVM"


class EnvSecret:
    """ZvmSettings with ``secret()`` bound to the environment the doctor was given."""

    def __init__(self, settings: Any, env: Mapping[str, str]) -> None:
        self._settings = settings
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._settings, name)

    def secret(self) -> str:
        return str(self._settings.secret(self._env))


def _site_line(probe: _Probe) -> Check:
    zvm = probe.zvm
    who = f"{zvm.grant} grant for client {zvm.client_id!r}" + (
        f", user {zvm.username!r}" if zvm.username else ""
    )
    detail = (
        f"{zvm.url} answered in {probe.elapsed_ms} ms: {probe.local_name} ({probe.version}), "
        f"site identifier {probe.local_id}; token issued for the {who}"
    )
    return Check(f"zvm: {probe.site}", "pass", detail)


def _same_zvm(probes: Mapping[str, _Probe]) -> list[Check]:
    by_id: dict[str, list[str]] = {}
    for probe in probes.values():
        if probe.local_id:
            by_id.setdefault(probe.local_id, []).append(probe.site)
    return [
        Check(
            "zvms",
            "fail",
            f"sites {', '.join(sites)} are the same ZVM (site identifier {local})",
            "give each site of zvms its own site's ZVM URL",
        )
        for local, sites in by_id.items()
        if len(sites) > 1
    ]


def _pairing(probe: _Probe, probes: Mapping[str, _Probe]) -> Check:
    name = f"pairing: {probe.site}"
    if probe.local_id is None:
        return Check(name, "warn", f"not checked: the ZVM of site {probe.site} did not answer")
    site_of = {p.local_id: p.site for p in probes.values() if p.local_id}
    dark = [p.site for p in probes.values() if p.local_id is None]
    warnings: list[str] = []
    paired: list[str] = []
    for other in probes.values():
        if other is probe or other.local_id is None:
            continue
        here, there = other.local_id in probe.peers, probe.local_id in other.peers
        if here and there:
            paired.append(other.site)
        elif here or there:
            seen, unseen = (probe.site, other.site) if here else (other.site, probe.site)
            warnings.append(
                f"site {seen}'s ZVM lists site {other.site if here else probe.site} as a peer, "
                f"but site {unseen}'s does not list it back"
            )
    warnings += _vpg_sides(probe, probes, site_of)
    unplaced: list[str] = []
    for peer_id, peer_name in probe.peers.items():
        if peer_id in site_of:
            continue
        if dark:  # it may be the dark site: that site's own line says it did not answer
            unplaced.append(f"{peer_name!r} ({peer_id})")
            continue
        warnings.append(
            f"peer site {peer_name!r} ({peer_id}) has no entry in zvms: the guard denies every "
            "VM protected from it, as no configured ZVM can take its tag"
        )
    if not paired and len(probes) > 1 and not dark:
        warnings.append(f"site {probe.site} is paired with no other site of zvms")
    if warnings:
        fix = (
            "pair the sites in Zerto, or add each peer site's ZVM to zvms (or remove a site "
            "that does not belong to this estate)"
        )
        return Check(name, "warn", "; ".join(warnings), fix)
    with_ = ", ".join(paired) or "no other configured site"
    detail = f"paired with {with_}, seen from both sides; VPGs agree"
    if unplaced:
        detail += (
            f"; peers {', '.join(unplaced)} not identified while site {', '.join(dark)} "
            "does not answer"
        )
    return Check(name, "pass", detail)


def _vpg_sides(probe: _Probe, probes: Mapping[str, _Probe], site_of: dict[Any, str]) -> list[str]:
    """A VPG of this site against the other side's view of it."""
    found: list[str] = []
    for key, vpg in sorted(probe.vpgs.items(), key=lambda kv: kv[1].name.casefold()):
        protected = site_of.get(vpg.protected_site_id)
        recovery = site_of.get(vpg.recovery_site_id)
        if probe.site not in (protected, recovery) and vpg.protected_site_id is not None:
            found.append(
                f"VPG {vpg.name!r} is listed by site {probe.site}, which neither protects nor "
                "recovers it"
            )
            continue
        if protected != probe.site:
            continue  # checked from its protected site, once
        other = probes.get(recovery) if recovery else None
        if other is None or other.local_id is None:
            continue  # recovering to a site with no (answering) ZVM: the peer line says so
        theirs = other.vpgs.get(key)
        if theirs is None:
            found.append(
                f"VPG {vpg.name!r} is protected at {probe.site} to {other.site}, but site "
                f"{other.site}'s ZVM does not list it"
            )
        elif (theirs.protected_site_id, theirs.recovery_site_id) != (
            vpg.protected_site_id,
            vpg.recovery_site_id,
        ):
            found.append(
                f"VPG {vpg.name!r}: sites {probe.site} and {other.site} disagree on which "
                "site protects it"
            )
    return found
