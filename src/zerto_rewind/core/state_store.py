"""Opens the guard's shared state: the state directory, or Redis for gateway replicas.

Its own module because each backend imports ``state`` (the records), and
``state`` must import neither.
"""

from __future__ import annotations

from .approvals import ApprovalStore, FileApprovalStore
from .record_mac import RecordMac
from .state import GuardState, GuardStateLike

__all__ = ["open_approvals", "open_state"]


def open_state(
    state_url: str | None, state_dir: str, *, prefix: str | None = None
) -> GuardStateLike:
    """The Redis state when ``state_url`` is set, else the files under ``state_dir``.

    ``prefix`` namespaces the Redis keys (default ``zerto-rewind:``); it lets
    several guards share one Redis database. Nothing connects until first use.
    Records carry a MAC under ``<state_dir>/keys/state-mac.key`` in either case.
    """
    if not state_url:
        return GuardState(state_dir)
    from .state_redis import RedisGuardState

    return RedisGuardState(state_url, prefix=prefix, mac=RecordMac.for_state_dir(state_dir))


def open_approvals(
    state_url: str | None, state_dir: str, *, prefix: str | None = None
) -> ApprovalStore:
    """The approval requests in Redis when ``state_url`` is set, else under ``state_dir``."""
    if not state_url:
        return FileApprovalStore(state_dir)
    from .approvals_redis import RedisApprovalStore

    return RedisApprovalStore(state_url, prefix=prefix, mac=RecordMac.for_state_dir(state_dir))
