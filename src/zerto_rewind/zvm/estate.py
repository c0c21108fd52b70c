"""A whole estate: one ZVM per site, asked together, their answers merged.

Each site's ZVM knows the VPGs protected from it and those recovering to it, so a
VM protected at headquarters and recovering to the DR site is listed by both
ZVMs, and a VM of the DR site only by the DR site's ZVM. The rules:

* every ZVM is asked at once, each in its own thread within its own timeout
  (``connect_timeout_s + read_timeout_s``, never past the caller's deadline);
  a site that does not answer in that time is a failed site, whatever it does later;
* a VPG listed by two ZVMs is one VPG, keyed by its identifier;
* a VPG's protected site is the site whose ``localsite`` identifier equals the
  VPG's ``ProtectedSite.identifier``: that site's ZVM takes the tag
  (:func:`tag_site`; ``guard.tag_via: any`` also lets a recovery site's ZVM).

Nothing here decides a call: :mod:`zerto_rewind.core.sites` keeps the caches and the
"site down" marks and turns a failed site into a deny.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from ..errors import ApiError, NotFound, ZertoRewindError, ZvmError, ZvmTimeout
from .models import VmRef

if TYPE_CHECKING:
    from ._http import ZvmSettingsLike
    from .auth import TokenCacheLike
    from .client import ZvmClient

__all__ = [
    "Answers",
    "Estate",
    "EstateVpg",
    "SiteAnswer",
    "TagSite",
    "is_dark",
    "merge_vpgs",
    "site_deadline",
    "tag_site",
]

T = TypeVar("T")

# A worker thread past its site's deadline is given this long to come back with its
# own timeout error before the site is counted as not answering.
_JOIN_GRACE_S = 0.25


def is_dark(exc: BaseException) -> bool:
    """Whether an error means the site's ZVM is not usable right now (down, hanging, TLS,
    refused credentials, 5xx), as opposed to an answer about one object (404, 4xx)."""
    if isinstance(exc, NotFound):
        return False
    if isinstance(exc, ApiError):
        return (exc.status or 0) >= 500
    return isinstance(exc, ZvmError)


def site_deadline(settings: ZvmSettingsLike, now: float, deadline: float) -> float:
    """The site's own time: its connect and read timeouts, never past the caller's."""
    own = float(getattr(settings, "connect_timeout_s", 5.0)) + float(
        getattr(settings, "read_timeout_s", 30.0)
    )
    return min(deadline, now + own)


@dataclass(frozen=True)
class SiteAnswer:
    """What one site's ZVM says of one VM name: its own site identifier and its rows."""

    local_id: str | None
    refs: tuple[VmRef, ...]


@dataclass
class EstateVpg:
    """One VPG as the estate sees it, however many ZVMs list it."""

    vpg_id: str
    vpg_name: str
    listed_by: list[str] = field(default_factory=list)  # sites, in estate order
    protected_site_id: str | None = None
    protected_site: str | None = None  # the estate's site of that identifier, if any
    # VM name -> the row to take the VM's identity from (the protected site's, if listed)
    rows: dict[str, VmRef] = field(default_factory=dict)


def merge_vpgs(answers: Mapping[str, SiteAnswer], order: Sequence[str]) -> dict[str, EstateVpg]:
    """The VPGs every answering site lists, one per identifier, in estate order.

    ``order`` is the estate's site order; a site missing from ``answers`` did not answer.
    """
    by_local = {a.local_id: site for site, a in answers.items() if a.local_id}
    merged: dict[str, EstateVpg] = {}
    for site in order:
        answer = answers.get(site)
        if answer is None:
            continue
        for ref in answer.refs:
            key = ref.vpg_id.lower()  # Zerto's identifiers are GUIDs; case is no difference
            vpg = merged.setdefault(key, EstateVpg(ref.vpg_id, ref.vpg_name))
            if site not in vpg.listed_by:
                vpg.listed_by.append(site)
            if vpg.protected_site_id is None and ref.protected_site_id:
                vpg.protected_site_id = ref.protected_site_id
                vpg.protected_site = by_local.get(ref.protected_site_id)
            own = answer.local_id is not None and answer.local_id == ref.protected_site_id
            if own or ref.vm_name not in vpg.rows:
                vpg.rows[ref.vm_name] = ref
    return merged


@dataclass(frozen=True)
class TagSite:
    """Where a VPG's tag goes: ``site``, or None with ``problem`` and the ``dark`` sites."""

    site: str | None
    problem: str = ""
    dark: tuple[str, ...] = ()


def tag_site(
    vpg: EstateVpg, *, sites: Sequence[str], failed: Iterable[str], tag_via: str
) -> TagSite:
    """The site whose ZVM takes the VPG's tag, or why no site can.

    ``vpg.listed_by`` holds the sites that answered and list it; ``failed`` the sites
    that did not answer. One site: that site, as before the estate. Several: the
    protected site's ZVM; with ``tag_via == "any"`` else the first answering site
    that lists it.
    """
    down = set(failed)
    failed = [s for s in sites if s in down]
    if len(sites) == 1:
        if vpg.listed_by:
            return TagSite(vpg.listed_by[0])
        return TagSite(
            None, f"the ZVM of site {sites[0]}, which holds VPG {vpg.vpg_name!r}, did not answer",
            (sites[0],),
        )  # fmt: skip
    protected = vpg.protected_site
    if protected is not None and protected in vpg.listed_by:
        return TagSite(protected)
    if tag_via == "any" and vpg.listed_by:
        return TagSite(vpg.listed_by[0])
    seen_by = ", ".join(vpg.listed_by) or "no site that answered"
    if protected is not None or failed:
        dark = (protected,) if protected is not None else tuple(failed)
        maybe = "" if protected is not None else " (as far as the sites that answered can tell)"
        return TagSite(
            None,
            f"VPG {vpg.vpg_name!r} is protected from site {', '.join(dark)}{maybe}, whose ZVM "
            f"did not answer, so no ZVM can take its checkpoint (listed by {seen_by}; "
            f"guard.tag_via: {tag_via})",
            dark,
        )
    where = vpg.protected_site_id or "that the ZVMs do not name"
    return TagSite(
        None,
        f"VPG {vpg.vpg_name!r} is protected from site {where}, which is not one of the "
        f"guard's ZVMs (zvms: {', '.join(sites)}), and the checkpoint is taken on the "
        "protected site's ZVM (guard.tag_via: protected). An operator can add that site's "
        "ZVM to zvms",
    )


@dataclass
class Answers(Generic[T]):
    """Each site's result, or the error it failed with (never both)."""

    ok: dict[str, T] = field(default_factory=dict)
    failed: dict[str, ZertoRewindError] = field(default_factory=dict)


class Estate:
    """The estate's ZVMs by site name, in config order, each with its own client."""

    def __init__(
        self,
        sites: Mapping[str, ZvmSettingsLike],
        *,
        token_cache: TokenCacheLike | None = None,
        clients: Mapping[str, ZvmClient] | None = None,
        on_dark: Callable[[str, ZvmError], None] | None = None,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clients`` stand in for some sites (tests); the others are made on first use.

        ``on_dark(site, error)`` hears of every request of a site that failed as
        :func:`is_dark` counts it, whichever caller sent it.
        """
        if not sites and not clients:
            msg = "an estate needs at least one ZVM"
            raise ValueError(msg)
        self._settings = dict(sites)
        self._clients: dict[str, ZvmClient] = dict(clients or {})
        self.names: tuple[str, ...] = tuple(dict.fromkeys([*self._settings, *self._clients]))
        self._token_cache = token_cache
        self._on_dark = on_dark
        self._mono = mono
        self._lock = threading.Lock()

    @property
    def first(self) -> str:
        """The first site: what a caller that knows one ZVM gets."""
        return self.names[0]

    def settings(self, site: str) -> ZvmSettingsLike:
        """The site's ZVM settings."""
        if site in self._settings:
            return self._settings[site]
        return self._clients[site].settings

    def url(self, site: str) -> str:
        """The site's ZVM URL, for messages."""
        return self.settings(site).url

    def client(self, site: str) -> ZvmClient:
        """The site's client, made on first use (one connection pool per ZVM)."""
        with self._lock:
            found = self._clients.get(site)
            if found is None:
                from .client import ZvmClient

                found = ZvmClient(
                    self._settings[site],
                    token_cache=self._token_cache,
                    on_failure=self._observer(site),
                )
                self._clients[site] = found
            return found

    def _observer(self, site: str) -> Callable[[ZvmError], None] | None:
        on_dark = self._on_dark
        if on_dark is None:
            return None

        def observe(exc: ZvmError) -> None:
            if is_dark(exc):
                on_dark(site, exc)

        return observe

    def ask(
        self,
        work: Callable[[str, ZvmClient, float], T],
        sites: Iterable[str],
        deadline: float,
    ) -> Answers[T]:
        """Run ``work(site, client, site_deadline)`` on each site at once; collect the results.

        One site runs inline (no thread to pay for). Several run in daemon threads, so a
        site that hangs past its own deadline never holds the answer, nor the process's exit.
        """
        chosen = list(dict.fromkeys(sites))
        answers: Answers[T] = Answers()
        if len(chosen) <= 1:
            for site in chosen:
                self._run(work, site, deadline, answers)
            return answers
        threads: list[tuple[str, threading.Thread, float]] = []
        now = self._mono()
        for site in chosen:
            own = site_deadline(self.settings(site), now, deadline)
            thread = threading.Thread(
                target=self._run,
                args=(work, site, own, answers),
                name=f"zvm-{site}",
                daemon=True,
            )
            thread.start()
            threads.append((site, thread, own))
        for site, thread, own in threads:
            thread.join(max(0.0, own - self._mono()) + _JOIN_GRACE_S)
            with self._lock:
                if site not in answers.ok and site not in answers.failed:
                    msg = (
                        f"the ZVM at {self.url(site)} did not answer within its timeout "
                        f"({own - now:.1f} s)"
                    )
                    answers.failed[site] = ZvmTimeout(msg)
        with self._lock:  # a straggler may still write: hand back a settled copy
            return Answers(dict(answers.ok), dict(answers.failed))

    def _run(
        self,
        work: Callable[[str, ZvmClient, float], T],
        site: str,
        deadline: float,
        answers: Answers[T],
    ) -> None:
        error: ZertoRewindError | None = None
        try:
            result = work(site, self.client(site), deadline)
        except ZertoRewindError as exc:
            error = exc
        except Exception as exc:  # any surprise is that site's failure, not the call's pass
            error = ZvmError(f"{type(exc).__name__}: {exc}")
        with self._lock:
            if site in answers.ok or site in answers.failed:
                return  # already counted as not answering: a late answer changes nothing
            if error is not None:
                answers.failed[site] = error
            else:
                answers.ok[site] = result

    def close(self) -> None:
        """Close every client made or given."""
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            client.close()
