"""The guard's collaborators: the estate's ZVMs, the shared state, the tagger.

:class:`GuardEstate` is what :class:`~.guard.Guard` decides over: the ZVM of each
site (made on first use, which keeps httpx off the read-only path), the site view
with its down marks, the shared state (directory or Redis) and the words a message
uses for them. The decision table itself is :mod:`.guard`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..errors import ZvmError
    from ..zvm.client import ZvmClient
    from ..zvm.estate import Estate
    from .decision import VpgOutcome
    from .sites import SiteView
    from .state import GuardStateLike
    from .tagging import Tagger

__all__ = ["GuardEstate", "entity_type_names"]

_ENTITY_TYPES_TTL_S = 86_400.0


class GuardEstate:
    """The estate's ZVMs (one per site), the site view and the shared state of a guard."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: ZvmClient | None = None,
        clients: Mapping[str, ZvmClient] | None = None,
        state: GuardStateLike | None = None,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rewind_tool: str | None = None,
    ) -> None:
        """``rewind_tool``: the recovery-plan tool as the agent sees it (its door knows
        whether zerto-rewind's MCP server is installed); None names the CLI instead.

        ``client`` stands in for the first site's ZVM, ``clients`` for any site's (tests).
        """
        self.settings = settings
        self.rewind_tool = rewind_tool
        self._given: dict[str, ZvmClient] = dict(clients or {})
        if client is not None:
            self._given.setdefault(settings.zvm.site, client)
        self._estate: Estate | None = None
        self._sites: SiteView | None = None
        self._dark_errors: dict[int, str] = {}  # id(error) -> the site whose ZVM raised it
        self._state = state
        self.wall, self.mono, self.sleep = wall, mono, sleep

    def close(self) -> None:
        """Release the ZVM connections."""
        if self._estate is not None:
            self._estate.close()
        else:
            for client in self._given.values():
                client.close()

    # ------------------------------------------------------------------ collaborators

    def client(self) -> ZvmClient:
        """The first site's ZVM client, for callers that know one ZVM (created on first use,
        which keeps httpx off the read-only path). The whole estate is :meth:`estate`."""
        estate = self.estate()
        return estate.client(estate.first)

    def estate(self) -> Estate:
        """Every site's ZVM, in config order; a failing request marks its site down."""
        if self._estate is None:
            from ..zvm.estate import Estate

            zvms = self.settings.zvms
            missing = [site for site in zvms if site not in self._given]
            cache = self.state().token_cache() if missing else None
            self._estate = Estate(
                zvms if missing else {},
                token_cache=cache,
                clients=self._given,
                on_dark=self._on_dark,
                mono=self.mono,
            )
        return self._estate

    def sites(self) -> SiteView:
        """The estate seen through the shared state: per-ZVM caches and site-down marks."""
        if self._sites is None:
            from .sites import SiteView

            self._sites = SiteView(
                self.estate, self.state, self.settings.guard, self.settings.guard.vm_cache_ttl_s
            )
        return self._sites

    def _on_dark(self, site: str, exc: ZvmError) -> None:
        if len(self.settings.zvms) > 1:  # one ZVM: its errors read as they always did
            self._dark_errors[id(exc)] = site
            self.sites().mark_down(site, exc)

    def _client_of(self, outcome: VpgOutcome) -> ZvmClient:
        return self.estate().client(outcome.site) if outcome.site else self.client()

    def _zvm_words(self) -> str:
        """The estate's ZVMs as a message names them."""
        estate = self.estate()
        if len(estate.names) == 1:
            return f"the ZVM at {estate.url(estate.first)}"
        return "the ZVMs of " + ", ".join(f"site {s} ({estate.url(s)})" for s in estate.names)

    def _site_words(self, site: str) -> str:
        estate = self.estate()
        if len(estate.names) == 1:
            return f"the ZVM at {estate.url(site)}"
        return f"the ZVM of site {site} ({estate.url(site)})"

    def _dark_words(self, failed: dict[str, str]) -> str:
        from .sites import dark_reason

        estate = self.estate()
        return "; ".join(dark_reason(s, estate.url(s), why) for s, why in failed.items())

    def state(self) -> GuardStateLike:
        """The shared state (directory, or Redis for gateway replicas), opened on first use."""
        if self._state is None:
            from .state_store import open_state

            self._state = open_state(self.settings.state_connection_url(), self.settings.state_dir)
        return self._state

    def _tagger(self, kind: type[Tagger] | None = None) -> Tagger:
        """The tag rules' executor; ``kind``: another one (the preview's, which plans only)."""
        from .tagging import Tagger

        return (kind or Tagger)(
            self.client(),
            self.state(),
            self.settings.guard,
            wall=self.wall,
            mono=self.mono,
            sleep=self.sleep,
            site_client=self._site_client,
        )

    def _site_client(self, site: str) -> ZvmClient | None:
        """The client of a site that took a tag, unless it is unknown or marked down."""
        if site not in self.estate().names or self.sites().down(site) is not None:
            return None
        return self.estate().client(site)


def entity_type_names(
    client: ZvmClient,
    state: GuardStateLike | None = None,
    *,
    deadline: float | None = None,
    remember: bool = True,
) -> list[str]:
    """The ZVM's site-type names (``GET /v1/vpgs/entitytypes``), cached a day per ZVM.

    An older ZVM without the lookup gives ``[]``: the built-in table in
    :func:`zvm.models.site_kind` then applies. ``remember=False`` reads the
    cache but never writes it (previews change nothing).
    """
    from ..errors import ApiError

    key = client.settings.url
    if state is not None:
        cached = state.cached("entitytypes", key, _ENTITY_TYPES_TTL_S)
        if isinstance(cached, list) and all(isinstance(n, str) for n in cached):
            return cached
    try:
        names = client.entity_types(deadline=deadline)
    except ApiError:
        names = []
    if state is not None and remember:
        state.store("entitytypes", key, names)
    return names
