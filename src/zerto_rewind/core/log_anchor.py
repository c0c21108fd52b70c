"""Anchors of the decision log: its head, signed, kept where the log's writer cannot reach.

A hash chain shows an edited or deleted line, but not a cut-off tail: what is left
is still a valid chain (see :func:`.decisions_log.verify`). An anchor is the chain's
head (``seq`` and the SHA-256 of that line) signed with an Ed25519 key that only the
guard's user holds, written every ``log_anchor.every_lines`` lines or
``log_anchor.every_s`` seconds, whichever comes first, and on the first line a writer
logs with no anchor yet. Copies: a file under the state directory (not beside the
log), and, in the gateway, Redis (``state.url``) and the approvals webhook.

:func:`check` compares a log with its latest anchor: a log that ends before the
anchored line was cut short; an anchored line whose hash differs was rewritten (or
cut and written again). Lines written since the last anchor (at most
``every_lines - 1`` lines, or ``every_s`` seconds) are vouched for by nothing but the
chain.

``cryptography`` is imported only when an anchor is due or checked: the hook is a
process per call and its logging path stays light.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..errors import StateError
from ..fsutil import read_if_present

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from ..config.settings import Settings

__all__ = [
    "ANCHOR_TYPE",
    "AnchorCheck",
    "AnchorPolicy",
    "anchor_head",
    "check",
    "due",
    "load_anchor",
    "policy_for",
    "public_key",
    "redis_key",
]

ANCHOR_TYPE = "zerto-rewind.log-anchor"
KEY_FILE = "log-anchor.key"
PUBLIC_KEY_FILE = "log-anchor.pub"

Publisher = Callable[[dict[str, Any]], None]


class AnchorPolicy(NamedTuple):
    """Where and how often one log is anchored."""

    log_path: str
    anchor_path: str
    key_path: str
    every_lines: int = 100
    every_s: float = 60.0
    publish: Publisher | None = None
    """Extra copies (Redis, the webhook); called outside the log's lock; must not raise."""


def policy_for(settings: Settings, publish: Publisher | None = None) -> AnchorPolicy:
    """The anchoring of ``settings.log_path``: the anchor file and key under ``state_dir``."""
    config = settings.log_anchor
    return AnchorPolicy(
        log_path=settings.log_path,
        anchor_path=config.path or default_anchor_path(settings.state_dir, settings.log_path),
        key_path=os.path.join(settings.state_dir, KEY_FILE),
        every_lines=config.every_lines,
        every_s=config.every_s,
        publish=publish,
    )


def default_anchor_path(state_dir: str, log_path: str) -> str:
    """One anchor file per log, named by its path: several logs may share a state dir."""
    from ..config.loader import sha256_hex

    name = sha256_hex(os.path.abspath(log_path).encode())[:16]
    return os.path.join(state_dir, "log-anchors", f"{name}.json")


def redis_key(log_path: str) -> str:
    """Where the gateway keeps its copy of ``log_path``'s latest anchor in Redis."""
    from ..config.loader import sha256_hex

    return f"zerto-rewind:log-anchor:{sha256_hex(os.path.abspath(log_path).encode())[:16]}"


# ------------------------------------------------------------------------- writing

# anchor path -> (seq, epoch) of the last anchor this process wrote or read: the
# gateway's hot path pays a dict lookup, not a file read, per line.
_LAST: dict[str, tuple[int, float]] = {}


def due(policy: AnchorPolicy, seq: int, now: float) -> bool:
    """Whether line ``seq``, written at ``now``, is to be anchored."""
    last = _LAST.get(policy.anchor_path)
    if last is None:
        anchor = _read_quietly(policy.anchor_path)
        if anchor is None:
            return True  # no anchor yet: the first line this writer logs gets one
        last = (anchor["seq"], anchor["epoch"])
        _LAST[policy.anchor_path] = last
    if seq < last[0]:
        return True  # the log restarted below its anchor: anchor what it is now
    return seq - last[0] >= policy.every_lines or now - last[1] >= policy.every_s


def anchor_head(policy: AnchorPolicy, seq: int, line_hash: str, now: float) -> dict[str, Any]:
    """Sign the head (``seq``, ``line_hash``) and write it to the anchor file; the anchor.

    Called under the log's lock, so anchors follow the log's order. The file is
    replaced whole (written beside it, then renamed) and synced: this happens once
    per ``every_lines`` lines at most, so the sync is amortised.
    """
    from .decision import fmt_time

    key = _private_key(policy.key_path)
    body: dict[str, Any] = {
        "type": ANCHOR_TYPE,
        "v": 1,
        "log": os.path.abspath(policy.log_path),
        "seq": seq,
        "hash": line_hash,
        "at": fmt_time(now),
        "epoch": round(now, 3),
        "key_id": _key_id(key.public_key()),
    }
    anchor = {**body, "sig": base64.b64encode(key.sign(_signed_bytes(body))).decode()}
    _write_file(policy.anchor_path, anchor)
    _LAST[policy.anchor_path] = (seq, now)
    return anchor


def _write_file(path: str, anchor: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, (json.dumps(anchor, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def _signed_bytes(body: dict[str, Any]) -> bytes:
    """Sorted-key compact JSON of every field but ``sig``: what is signed."""
    fields = {k: v for k, v in body.items() if k != "sig"}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# ------------------------------------------------------------------------- the key


def _private_key(path: str) -> Ed25519PrivateKey:
    """The signing key at ``path``, made on first use (0600); refused if others can read it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _new_key(path)
    except OSError as exc:
        msg = f"cannot read the log anchor key {path}: {exc.strerror}; run as the guard's user"
        raise StateError(msg) from exc
    with os.fdopen(fd, "rb") as fh:
        _check_private(path, os.fstat(fh.fileno()))
        raw = fh.read()
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except ValueError as exc:
        msg = f"the log anchor key {path} is not a PEM private key; restore it from a backup"
        raise StateError(msg) from exc
    if not isinstance(key, Ed25519PrivateKey):
        msg = f"the log anchor key {path} is not an Ed25519 key; restore it from a backup"
        raise StateError(msg)
    return key


def _check_private(path: str, info: os.stat_result) -> None:
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        msg = (
            f"the log anchor key {path} is not private (mode {stat.S_IMODE(info.st_mode):04o}, "
            f"owner uid {info.st_uid}): whoever can read it can sign a false anchor. Make it "
            f"the guard user's, mode 0600 (chmod 600), or delete it and re-verify the log"
        )
        raise StateError(msg)


def _new_key(path: str) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    try:  # a link appears whole, and only once: two first writers race, the loser
        os.link(temporary, path)  # reads the winner's key
    except FileExistsError:
        return _private_key(path)
    finally:
        os.unlink(temporary)
    public = os.path.join(os.path.dirname(path), PUBLIC_KEY_FILE)
    _write_public(public, key.public_key())
    return key


def _write_public(path: str, key: Ed25519PublicKey) -> None:
    from cryptography.hazmat.primitives import serialization

    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as fh:
        fh.write(pem)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def public_key(key_path: str) -> Ed25519PublicKey | None:
    """The key that checks anchors: from the private key when readable (it cannot be
    swapped without the signer noticing), else the public file beside it; None if neither."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if os.access(key_path, os.R_OK):
        return _private_key(key_path).public_key()
    public = os.path.join(os.path.dirname(key_path), PUBLIC_KEY_FILE)
    try:
        with open(public, "rb") as fh:
            key = serialization.load_pem_public_key(fh.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        msg = f"cannot read the log anchor's public key {public}: {exc}"
        raise StateError(msg) from exc
    return key if isinstance(key, Ed25519PublicKey) else None


def _key_id(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    from ..config.loader import sha256_hex

    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_hex(raw)[:16]


# ------------------------------------------------------------------------- reading


def load_anchor(path: str) -> dict[str, Any] | None:
    """The anchor at ``path``; None if there is no file; StateError if it is not an anchor."""
    raw = read_if_present(path, "the log anchor", "run as the guard's user")
    return None if raw is None else parse_anchor(raw, path)


def parse_anchor(raw: bytes | str, where: str) -> dict[str, Any]:
    """An anchor's JSON, its fields checked for shape (not yet for its signature).

    The webhook's whole ``log.anchor`` body is accepted too, as its receiver keeps it."""
    try:
        anchor = json.loads(raw)
    except ValueError:
        anchor = None
    if isinstance(anchor, dict) and anchor.get("event") == "log.anchor":
        anchor = anchor.get("anchor")
    ok = (
        isinstance(anchor, dict)
        and anchor.get("type") == ANCHOR_TYPE
        and isinstance(anchor.get("seq"), int)
        and not isinstance(anchor.get("seq"), bool)
        and anchor["seq"] >= 1
        and isinstance(anchor.get("hash"), str)
        and isinstance(anchor.get("sig"), str)
        and isinstance(anchor.get("epoch"), int | float)
    )
    if not ok or not isinstance(anchor, dict):
        msg = f"{where} is not a zerto-rewind log anchor (damaged or replaced)"
        raise StateError(msg)
    return anchor


def _read_quietly(path: str) -> dict[str, Any] | None:
    try:
        return load_anchor(path)
    except StateError:
        return None  # a damaged anchor is replaced by the next one


CheckKind = Literal["ok", "not_yet", "missing", "cut", "rewritten", "forged", "no_key"]


class AnchorCheck(NamedTuple):
    """What :func:`check` found: ``kind`` and one line for a person."""

    kind: CheckKind
    what: str
    anchor: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.kind in ("ok", "not_yet")


def check(
    log_path: str, anchors: list[dict[str, Any]], key: Ed25519PublicKey | None, policy: AnchorPolicy
) -> AnchorCheck:
    """The log (whose chain is intact) against the latest of ``anchors`` whose signature
    holds. No anchor: ``missing`` unless the log is short and young (see :func:`_unanchored`)."""
    if not anchors:
        return _unanchored(log_path, policy)
    if key is None:
        where = os.path.join(os.path.dirname(policy.key_path), PUBLIC_KEY_FILE)
        return AnchorCheck("no_key", f"no key to check the anchor with ({where} is missing)")
    for anchor in anchors:
        if not _signature_holds(anchor, key):
            what = (
                f"the anchor of {anchor.get('at')} (seq {anchor.get('seq')}) is not signed by "
                "the guard's key: it was forged or altered"
            )
            return AnchorCheck("forged", what, anchor)
    latest = max(anchors, key=lambda a: int(a["seq"]))
    return _against(log_path, latest)


def _signature_holds(anchor: dict[str, Any], key: Ed25519PublicKey) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(base64.b64decode(anchor["sig"], validate=True), _signed_bytes(anchor))
    except (InvalidSignature, ValueError):
        return False
    return True


def _against(log_path: str, anchor: dict[str, Any]) -> AnchorCheck:
    from ..config.loader import sha256_hex
    from .log_line import line_seq

    seq, when = int(anchor["seq"]), anchor.get("at")
    last_seq = 0
    with open(log_path, "rb") as fh:
        for raw in fh:
            line = raw.removesuffix(b"\n")
            last_seq = line_seq(line) or last_seq
            if last_seq == seq:
                if sha256_hex(line) == anchor["hash"]:
                    return AnchorCheck("ok", f"anchored at seq {seq} ({when})", anchor)
                what = (
                    f"the line with seq {seq} is not the one anchored at {when}: the chain "
                    "was rewritten (or cut and written again) from there or before"
                )
                return AnchorCheck("rewritten", what, anchor)
    missing = seq - last_seq
    what = (
        f"the log ends at seq {last_seq}, but the anchor of {when} vouches for seq {seq}: "
        f"{missing} line{'s' if missing != 1 else ''} cut from its end"
    )
    return AnchorCheck("cut", what, anchor)


def _unanchored(log_path: str, policy: AnchorPolicy) -> AnchorCheck:
    """No anchor. Fine while every line predates anchoring (old-shape lines, before an
    upgrade's first decision), or while the log is short and young: fewer than
    ``every_lines`` new-shape lines, the first written less than ``every_s`` ago (a
    writer that cannot anchor has had no chance to be noticed yet). Else ``missing``."""
    count, first = 0, None
    with open(log_path, "rb") as fh:
        for raw in fh:
            record = _record(raw)
            if record is None or "event_id" not in record or "seq" not in record:
                continue
            count += 1
            first = first if first is not None else record.get("occurred_at")
    if count == 0:
        return AnchorCheck("not_yet", "not anchored yet (every line predates anchoring)")
    age = time.time() - _epoch(first)
    if count < policy.every_lines and age < policy.every_s:
        lines = "line" if count == 1 else "lines"
        what = f"not anchored yet ({count} new {lines}, the first {age:.0f} s ago)"
        return AnchorCheck("not_yet", what)
    what = (
        f"no anchor at {policy.anchor_path}, yet {count} lines were written by a guard that "
        "anchors: the anchor was deleted, or the guard could not write it (its warnings say why)"
    )
    return AnchorCheck("missing", what)


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _epoch(iso: Any) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0  # no readable time: as old as can be
