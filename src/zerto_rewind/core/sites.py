"""The guard's view of the estate: which site's ZVM knows a VM, cached per ZVM, and which
sites are dark right now.

* Each ZVM's answer for a VM name is cached under that ZVM's URL (``vms`` cache), its
  ``localsite`` identifier a day (``localsite``): two sites never share an entry.
  An empty answer is only trusted from the cache while another site's answer is not
  empty; a VM the estate would call *unknown* is always asked of every ZVM afresh.
* Each entry records the sites that did not answer when it was made. An entry made
  while any site was dark is never served: that silence is not "no such VM there",
  so the name is asked of every site afresh, and a site still dark makes the call
  ``site_unknown`` (a prompt), never a unique answer.
* A site whose ZVM failed (down, hanging past its timeout, 401, TLS, 5xx) is marked
  down for ``guard.site_down_s`` (``sitedown`` cache, shared by every process): until
  then it is not asked again, so a hanging site costs its own timeout once, and the
  other sites' VMs are decided in their normal time.

:class:`Lookup` is what one call learned; the guard turns it into a decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config.settings import GuardSettings
from ..zvm.estate import Estate, EstateVpg, SiteAnswer, is_dark, merge_vpgs, tag_site
from ..zvm.models import VmRef
from .decision import shown_vm

if TYPE_CHECKING:
    from ..errors import ZertoRewindError, ZvmError
    from ..zvm.client import ZvmClient
    from .decision import VpgOutcome
    from .state import GuardStateLike

__all__ = ["Lookup", "SiteView", "dark_reason", "site_unknown_reason"]

_LOCAL_SITE_TTL_S = 86_400.0
_ROW_FIELDS = 5


@dataclass
class Lookup:
    """What the estate says of a call's VMs."""

    # VM name -> its VPGs, merged over the sites (keyed by lowercased VPG identifier)
    vpgs: dict[str, dict[str, EstateVpg]] = field(default_factory=dict)
    # site -> why its ZVM gave no answer (this call, or a "site down" mark)
    failed: dict[str, str] = field(default_factory=dict)


def dark_reason(site: str, url: str, why: str) -> str:
    """How a dark site is named to the approver."""
    return f"site {site} (the ZVM at {url}) did not answer: {why}"


def site_unknown_reason(
    tool: str, vms: tuple[str, ...], listed: Mapping[str, list[str]], dark: str
) -> str:
    """Why a VM some sites list is not checkpointed while another site is dark (a prompt)."""
    where = "; ".join(
        f"{shown_vm(vm)} is listed by site{'s' if len(sites) > 1 else ''} {', '.join(sites)}"
        for vm, sites in listed.items()
    )
    found = f"{where}, but " if where else ""
    what = "which VM" if listed else "which VPG"  # a catalog-named VPG and no VM argument
    return (
        f"zerto-rewind cannot tell {what} {tool} changes: {found}{dark}. That site may "
        f"have one of the same name, so the name may not be unique; no checkpoint was made "
        "and no VPG was tagged. Approve only if you know which VM the call changes and "
        "accept it without a rewind point; else retry the same call once that site's ZVM "
        "answers (`zerto-rewind doctor` shows each site's ZVM)."
    )


class SiteView:
    """Finds VMs across the estate through the shared state's caches and marks."""

    def __init__(
        self,
        estate: Callable[[], Estate],
        state: Callable[[], GuardStateLike],
        settings: GuardSettings,
        vm_ttl_s: float,
    ) -> None:
        self._estate = estate
        self._state = state
        self.settings = settings
        self.vm_ttl_s = vm_ttl_s

    # ------------------------------------------------------------ site down marks

    def _marks(self) -> bool:
        # With one ZVM there is no other site to keep deciding, and its errors keep their
        # own messages and retries as before the estate: marks are for several sites.
        return self.settings.site_down_s > 0 and len(self._estate().names) > 1

    def down(self, site: str) -> str | None:
        """Why the site is marked down, while the mark lasts; else None."""
        if not self._marks():
            return None
        mark = self._state().cached("sitedown", self._estate().url(site), self.settings.site_down_s)
        if isinstance(mark, dict) and isinstance(mark.get("reason"), str):
            return str(mark["reason"])
        return None

    def mark_down(self, site: str, exc: ZertoRewindError) -> None:
        """Remember for ``guard.site_down_s`` that the site's ZVM failed, and how."""
        if not self._marks():
            return
        reason = f"{type(exc).__name__}: {exc}"
        self._state().store("sitedown", self._estate().url(site), {"site": site, "reason": reason})

    def observe(self, site: str, exc: ZvmError) -> None:
        """The estate's hook: any request of a site that failed darkly marks it down."""
        self.mark_down(site, exc)

    # ------------------------------------------------------------ finding VMs

    def find(self, vms: tuple[str, ...], deadline: float) -> Lookup:
        """Each VM's VPGs over every site, and the sites that gave no answer."""
        estate, state = self._estate(), self._state()
        multi = len(estate.names) > 1
        lookup = Lookup()
        answers: dict[str, dict[str, SiteAnswer]] = {vm: {} for vm in vms}
        dark: dict[str, str] = {}
        for site in estate.names:
            why = self.down(site)
            if why is not None:
                dark[site] = why
        # A dark site's cached rows still tell that a VM is its own: deny it at once.
        for vm in vms:
            for site in estate.names:
                cached = self._cached(state, estate, site, vm, multi)
                if cached is not None:
                    answers[vm][site] = cached
        ask: dict[str, list[str]] = {}
        for vm in vms:
            known = any(a.refs for a in answers[vm].values())
            for site in estate.names:
                if site in dark or (known and site in answers[vm]):
                    continue
                answers[vm].pop(site, None)  # a cached empty answer is asked again
                ask.setdefault(site, []).append(vm)
        if ask:
            self._ask(estate, ask, answers, dark, deadline, multi)
        for vm in vms:
            lookup.vpgs[vm] = merge_vpgs(answers[vm], estate.names)
        lookup.failed = {s: dark[s] for s in estate.names if s in dark}
        return lookup

    def _ask(
        self,
        estate: Estate,
        ask: dict[str, list[str]],
        answers: dict[str, dict[str, SiteAnswer]],
        dark: dict[str, str],
        deadline: float,
        multi: bool,
    ) -> None:
        state = self._state()

        def work(site: str, client: ZvmClient, site_deadline: float) -> dict[str, SiteAnswer]:
            local = self.local_id(site, client, site_deadline) if multi else None
            return {
                vm: SiteAnswer(local, tuple(client.find_vms(vm, deadline=site_deadline)))
                for vm in ask[site]
            }

        result = estate.ask(work, ask, deadline)
        if not multi and result.failed:
            raise next(iter(result.failed.values()))  # one ZVM: its error, as before
        self._note_failures(result.failed, dark)
        for site, found in result.ok.items():
            for vm, answer in found.items():
                answers[vm][site] = answer
                entry = {"rows": _rows(answer), "dark": sorted(dark)}
                state.store("vms", _vm_key(estate.url(site), vm), entry)

    def local_id(self, site: str, client: ZvmClient, deadline: float | None) -> str | None:
        """The site's own identifier (``GET /v1/localsite``), cached a day per ZVM."""
        state, key = self._state(), client.settings.url
        cached = state.cached("localsite", key, _LOCAL_SITE_TTL_S)
        if isinstance(cached, str) and cached:
            return cached
        found = client.local_site(deadline=deadline).get("SiteIdentifier")
        if isinstance(found, str) and found:
            state.store("localsite", key, found)
            return found
        return None

    def _cached(
        self, state: GuardStateLike, estate: Estate, site: str, vm: str, multi: bool
    ) -> SiteAnswer | None:
        url = estate.url(site)
        raw = state.cached("vms", _vm_key(url, vm), self.vm_ttl_s)
        if not isinstance(raw, dict) or raw.get("dark") != []:
            return None  # made while a site was dark (or an older shape): asked afresh
        refs = _refs(raw.get("rows"), vm)
        if refs is None:
            return None
        local: str | None = None
        if multi:
            known = state.cached("localsite", url, _LOCAL_SITE_TTL_S)
            if not (isinstance(known, str) and known):
                return None  # without the site's identity its rows cannot be placed
            local = known
        return SiteAnswer(local, refs)

    def find_vpg(self, name: str, deadline: float) -> tuple[EstateVpg | None, dict[str, str]]:
        """The VPG named ``name`` (a catalog's ``vpgs``) over every live site, merged, and
        the sites that gave no answer."""
        from ..errors import NotFound

        estate = self._estate()
        multi = len(estate.names) > 1
        dark = {s: why for s in estate.names if (why := self.down(s)) is not None}

        def work(site: str, client: ZvmClient, site_deadline: float) -> tuple[str | None, Any]:
            local = self.local_id(site, client, site_deadline) if multi else None
            try:
                return local, client.find_vpg(name, deadline=site_deadline)
            except NotFound:
                return local, None

        result = estate.ask(work, [s for s in estate.names if s not in dark], deadline)
        if not multi and result.failed:
            raise next(iter(result.failed.values()))  # one ZVM: its error, as before
        self._note_failures(result.failed, dark)
        by_local = {local: site for site, (local, _v) in result.ok.items() if local}
        merged: EstateVpg | None = None
        for site in estate.names:
            _local, vpg = result.ok.get(site, (None, None))
            if vpg is None:
                continue
            if merged is None:
                merged = EstateVpg(vpg.vpg_id, vpg.name, protected_site_id=vpg.protected_site_id)
                merged.protected_site = by_local.get(vpg.protected_site_id or "")
            merged.listed_by.append(site)
        return merged, {s: dark[s] for s in estate.names if s in dark}

    def _note_failures(self, failed: Mapping[str, ZertoRewindError], dark: dict[str, str]) -> None:
        for site, exc in failed.items():
            if is_dark(exc):
                self.mark_down(site, exc)
            dark[site] = f"{type(exc).__name__}: {exc}"

    # ------------------------------------------------------------ a second witness

    def cross_check(self, outcome: VpgOutcome, others: list[str], deadline: float) -> str:
        """Why another ZVM that lists the VPG disagrees with the confirmed tag, or cannot
        say ("" if every one agrees). One journal, two ZVMs: a tag one ZVM shows must be
        on the same checkpoint in the other's listing. A ZVM that does not answer now is
        no agreement: silence is not a witness, so the tag stands unchecked (a deny)."""
        from ..errors import ZertoRewindError
        from .tagging import tag_in_journal

        estate = self._estate()
        if not outcome.tag or outcome.requested_at is None:
            return ""
        shown = (
            f"site {outcome.site}'s ZVM ({estate.url(str(outcome.site))}) shows tag "
            f"{outcome.tag!r} on checkpoint {outcome.checkpoint_id}"
        )
        for other in others:
            try:
                found, _listed = tag_in_journal(
                    estate.client(other), outcome.vpg_id, outcome.tag, outcome.requested_at,
                    deadline=deadline,
                )  # fmt: skip
            except ZertoRewindError as exc:
                why = f"{type(exc).__name__}: {exc}"
                return (
                    f"{shown}, but {dark_reason(other, estate.url(other), why)}; site {other}'s "
                    "ZVM lists the same VPG and could not confirm the tag as a second witness, "
                    "so the checkpoint cannot be trusted. Retry the same call once site "
                    f"{other}'s ZVM answers (`zerto-rewind doctor` shows each site's ZVM)"
                )
            if found is None or found.cp_id != outcome.checkpoint_id:
                seen = f"checkpoint {found.cp_id}" if found is not None else "no such checkpoint"
                return (
                    f"{shown}, but site {other}'s ZVM ({estate.url(other)}), which lists the "
                    f"same VPG, shows {seen}: the two ZVMs disagree, so the checkpoint cannot "
                    "be trusted (a proxy or a fault between the guard and one ZVM)"
                )
        return ""

    # ------------------------------------------------------------ where to tag

    def tag_site(
        self, vpg: EstateVpg, failed: Mapping[str, str], *, details: bool = True
    ) -> tuple[str | None, str]:
        """The site whose ZVM takes this VPG's tag, or why none can (names the dark site;
        ``details`` False leaves out why it is dark, for a caller that lists that once)."""
        estate = self._estate()
        live = EstateVpg(
            vpg.vpg_id,
            vpg.vpg_name,
            [s for s in vpg.listed_by if s not in failed],
            vpg.protected_site_id,
            vpg.protected_site,
            vpg.rows,
        )
        where = tag_site(live, sites=estate.names, failed=failed, tag_via=self.settings.tag_via)
        if where.site is not None:
            return where.site, ""
        dark = "; ".join(
            dark_reason(s, estate.url(s), failed[s]) for s in where.dark if s in failed
        )
        return None, where.problem + (f" ({dark})" if dark and details else "")


def _vm_key(url: str, vm: str) -> str:
    # Keyed by the exact name: ``Web-01`` never reads ``web-01``'s cached rows.
    return f"{url}|{vm}"


def _rows(answer: SiteAnswer) -> list[list[str]]:
    return sorted(
        [r.vpg_id, r.vpg_name, r.vm_id, r.instance_id or "", r.protected_site_id or ""]
        for r in answer.refs
    )


def _refs(raw: Any, vm: str) -> tuple[VmRef, ...] | None:
    """Cached rows back into VmRefs; None unless every row has the current shape."""
    if not isinstance(raw, list) or not all(
        isinstance(i, list) and len(i) == _ROW_FIELDS and all(isinstance(x, str) for x in i)
        for i in raw
    ):
        return None
    return tuple(
        VmRef(vm_id, vm, vpg_id, vpg_name, instance or None, protected or None)
        for vpg_id, vpg_name, vm_id, instance, protected in raw
    )
