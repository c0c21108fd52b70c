"""The decision log: one JSON line per decision, appended atomically, hash-chained.

Lines carry ids, names and times, never a secret and never an argument value
other than VM names (see :meth:`Decision.log_record`). Reading tolerates
damaged lines: a line that is not JSON is reported, not fatal.

Each line written by :func:`write_record` also carries ``seq`` (1, 2, 3… within
the file) and ``prev``, the SHA-256 (hex) of the previous line's exact bytes
without its newline (64 zeros on a file's first line). :func:`verify` walks the
chain and names the first line where it breaks; see its docstring for what a
chain alone cannot show, and :mod:`.log_anchor` for the signed anchors that show it.

Each line is shaped as the MCP "tamper-evident audit record" draft's records are
(:func:`audit_record`): ``event_id``, ``occurred_at``, ``principal_id``,
``event_type``, ``tool_name``, ``outcome`` and the Zerto facts in ``extensions``;
the fields older lines carry (``time``, ``tool``, ``row``, ``decision``…) stay
beside them, so readers of either shape read both.
"""

from __future__ import annotations

import collections
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..errors import StateError
from .log_line import is_seq, line_seq

if TYPE_CHECKING:
    from .log_anchor import AnchorPolicy

__all__ = [
    "GENESIS",
    "ChainProblem",
    "VerifyReport",
    "anchor_now",
    "audit_record",
    "iter_records",
    "register_anchor",
    "tail",
    "verify",
    "write_record",
]

GENESIS = "0" * 64
"""``prev`` of a file's first line: there is no previous line to hash."""

# Bytes read at a time when looking for the last line from the end of the file:
# one read holds a typical line (under 1 KiB) whole.
_CHUNK = 4096

log = logging.getLogger("zerto_rewind.log")

# log path -> how it is anchored (core.log_anchor); set by the processes that hold
# the guard's settings (the gateway, the hook, the MCP server); a log no one
# registered is chained but not anchored.
_ANCHORING: dict[str, AnchorPolicy] = {}


def register_anchor(policy: AnchorPolicy) -> None:
    """Anchor ``policy.log_path`` from now on, in this process."""
    _ANCHORING[policy.log_path] = policy


ProblemKind = Literal["not_json", "unchained", "malformed", "gap", "reordered", "prev_mismatch"]


class ChainProblem(NamedTuple):
    """The first place the chain breaks: ``line`` is 1-based, counted in the file."""

    line: int
    kind: ProblemKind
    what: str
    todo: str


class VerifyReport(NamedTuple):
    """What :func:`verify` found; ``problem`` is ``None`` when the chain is intact."""

    path: str
    exists: bool
    lines: int
    """Lines checked: every line when intact, up to the broken one otherwise."""
    legacy: int
    """Unchained lines (written before chaining existed) before the first chained one."""
    problem: ChainProblem | None

    @property
    def ok(self) -> bool:
        return self.exists and self.problem is None


def write_record(path: str, record: dict[str, Any]) -> None:
    """Append one decision, chained to the line before it; StateError if it cannot be.

    ``seq`` is one more than the last line's ``seq``; a last line without one (written
    before chaining existed, or damaged) counts as 0, so the chain restarts at 1 after
    it, and ``prev`` still hashes that line's bytes, whatever they are. A file that does
    not end with a newline (a torn write) gets one first, so the new line stays whole.
    """
    from ..config.loader import sha256_hex  # already loaded by every writer (hook, gateway)

    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)  # it may be the state dir (XDG)
    try:
        # Read and write: the last line must be read under the same lock as the append.
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        msg = f"cannot open log {path}: {exc.strerror}; set ZERTO_HOOK_LOG to a writable file"
        raise StateError(msg) from exc
    try:
        # The lock is an flock on the log file itself, not fsutil.file_lock on a
        # `<log>.lock` sidecar: fsutil.append_line (the log's writer before chaining,
        # which a hook installed by an older version still runs) flocks the log file,
        # so this lock excludes it too; no second file needs creating, with the right
        # owner and mode, next to a log that may live in a directory the writer cannot
        # create files in; and the kernel drops it when a killed hook's descriptor closes.
        fcntl.flock(fd, fcntl.LOCK_EX)
        last, ends_with_newline = _last_line(fd)
        if last is None:
            seq, prev = 1, GENESIS
        else:
            seq, prev = line_seq(last) + 1, sha256_hex(last)
        line = json.dumps(
            {**audit_record(record), "seq": seq, "prev": prev},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        encoded = line.encode()
        data = memoryview((b"" if ends_with_newline else b"\n") + encoded + b"\n")
        while data:  # one write in practice; a short write (disk nearly full) goes on
            data = data[os.write(fd, data) :]
        anchor = _anchor_if_due(path, seq, encoded)
    except OSError as exc:
        msg = f"cannot write log {path}: {exc.strerror}; check the disk and the file's owner"
        raise StateError(msg) from exc
    finally:
        os.close(fd)  # closing the descriptor releases the lock
    _publish(path, anchor)


def _anchor_if_due(path: str, seq: int, line: bytes) -> dict[str, Any] | None:
    """Under the log's lock, after line ``seq`` is written: anchor it if it is due.

    The decision is logged whatever happens here: a failed anchor is a warning, and
    ``log --verify`` reports the log as not anchored."""
    policy = _ANCHORING.get(path)
    if policy is None:
        return None
    from . import log_anchor

    now = time.time()
    try:
        if not log_anchor.due(policy, seq, now):
            return None
        from ..config.loader import sha256_hex

        return log_anchor.anchor_head(policy, seq, sha256_hex(line), now)
    except (StateError, OSError, ValueError) as exc:
        log.warning("decision log not anchored: %s", exc)
        return None


def _publish(path: str, anchor: dict[str, Any] | None) -> None:
    policy = _ANCHORING.get(path)
    if anchor is not None and policy is not None and policy.publish is not None:
        policy.publish(anchor)


def anchor_now(policy: AnchorPolicy) -> dict[str, Any] | None:
    """Anchor the log's current head if it moved since the last anchor (a clean shutdown,
    the gateway's timer)."""
    from ..config.loader import sha256_hex
    from . import log_anchor

    try:
        fd = os.open(policy.log_path, os.O_RDONLY)
    except OSError:
        return None  # nothing logged: nothing to anchor
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        last, _ = _last_line(fd)
        seq = line_seq(last) if last is not None else 0
        current = log_anchor.load_anchor(policy.anchor_path)
        if last is None or seq == 0 or (current is not None and current["seq"] == seq):
            return None
        anchor = log_anchor.anchor_head(policy, seq, sha256_hex(last), time.time())
    except (StateError, OSError, ValueError) as exc:
        log.warning("decision log head not anchored: %s", exc)
        return None
    finally:
        os.close(fd)
    if policy.publish is not None:
        policy.publish(anchor)
    return anchor


# The MCP draft's outcomes, from the decision the guard made (or the approval event).
_OUTCOMES = {
    "none": "allowed",
    "context": "allowed",
    "deny": "denied",
    "prompt": "deferred",
    "defer": "deferred",
    "approved": "allowed",
    "used": "allowed",
    "requested": "deferred",
}
# The Zerto facts of a decision: the draft's typed extension, not its core fields.
_ZERTO_FACTS = (
    "vpgs",
    "vpg_ids",
    "site_types",
    "sites",
    "checkpoint_ids",
    "tags",
    "requested_at",
    "expected_at",
    "landed_at",
    "tag_bound",
)
EXTENSION = "zerto_rewind"


def audit_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the audit draft's fields first (the one place lines are shaped).

    A record that already has an ``event_id`` is returned as it is."""
    if "event_id" in record:
        return record
    from .decision import fmt_time

    approval = record.get("decision") == "approval"
    answer = str(record.get("answer") or "")
    if str(record.get("row")) in ("error", "config_error"):
        outcome = "error"
    else:
        outcome = _OUTCOMES.get(answer if approval else str(record.get("decision")), "denied")
    if approval and answer in ("approved", "denied", "refused"):
        principal = record.get("approver") or record.get("client")
    else:
        principal = record.get("client") or _process_user()
    facts = {k: record[k] for k in _ZERTO_FACTS if record.get(k)}
    return {
        "event_id": os.urandom(16).hex(),
        "occurred_at": record.get("time") or fmt_time(time.time()),
        "principal_id": principal,
        "event_type": f"approval.{answer}" if approval else "tool_call.decision",
        "tool_name": record.get("tool"),
        "outcome": outcome,
        "extensions": {EXTENSION: facts},
        **record,
    }


def _process_user() -> str:
    """``unix:NAME`` of this process (the hook runs as the agent's user)."""
    import pwd

    try:
        return f"unix:{pwd.getpwuid(os.geteuid()).pw_name}"
    except KeyError:
        return f"uid:{os.geteuid()}"


def _last_line(fd: int) -> tuple[bytes | None, bool]:
    """The file's last line without its newline (``None`` if the file is empty), and
    whether the file ends with a newline. Reads backwards from the end, a chunk at a time."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None, True
    ends_with_newline = os.pread(fd, 1, size - 1) == b"\n"
    position = size - 1 if ends_with_newline else size  # the last line ends here
    chunks: list[bytes] = []
    while position > 0:
        start = max(0, position - _CHUNK)
        chunk = os.pread(fd, position - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            chunks.append(chunk[newline + 1 :])
            break
        chunks.append(chunk)
        position = start
    return b"".join(reversed(chunks)), ends_with_newline


def _is_hash(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def verify(path: str) -> VerifyReport:
    """Walk the log line by line and report the first place its chain breaks.

    Found: a line that is not JSON; a chained line followed by one without ``seq`` and
    ``prev`` (inserted by hand, or by an older zerto-rewind); a ``seq`` that skips
    (lines deleted), that comes too early or goes back (lines reordered, copied or
    forged); a ``prev`` that is not the hash of the line before (that line or this one
    was edited, or a line between them was deleted). Unchained lines before the first
    chained one are legal (written before chaining existed) and counted in ``legacy``;
    only the last of them is protected, by the first chained line's ``prev``.

    What a hash chain cannot show on its own: the last lines cut off (what is left
    is still a valid chain), the last line edited (no later line hashes it), and the
    whole file rewritten with consistent hashes, or deleted, by anyone who can write
    it. The chain makes tampering evident only to someone who cannot write the log
    themselves, which is why the guard service's log belongs to the service's user
    and not to the agent's; copying the last ``seq`` and ``prev`` elsewhere from time
    to time (a syslog line, a ticket) also catches a cut-off tail.

    StateError if the file exists but cannot be read.
    """
    from ..config.loader import sha256_hex

    try:
        fh = open(path, "rb")  # noqa: SIM115  # closed below
    except FileNotFoundError:
        return VerifyReport(path, exists=False, lines=0, legacy=0, problem=None)
    except OSError as exc:
        msg = f"cannot read log {path}: {exc.strerror}; run as the user that owns it"
        raise StateError(msg) from exc
    number = legacy = 0
    with fh:
        previous_hash: str | None = None  # of the previous line without its newline
        previous_seq = 0  # 0: no chained line yet (the previous line is unchained)
        try:
            for raw in fh:
                number += 1
                line = raw.removesuffix(b"\n")
                problem, seq = _check(line, number, previous_hash, previous_seq)
                if problem is not None and problem.kind == "gap":
                    problem = _gap_or_reordered(fh, problem, previous_seq + 1, seq)
                if problem is not None:
                    return VerifyReport(path, True, number, legacy, problem)
                if seq == 0:
                    legacy += 1
                previous_hash, previous_seq = sha256_hex(line), seq
        except OSError as exc:
            msg = f"cannot read log {path}: {exc.strerror}"
            raise StateError(msg) from exc
    return VerifyReport(path, True, number, legacy, None)


def _check(
    line: bytes, number: int, previous_hash: str | None, previous_seq: int
) -> tuple[ChainProblem | None, int]:
    """One line against the one before: (the problem or None, the line's seq or 0).

    Every line after a chained one is chained (the writer chains on whatever it finds),
    so ``previous_seq == 0`` means no chained line came before this one.
    """
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        what = "the line is empty" if not line.strip() else "the line is not a JSON object"
        todo = "it was damaged or edited by hand; compare with a backup of the log"
        return ChainProblem(number, "not_json", what, todo), 0
    if "seq" not in record and "prev" not in record:
        if previous_seq == 0:
            return None, 0  # written before chaining existed
        what = f"the line carries no seq/prev, after line {number - 1} did"
        todo = "it was inserted by hand, or written by an older zerto-rewind; upgrade every hook"
        return ChainProblem(number, "unchained", what, todo), 0
    seq, prev = record.get("seq"), record.get("prev")
    if not is_seq(seq) or not _is_hash(prev):
        what = f"seq {seq!r} / prev {prev!r} are not a sequence number and a SHA-256"
        todo = "the line was edited or forged; compare with a backup of the log"
        return ChainProblem(number, "malformed", what, todo), 0
    expected = previous_seq + 1
    if seq > expected:
        return ChainProblem(number, "gap", "", ""), seq  # worded by _gap_or_reordered
    if seq < expected:
        what = f"seq {seq} comes after seq {previous_seq}, out of order"
        todo = "a line was copied, moved or forged here; compare with a backup of the log"
        return ChainProblem(number, "reordered", what, todo), seq
    if prev != (previous_hash or GENESIS):
        if previous_hash is None:
            what = "the first line's prev is not 64 zeros"
            todo = "lines before it were deleted, or it was edited; compare with a backup"
        else:
            what = f"prev does not match line {number - 1}"
            todo = (
                f"line {number - 1} or this line was edited, or a line between them was "
                "deleted; compare with a backup of the log"
            )
        return ChainProblem(number, "prev_mismatch", what, todo), seq
    return None, seq


def _gap_or_reordered(
    rest: Iterable[bytes], gap: ChainProblem, first_missing: int, seq: int
) -> ChainProblem:
    """A seq that skips ahead: lines missing, unless a later line (in ``rest``, the
    lines after the one in ``gap``) carries a missing seq."""
    last_missing = seq - 1
    later = gap.line
    for raw in rest:
        later += 1
        found = line_seq(raw.removesuffix(b"\n"))
        if first_missing <= found <= last_missing:
            what = f"seq {seq} comes before seq {found} (line {later}): lines were reordered"
            todo = "the log was edited; compare with a backup of the log"
            return gap._replace(kind="reordered", what=what, todo=todo)
    missing = (
        f"the line with seq {first_missing} is missing"
        if first_missing == last_missing
        else f"lines with seq {first_missing}..{last_missing} are missing"
    )
    todo = "they were deleted from the log; compare with a backup of the log"
    return gap._replace(what=missing, todo=todo)


def iter_records(path: str) -> Iterator[dict[str, Any]]:
    """Every readable record in the log, oldest first; damaged lines are skipped.

    Records carry the chain's ``seq`` and ``prev`` as written (the table ignores them).
    """
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115  # closed below
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def tail(path: str, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` records."""
    return list(collections.deque(iter_records(path), maxlen=max(0, limit)))
