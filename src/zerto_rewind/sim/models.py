"""Live objects of the simulated estate: sites, VMs and VPGs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from zerto_rewind.sim.journal import Journal
from zerto_rewind.sim.vmstate import VmState

# Identifiers are derived from names so a reset, or a restart with the same estate,
# gives the same ids; that makes logs and demos easy to follow.
_NAMESPACE = uuid.UUID("5f0e1f6e-3c1b-4d0a-9f3e-7a2e0d5b7c11")


def stable_guid(kind: str, name: str) -> str:
    """A GUID fixed by ``kind`` and ``name`` (case-insensitive)."""
    return str(uuid.uuid5(_NAMESPACE, f"{kind}:{name.lower()}"))


@dataclass
class Site:
    """A site. Which site is "local" depends on the ZVM answering (see ``Backend.local``)."""

    identifier: str
    name: str
    kind: str


@dataclass
class Vm:
    """A protected VM; its identity is ``<protected site guid>.vm-<n>``."""

    identifier: str
    name: str
    site: Site
    instance_uuid: str | None = None  # Link.instance_identifier, when the estate gives one


@dataclass
class FailoverTest:
    """A failover test in progress."""

    checkpoint_id: str
    started: float
    vm_ids: tuple[str, ...]


@dataclass
class Failover:
    """A live failover waiting for commit or rollback."""

    checkpoint_id: str
    commit_policy: int
    previous: tuple[int, int]


@dataclass
class Restore:
    """A journal VM restore waiting for commit or rollback."""

    vm_id: str
    checkpoint_id: str
    restored_name: str
    previous_sub_status: int
    kept_state: VmState | None = None  # what a linked vCenter's VM goes back to on commit


@dataclass
class TagBehaviour:
    """How the next tags on a VPG land: ``normal``, ``late``, ``never`` or ``fail``.

    ``fail`` fails the tag task itself on a healthy VPG, with ``reason`` as its
    CompleteReason (a ZVM that accepts the request, then refuses it).
    """

    mode: str = "normal"
    extra_delay_s: float = 0.0
    remaining: int | None = 1
    reason: str | None = None


@dataclass
class Vpg:
    """A VPG with its journal and whatever recovery operation is running."""

    identifier: str
    name: str
    protected: Site
    recovery: Site
    vms: list[Vm]
    status: int
    sub_status: int
    journal: Journal
    history_minutes: int
    rpo_seconds: int
    priority: int
    tag_behaviour: TagBehaviour = field(default_factory=TagBehaviour)
    test: FailoverTest | None = None
    failover: Failover | None = None
    restores: dict[str, Restore] = field(default_factory=dict)
    last_test: float | None = None
