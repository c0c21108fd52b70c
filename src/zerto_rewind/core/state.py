"""The state directory the guard shares between processes.

One JSON file per VPG records its current tag (requested / landed / failed),
how many mutating calls were allowed since it landed, and what was learned of
its cadence; small caches hold VM → VPG lookups and the ZVM's entity-type
names. Every read-modify-write happens under that file's ``flock``, so hooks
started in parallel agree on whether to request a tag or join one.

Layout::

    <state_dir>/vpgs/<vpg id>.json      TagRecord + cadence, per VPG
    <state_dir>/locks/<vpg id>.lock     flock targets
    <state_dir>/cache/vms-<hash>.json   VM name -> [(vm id, vpg id, vpg name)], short-lived
    <state_dir>/cache/entitytypes-<hash>.json
    <state_dir>/tokens/                 the Zerto client's token cache
    <state_dir>/keys/state-mac.key      the MAC key of the records above (``record_mac``)

Every VPG record and cache entry carries a MAC; one that does not verify
(changed, copied from another VPG, or written without the key) is read as
absent, so a forged "landed" tag is never reused.

Gateway replicas share the same records in Redis instead (``state_redis``,
chosen by ``state_store.open_state`` when the config names ``state.url``).
The guard and the tagger take any :class:`GuardStateLike`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import StateError
from ..fsutil import atomic_write_json, ensure_private_dir, file_lock, read_json
from .record_mac import RecordMac

if TYPE_CHECKING:
    from ..zvm.auth import TokenCacheLike

__all__ = ["GuardState", "GuardStateLike", "TagRecord", "VpgRecord"]

# A lock is held for milliseconds (a read, maybe a POST, a write); waiting
# longer than this means something is wrong, and the guard must still answer.
LOCK_TIMEOUT_S = 20.0


def cache_value(raw: Any, key: str, ttl_s: float) -> Any | None:
    """The value of an opened cache entry stored for ``key`` within ``ttl_s``, else None."""
    if not isinstance(raw, dict) or raw.get("key") != key:
        return None
    stored_at = raw.get("stored_at")
    if not isinstance(stored_at, int | float) or time.time() - stored_at > ttl_s:
        return None
    return raw.get("value")


@dataclass
class TagRecord:
    """One requested tag on a VPG and what became of it."""

    name: str
    requested_at: float
    expected_at: float
    overdue_at: float
    planned_lag_s: float = 0.0  # expected_at = journal boundary + this
    task_id: str | None = None
    state: str = "requested"  # requested | landed | failed
    checkpoint_id: str | None = None
    landed_at: float | None = None
    reason: str | None = None
    requested_by: str | None = None  # "tool VM" of the call that asked, for the log
    # The estate's site whose ZVM took the request (its task lives there); None: one ZVM.
    site: str | None = None

    def mark_landed(self, checkpoint_id: str, landed_at: float) -> None:
        """The tag is in the journal as ``checkpoint_id``, time-stamped ``landed_at``."""
        self.state, self.checkpoint_id, self.landed_at = "landed", checkpoint_id, landed_at


@dataclass
class VpgRecord:
    """What the guard knows about one VPG across processes."""

    vpg_id: str
    vpg_name: str = ""
    tag: TagRecord | None = None
    allowed_since_landing: int = 0
    cadence_s: float | None = None
    cadence_source: str | None = None
    cadence_learned_at: float | None = None
    last_checkpoint_at: float | None = None
    lag_s: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    # When the guard requested each tag of the last minute (guard.max_tags_per_minute).
    tag_times: list[float] = field(default_factory=list)

    @classmethod
    def from_json(cls, vpg_id: str, raw: Any) -> VpgRecord:
        if not isinstance(raw, dict):
            return cls(vpg_id)
        data = dict(raw)
        tag = data.pop("tag", None)
        try:
            record = cls(**{k: v for k, v in data.items() if k in _VPG_FIELDS})
            record.tag = TagRecord(**tag) if isinstance(tag, dict) else None
        except TypeError:
            return cls(vpg_id)  # a record from an incompatible version: start over
        return record


_VPG_FIELDS = frozenset(VpgRecord.__dataclass_fields__) - {"tag"}
_HISTORY_KEEP = 20


@runtime_checkable
class GuardStateLike(Protocol):
    """What the guard and the tagger need of shared state: a state directory, or Redis."""

    def vpg(self, vpg_id: str) -> AbstractContextManager[VpgRecord]:
        """Lock the VPG's record, yield it, and save what the block changed."""
        ...

    def peek_vpg(self, vpg_id: str) -> VpgRecord:
        """Read a VPG's record without locking (for display and previews)."""
        ...

    def cached(self, kind: str, key: str, ttl_s: float) -> Any | None:
        """A cached value younger than ``ttl_s``, else None."""
        ...

    def store(self, kind: str, key: str, value: Any) -> None:
        """Cache ``value`` under (kind, key)."""
        ...

    def token_cache(self) -> TokenCacheLike:
        """The ZVM token cache kept beside this state."""
        ...

    def check(self) -> None:
        """Raise StateError if the state cannot be used right now (for health checks)."""
        ...


class GuardState:
    """Access to the state directory; safe for many concurrent processes."""

    def __init__(self, state_dir: str, *, mac: RecordMac | None = None) -> None:
        self.root = ensure_private_dir(state_dir)
        for sub in ("vpgs", "locks", "cache"):
            ensure_private_dir(os.path.join(self.root, sub))
        self.mac = mac if mac is not None else RecordMac.for_state_dir(self.root)

    # ---- VPG records

    @contextlib.contextmanager
    def vpg(self, vpg_id: str) -> Iterator[VpgRecord]:
        """Lock the VPG's record, yield it, and save what the block changed."""
        key = _safe_name(vpg_id)
        with file_lock(os.path.join(self.root, "locks", f"{key}.lock"), timeout_s=LOCK_TIMEOUT_S):
            path = os.path.join(self.root, "vpgs", f"{key}.json")
            record = self._read_vpg(vpg_id, path)
            before = asdict(record)
            yield record
            if asdict(record) != before:
                atomic_write_json(path, self.mac.seal("vpg", vpg_id, asdict(record)))

    def peek_vpg(self, vpg_id: str) -> VpgRecord:
        """Read a VPG's record without locking (for display and previews)."""
        path = os.path.join(self.root, "vpgs", f"{_safe_name(vpg_id)}.json")
        return self._read_vpg(vpg_id, path)

    def _read_vpg(self, vpg_id: str, path: str) -> VpgRecord:
        # A record whose MAC fails is absent: the guard starts over and tags anew.
        return VpgRecord.from_json(vpg_id, self.mac.open("vpg", vpg_id, read_json(path)))

    # ---- short-lived caches

    def cached(self, kind: str, key: str, ttl_s: float) -> Any | None:
        """A cached value younger than ``ttl_s``, else None."""
        raw = self.mac.open(f"cache:{kind}", key, read_json(self._cache_path(kind, key)))
        return cache_value(raw, key, ttl_s)

    def store(self, kind: str, key: str, value: Any) -> None:
        """Cache ``value`` under (kind, key)."""
        payload = {"key": key, "stored_at": time.time(), "value": value}
        atomic_write_json(self._cache_path(kind, key), self.mac.seal(f"cache:{kind}", key, payload))

    # ---- beside the records

    def token_cache(self) -> TokenCacheLike:
        """The token files under ``<state_dir>/tokens/``."""
        from ..zvm.auth import TokenCache

        return TokenCache(self.root)

    def check(self) -> None:
        """Raise StateError unless the state directory can be written."""
        for sub in ("vpgs", "locks", "cache"):
            path = os.path.join(self.root, sub)
            if not os.access(path, os.W_OK | os.X_OK):
                msg = f"the state directory {path} is not writable; check its owner and mode"
                raise StateError(msg)

    def _cache_path(self, kind: str, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        return os.path.join(self.root, "cache", f"{kind}-{digest}.json")


def remember(record: VpgRecord, entry: dict[str, Any]) -> None:
    """Append to the VPG's short tag history (newest last)."""
    record.history = [*record.history, entry][-_HISTORY_KEEP:]


def _safe_name(identifier: str) -> str:
    cleaned = "".join(ch for ch in identifier if ch.isalnum() or ch in "-_.")
    if cleaned == identifier and 0 < len(cleaned) <= 100 and not cleaned.startswith("."):
        return cleaned
    return "h-" + hashlib.sha256(identifier.encode()).hexdigest()[:32]
