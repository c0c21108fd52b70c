"""Which site's ZVM a recovery tool speaks to: the VM found across the estate.

With one ZVM every tool speaks to it, as before the estate. With several (``zvms``)
the VM is found as the guard finds it (:meth:`~zerto_rewind.core.sites.SiteView.find`:
every ZVM at once, VPGs merged by identifier, per-ZVM caches, "site down" marks), and
each VPG is handled on one site's ZVM:

* **reads** (status, checkpoints, plan): the VPG's protected site's ZVM, else the
  first answering ZVM that lists it (a VPG's journal is the same seen from both);
* **recovery operations** (failover test, live failover, journal VM restore and their
  ends): the site ``recovery.via`` names, ``recovery`` (default) or ``protected``.
  Which site's ZVM real Zerto accepts them from is UNCONFIRMED (docs/mcp.md).

A VM that no answering ZVM lists while a ZVM did not answer is an error naming that
site, never "not protected": the VM may be the dark site's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import AmbiguousVm, NotFound, ZvmError

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..zvm.client import ZvmClient
    from ..zvm.estate import EstateVpg
    from ..zvm.models import VmRef

__all__ = ["Located", "Place", "Purpose", "locate", "unknown_in_estate", "vm_refs"]

Purpose = Literal["read", "recover"]


@dataclass(frozen=True)
class Place:
    """One VPG of the VM, and the site whose ZVM the tool speaks to about it."""

    site: str | None  # None: a lone ZvmClient, no estate to name
    url: str
    client: ZvmClient
    ref: VmRef


@dataclass
class Located:
    """The VM's VPGs, each with its ZVM, and what the estate could not tell."""

    vm: str
    places: list[Place]
    # site -> why its ZVM gave no answer
    dark: dict[str, str] = field(default_factory=dict)
    # VPGs of the VM that no answering ZVM can handle, and why
    skipped: list[str] = field(default_factory=list)
    several_sites: bool = False

    @property
    def refs(self) -> list[VmRef]:
        return [p.ref for p in self.places]

    def place(self, vpg_id: str) -> Place:
        return next(p for p in self.places if p.ref.vpg_id == vpg_id)

    def require_choice(self, vpg: str | None) -> None:
        """A ``vpg`` the answer does not hold, while some site did not answer or some VPG
        was left out: ZvmError naming them (the VPG may be there), not "not protected"."""
        if not vpg or not (self.dark or self.skipped):
            return
        wanted = vpg.casefold()
        if any(wanted in (r.vpg_name.casefold(), r.vpg_id.casefold()) for r in self.refs):
            return
        msg = (
            f"VPG {vpg!r} of VM {self.vm!r} cannot be handled now: "
            + "; ".join(self.notes())
            + ". Check the sites with `zerto-rewind doctor`, then retry"
        )
        raise ZvmError(msg)

    def notes(self) -> list[str]:
        """What the answer must say besides its rows: dark sites and skipped VPGs."""
        out = [f"site {site} did not answer: {why}" for site, why in self.dark.items()]
        return out + self.skipped


def locate(
    zvms: Guard | ZvmClient,
    vm: str,
    *,
    deadline: float | None,
    purpose: Purpose = "read",
    settings: Settings | None = None,
) -> Located:
    """Every VPG of ``vm`` with the ZVM to speak to about it (see the module docstring).

    NotFound when no VPG protects it and every ZVM answered; ZvmError when no answering
    ZVM lists it (or can handle any of its VPGs) while some did not answer;
    AmbiguousVm when the name is several VMs.
    """
    from ..core.guard import Guard

    if not isinstance(zvms, Guard):
        return _one(vm, zvms, None, deadline)
    estate = zvms.estate()
    if len(estate.names) == 1:
        return _one(vm, estate.client(estate.first), estate.first, deadline)
    lookup = zvms.sites().find((vm,), time.monotonic() + 60.0 if deadline is None else deadline)
    via = (settings or zvms.settings).recovery_via
    located = Located(vm, [], dict(lookup.failed), several_sites=True)
    for vpg in sorted(lookup.vpgs[vm].values(), key=lambda v: (v.vpg_name.casefold(), v.vpg_id)):
        site, problem = _site_for(zvms, vpg, lookup.failed, purpose, via)
        if site is None:
            located.skipped.append(problem)
            continue
        ref = vpg.rows.get(vm) or next(iter(vpg.rows.values()))
        located.places.append(Place(site, estate.url(site), estate.client(site), ref))
    if not located.places:
        _nothing(located, zvms, lookup.vpgs[vm], purpose)
    _unambiguous(located)
    return located


def vm_refs(client: ZvmClient, vm: str, *, deadline: float | None = None) -> list[VmRef]:
    """Every (VM, VPG) pair for ``vm``, sorted by VPG name; NotFound if no VPG protects it."""
    refs = client.find_vms(vm, deadline=deadline)
    if not refs:
        url = f"{client.settings.url}/v1/vms?vmName={vm}"
        msg = (
            f"no VPG protects a VM named {vm!r} on the ZVM at {client.settings.url}; "
            "check the name as the Zerto UI shows it (names match exactly: case and spaces count)"
        )
        raise NotFound(msg, method="GET", url=url, status=None)
    if len({r.vm_id for r in refs}) > 1:
        ids = ", ".join(sorted({r.vm_id for r in refs}))
        msg = (
            f"the ZVM at {client.settings.url} lists several VMs named {vm!r} ({ids}); "
            "the name does not say which one is meant, so nothing was done"
        )
        raise AmbiguousVm(msg)
    return sorted(refs, key=lambda r: (r.vpg_name.casefold(), r.vpg_id))


def _one(vm: str, client: ZvmClient, site: str | None, deadline: float | None) -> Located:
    url = client.settings.url
    return Located(
        vm, [Place(site, url, client, ref) for ref in vm_refs(client, vm, deadline=deadline)]
    )


def _site_for(
    guard: Guard, vpg: EstateVpg, failed: dict[str, str], purpose: Purpose, via: str
) -> tuple[str | None, str]:
    live = [s for s in vpg.listed_by if s not in failed]
    protected = vpg.protected_site
    if purpose == "read":
        if protected in live:
            return protected, ""
        if live:
            return live[0], ""
        return None, f"VPG {vpg.vpg_name!r}: no ZVM that answered lists it"
    if via == "protected":
        return guard.sites().tag_site(vpg, failed)
    if vpg.protected_site_id is None:
        return None, (
            f"VPG {vpg.vpg_name!r}: the ZVMs do not say which site protects it, so its recovery "
            "site cannot be told apart (recovery.via: recovery)"
        )
    recovering = [s for s in live if s != protected]
    if recovering:
        return recovering[0], ""
    dark = [s for s in failed if s != protected]
    why = (
        f"its recovery site may be site {', '.join(dark)}, whose ZVM did not answer"
        if dark
        else "its recovery site is not one of the guard's ZVMs (zvms); an operator can add "
        'that site\'s ZVM, or set "recovery": {"via": "protected"}'
    )
    return None, f"VPG {vpg.vpg_name!r} is recovered on its recovery site's ZVM, and {why}"


def _nothing(located: Located, guard: Guard, vpgs: dict[str, EstateVpg], purpose: Purpose) -> None:
    estate = guard.estate()
    if located.dark or located.skipped:
        from ..core.sites import dark_reason

        dark = "; ".join(dark_reason(s, estate.url(s), why) for s, why in located.dark.items())
        skipped = "; ".join(located.skipped)
        what = "knows" if not vpgs else ("can recover" if purpose == "recover" else "can show")
        msg = (
            f"no ZVM that answered {what} VM {located.vm!r}"
            + (f": {skipped}" if skipped else "")
            + (f"; {dark}" if dark else "")
            + ". Zerto may well protect it: check the sites with `zerto-rewind doctor`, then retry"
        )
        raise ZvmError(msg)
    raise unknown_in_estate(guard, located.vm)


def unknown_in_estate(guard: Guard, vm: str) -> NotFound:
    """Every ZVM of the estate answered, and none knows VM ``vm``."""
    estate = guard.estate()
    where = ", ".join(f"site {s} ({estate.url(s)})" for s in estate.names)
    msg = (
        f"no VPG protects a VM named {vm!r} on any ZVM of the estate ({where}); check "
        "the name as the Zerto UI shows it (names match exactly: case and spaces count)"
    )
    return NotFound(msg, method="GET", url=f"{estate.url(estate.first)}/v1/vms", status=None)


def _unambiguous(located: Located) -> None:
    ids = sorted({r.vm_id for r in located.refs})
    if len(ids) > 1:
        msg = (
            f"the ZVMs list several VMs named {located.vm!r} ({', '.join(ids)}); "
            "the name does not say which one is meant, so nothing was done"
        )
        raise AmbiguousVm(msg)
