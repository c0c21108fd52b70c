"""``zerto-rewind log --verify``, second half: the log against its latest signed anchor.

The anchor copies read: the guard's anchor file (under the state directory), the
Redis copy where ``state.url`` is set, or only ``--anchor PATH`` (a copy kept
elsewhere: the webhook's, a backup's). Each answer is one line for a person.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from ..config.settings import LogAnchorSettings, Settings
from ..core import log_anchor

__all__ = ["AnchorVerdict", "check_anchors"]

# What each finding is called on the one line --verify prints, and what to do.
_HEADS = {
    "cut": (
        "log CUT",
        "someone who can write the log removed its last lines; compare with a backup "
        "and the anchor's other copies (Redis, the webhook's receiver)",
    ),
    "rewritten": (
        "log REWRITTEN",
        "the log was replaced with a chain whose hashes were recomputed; compare with a "
        "backup and the anchor's other copies",
    ),
    "forged": (
        "log ANCHOR FORGED",
        "an anchor copy was altered or written by someone without the guard's key; "
        "trust the copies whose signature holds",
    ),
    "missing": (
        "log NOT ANCHORED",
        "run `zerto-rewind doctor` as the guard's user, and check the guard's warnings",
    ),
    "no_key": (
        "log NOT CHECKED",
        "run --verify as the guard's user, or restore log-anchor.pub beside its key",
    ),
}


class AnchorVerdict(NamedTuple):
    ok: bool
    line: str


def check_anchors(
    log_path: str, settings: Settings | None, anchor_copy: str | None, state_dir: str
) -> AnchorVerdict:
    """The log (its chain already intact) against the latest anchor whose signature holds.

    StateError when an anchor copy cannot be read; --verify prints it on its one line."""
    config = settings.log_anchor if settings is not None else LogAnchorSettings()
    policy = log_anchor.AnchorPolicy(
        log_path=log_path,
        anchor_path=config.path or log_anchor.default_anchor_path(state_dir, log_path),
        key_path=os.path.join(state_dir, log_anchor.KEY_FILE),
        every_lines=config.every_lines,
        every_s=config.every_s,
    )
    if anchor_copy is not None:
        anchor = log_anchor.load_anchor(anchor_copy)
        if anchor is None:
            return AnchorVerdict(False, f"log NOT CHECKED: there is no anchor copy {anchor_copy}")
        anchors = [anchor]
    else:
        anchors = _copies(policy, settings)
    key = log_anchor.public_key(policy.key_path) if anchors else None
    found = log_anchor.check(log_path, anchors, key, policy)
    if found.ok:
        return AnchorVerdict(True, found.what)
    head, todo = _HEADS[found.kind]
    return AnchorVerdict(False, f"{head}: {found.what} — {todo}")


def _copies(policy: log_anchor.AnchorPolicy, settings: Settings | None) -> list[dict[str, Any]]:
    anchors = []
    local = log_anchor.load_anchor(policy.anchor_path)
    if local is not None:
        anchors.append(local)
    if settings is not None and settings.state_url:
        shared = _redis_copy(str(settings.state_connection_url()), policy.log_path)
        if shared is not None:
            anchors.append(shared)
    return anchors


def _redis_copy(url: str, log_path: str) -> dict[str, Any] | None:
    from ..zvm.redis_conn import connect, redis_errors_as_state_errors

    key = log_anchor.redis_key(log_path)
    with redis_errors_as_state_errors(url):
        client = connect(url)
        try:
            raw = client.get(key)
        finally:
            client.close()
    if raw is None:
        return None
    return log_anchor.parse_anchor(raw, f"the Redis anchor copy {key}")
