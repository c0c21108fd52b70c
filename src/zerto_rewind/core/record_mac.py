"""A MAC on every record of the shared state that gates a decision.

The approval requests and the VPG records (whose tag says that a checkpoint
landed) decide whether a call runs. Whoever can write where they are kept
(a Redis that an agent's user reaches, a state directory restored from a copy)
could otherwise approve a call or make a checkpoint appear. Each record is
therefore stored with an HMAC-SHA256 under a key that only the guard's user
can read (``keys.load_or_create_key``, ``<state_dir>/keys/state-mac.key``),
and a record whose MAC does not verify is read as *absent*: no request, no
tag, nothing cached, so the call is asked or refused, never allowed.

What the MAC covers, and what it does not:

- the record's content, serialized canonically (sorted keys, no spaces, JSON
  numbers as Python writes them), so any changed field fails;
- the record's kind and its key (request id, VPG id, cache key), so a valid
  record copied under another id or VPG fails;
- not its freshness: an older record that was valid once still verifies.
  The stores close the replay that matters (an approved request restored after
  it was used): each process remembers the approvals it used until their
  expiry, and an approval never outlives its expiry, which the MAC covers. A
  restored tag record is caught by the journal check (``guard``: a landed tag is
  reused only while the ZVM journal shows no later tag of the guard's).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from .keys import load_or_create_key

__all__ = ["MAC_FIELD", "RecordMac", "state_key_path"]

MAC_FIELD = "mac"
_VERSION = "v1"


def state_key_path(state_dir: str) -> str:
    """Where the state's MAC key lives: under the state directory, private to its owner."""
    return os.path.join(state_dir, "keys", "state-mac.key")


class RecordMac:
    """Seals records with, and checks them against, one HMAC key (loaded on first use)."""

    def __init__(self, key: bytes | None = None, *, key_path: str | None = None) -> None:
        if key is None and key_path is None:
            msg = "a RecordMac needs a key or the path of its key file"
            raise ValueError(msg)
        self._key = key
        self._key_path = key_path
        self._loading = threading.Lock()

    @classmethod
    def for_state_dir(cls, state_dir: str) -> RecordMac:
        """The MAC whose key is ``<state_dir>/keys/state-mac.key``, made on first use."""
        return cls(key_path=state_key_path(state_dir))

    def seal(self, kind: str, ident: str, record: Mapping[str, Any]) -> dict[str, Any]:
        """``record`` with its MAC added under :data:`MAC_FIELD`."""
        body = {k: v for k, v in record.items() if k != MAC_FIELD}
        return {**body, MAC_FIELD: self._tag(kind, ident, body)}

    def open(self, kind: str, ident: str, raw: Any) -> dict[str, Any] | None:
        """``raw`` without its MAC if the MAC verifies for (kind, ident), else None (absent)."""
        if not isinstance(raw, dict):
            return None
        claimed = raw.get(MAC_FIELD)
        if not isinstance(claimed, str):
            return None  # written before records had MACs, or by someone without the key
        body = {k: v for k, v in raw.items() if k != MAC_FIELD}
        expected = self._tag(kind, ident, body)
        return body if hmac.compare_digest(claimed, expected) else None

    def _tag(self, kind: str, ident: str, body: Mapping[str, Any]) -> str:
        # One JSON array: kind, id and content cannot be shifted into one another.
        message = json.dumps(
            [_VERSION, kind, ident, body],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        digest = hmac.new(self._secret(), message.encode(), hashlib.sha256).hexdigest()
        return f"{_VERSION}:{digest}"

    def _secret(self) -> bytes:
        key = self._key
        if key is None:
            with self._loading:
                key = self._key or load_or_create_key(self._key_path or "")
                self._key = key
        return key
