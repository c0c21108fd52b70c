"""SimConfig: every knob of the simulator, with the defaults a demo wants."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from zerto_rewind.sim.enums import DEFAULT_CADENCE_S

if TYPE_CHECKING:
    from zerto_rewind.sim.vmstate import VcenterLink
    from zerto_rewind.sim.vsphere import VcenterSpec


def _secret() -> str:
    return secrets.token_urlsafe(18)


@dataclass
class SimConfig:
    """How a :class:`~zerto_rewind.sim.SimServer` behaves.

    >>> SimConfig(port=0, cadences={"aws": 6.0}, jitter=0.0)  # doctest: +ELLIPSIS
    SimConfig(...)
    """

    host: str = "127.0.0.1"
    port: int = 0
    tls: bool = True
    cert_dir: Path | None = None
    estate_file: Path | None = None
    vms: int = 0
    vms_per_vpg: int = 1
    cadences: dict[str, float] = field(default_factory=dict)
    jitter: float = 0.03
    jitter_cap_s: float = 0.2
    tag_lag_s: float = 1.0
    task_duration_s: float = 0.3
    token_ttl_s: int = 300
    history_minutes: int = 60
    client_id: str = "zerto-rewind-sim"
    client_secret: str = field(default_factory=_secret)
    username: str = "admin"
    password: str = field(default_factory=_secret)
    # Which of RpoNotMeetingSLA / HistoryNotMeetingSLA is 3 is UNCONFIRMED.
    status_numbering: Literal["docs", "community"] = "docs"
    seed: int | None = None
    clock: Callable[[], float] = time.time
    # A vCenter to link to (``--vcenter``): VM identities from it, VM states kept and restored.
    vcenter: VcenterSpec | None = None
    # Or a link already made, used instead of ``vcenter`` (the demo's in-memory vCenter).
    vcenter_link: VcenterLink | None = None

    def cadence_for(self, kind: str) -> float:
        """The checkpoint cadence of a protected-site kind, after overrides."""
        return self.cadences.get(kind, DEFAULT_CADENCE_S[kind])
