"""Which site's ZVM ``status``, ``checkpoints`` and ``tag`` speak to, and which did not answer.

With one ZVM every command speaks to it. With several (``zvms``) the VM is found as the
guard finds it (:meth:`~zerto_rewind.core.sites.SiteView.find`, caches included), then
every site the lookup did not hear from just now is asked once (``GET /v1/localsite``):
a cached answer never hides a site that went dark since. The result says, once each:

* the sites that did not answer, and why (text and ``--json`` both list them);
* each VPG's ZVM: the one that takes its tag, else (to show it) a live ZVM that lists it;
* the VPGs that cannot be tagged, and why; the commands show them, ``tag`` refuses them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..config.loader import load_settings
from ..config.settings import Settings
from ..core.guard import Guard
from ..errors import ZvmError
from ..recovery.sites import unknown_in_estate
from ..zvm.auth import TokenCache
from ..zvm.client import ZvmClient
from ..zvm.estate import EstateVpg

__all__ = ["Dark", "Place", "Places", "places"]

_PROBE_S = 30.0


@dataclass(frozen=True)
class Dark:
    """A site whose ZVM did not answer."""

    site: str
    url: str
    why: str

    def line(self) -> str:
        return f"site {self.site} (the ZVM at {self.url}) did not answer: {self.why}"

    def json(self) -> dict[str, str]:
        return {"site": self.site, "url": self.url, "error": self.why}


@dataclass
class Place:
    """One site's ZVM and the VPGs of the VM it speaks for."""

    site: str | None  # None: a one-ZVM config, shown as before the estate
    client: ZvmClient
    vpg_ids: set[str] | None  # lowercased; None: every VPG that ZVM lists
    # lowercased VPG id -> why it cannot be tagged through the estate (shown, not tagged)
    untaggable: dict[str, str] = field(default_factory=dict)

    def holds(self, vpg_id: str) -> bool:
        return self.vpg_ids is None or vpg_id.lower() in self.vpg_ids

    def cannot_tag(self, vpg_id: str) -> str | None:
        return self.untaggable.get(vpg_id.lower())


@dataclass
class Places:
    """Where to speak about the VM, the sites that did not answer, what cannot be shown."""

    settings: Settings
    places: list[Place]
    dark: list[Dark] = field(default_factory=list)
    unshown: list[str] = field(default_factory=list)  # VPGs no answering ZVM lists

    def taggable(self) -> list[Place]:
        """The places with their untaggable VPGs left out."""
        out = []
        for p in self.places:
            ids = {i for i in (p.vpg_ids or set()) if i not in p.untaggable}
            if p.vpg_ids is None or ids:
                out.append(Place(p.site, p.client, ids if p.vpg_ids is not None else None))
        return out

    def refusals(self) -> list[str]:
        """Why each untaggable VPG cannot be tagged."""
        return [why for p in self.places for why in p.untaggable.values()] + self.unshown

    def dark_json(self) -> list[dict[str, str]]:
        return [d.json() for d in self.dark]


@contextmanager
def places(vm: str, deadline: float, config: str | None) -> Iterator[Places]:
    """The ZVMs to speak to about ``vm`` (see the module docstring).

    ZvmError when no answering ZVM lists the VM while a site is dark (the VM may be
    the dark site's: never "not protected"); NotFound when every site answered and
    none knows it. The error is the one place that says why each site is dark.
    """
    settings = load_settings(path=config)
    if len(settings.zvms) == 1:
        zvm = next(iter(settings.zvms.values()))
        with ZvmClient(zvm, token_cache=TokenCache(settings.state_dir)) as client:
            yield Places(settings, [Place(None, client, None)])
        return
    guard = Guard(settings)
    try:
        yield _estate_places(guard, settings, vm, deadline)
    finally:
        guard.close()


def _estate_places(guard: Guard, settings: Settings, vm: str, deadline: float) -> Places:
    sites, estate = guard.sites(), guard.estate()
    lookup = sites.find((vm,), deadline)
    failed = dict(lookup.failed)
    failed.update(_probe(guard, [s for s in estate.names if s not in failed], deadline))
    by_site: dict[str, Place] = {}
    unshown: list[str] = []
    for vpg in lookup.vpgs[vm].values():
        site, problem = sites.tag_site(vpg, failed, details=False)
        target = site if site is not None else _shown_by(vpg, failed)
        if target is None:
            unshown.append(f"VPG {vpg.vpg_name!r}: no ZVM that answered lists it ({problem})")
            continue
        if target not in by_site:
            by_site[target] = Place(target, estate.client(target), set())
        place = by_site[target]
        assert place.vpg_ids is not None  # an estate's places name their VPGs
        place.vpg_ids.add(vpg.vpg_id.lower())
        if site is None:
            place.untaggable[vpg.vpg_id.lower()] = problem
    dark = [Dark(s, estate.url(s), failed[s]) for s in estate.names if s in failed]
    found = Places(settings, list(by_site.values()), dark, unshown)
    if not found.places:
        _nothing(vm, found, guard)
    return found


def _shown_by(vpg: EstateVpg, failed: dict[str, str]) -> str | None:
    """A live ZVM to show an untaggable VPG from: its protected site's, else the first."""
    live = [s for s in vpg.listed_by if s not in failed]
    if vpg.protected_site in live:
        return vpg.protected_site
    return live[0] if live else None


def _probe(guard: Guard, sites: list[str], deadline: float) -> dict[str, str]:
    """Ask each site once now; site -> why it did not answer."""

    def ask(_site: str, client: ZvmClient, site_deadline: float) -> dict[str, Any]:
        return client.local_site(deadline=site_deadline)

    # A dark answer marks its site down by itself (the estate's observer), as any request.
    answers = guard.estate().ask(ask, sites, min(deadline, time.monotonic() + _PROBE_S))
    return {site: f"{type(exc).__name__}: {exc}" for site, exc in answers.failed.items()}


def _nothing(vm: str, found: Places, guard: Guard) -> None:
    if found.dark or found.unshown:
        why = "; ".join([*(d.line() for d in found.dark), *found.unshown])
        msg = (
            f"no ZVM that answered can show VM {vm!r}: {why}. Zerto may well protect it: "
            "check the sites with `zerto-rewind doctor`, then retry"
        )
        raise ZvmError(msg)
    raise unknown_in_estate(guard, vm)
