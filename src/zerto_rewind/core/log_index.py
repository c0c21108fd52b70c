"""An index beside the decision log: per session, per VM and per VPG, the lines naming it.

``session show`` (and a rewind plan) need one session's lines and the later
changes to its VMs; without an index that means reading the whole log. The index
(``<log>.index``, an SQLite file) holds, per session id, per VM name and per VPG id
(a line's ``vpg_ids``: a plan tells the guard's checkpoints from others by them),
the byte offsets and line numbers of the lines naming it, so a reader seeks to
those lines only. It records how far it has read the log (its size then, the offset and
SHA-256 of the last line indexed) and is extended from there on each open.

Why it is trusted, and when it is not: a line left out of the index is a change
left out of a timeline or a rewind plan, so the agent must not be able to write it.

- It is used only by a process running as the log's owner, and only if the file
  belongs to that user and is readable by nobody else (created mode 0600). The
  guard service's log belongs to the service's user, not the agent's.
- Its header (what log, how far) is sealed with the state's MAC key
  (:mod:`.record_mac`), and so is each row (bound to the index's random id, so a
  row cannot be moved to another key or another index). A row or header that does
  not verify means the whole index is rebuilt from the log.
- A log that shrank, whose last indexed line changed, or that is another file
  (inode) than the one indexed is re-indexed from the start.
- What the MACs do not catch: a row of the same index restored to an older
  version of itself, by someone who can write the owner's file. That someone can
  already write the log beside it.

When the index cannot be used (no key, another user, a directory that cannot be
written, an SQLite error), :func:`open_index` returns None and the caller reads
the log front to back: slower, the same answer.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..errors import KeyFileError
from .keys import read_key_file
from .log_line import log_record  # a line's record, read as the sessions read it
from .record_mac import MAC_FIELD, RecordMac, state_key_path

__all__ = ["SESSION", "VM", "VPG", "LogIndex", "index_path", "open_index", "state_mac"]

SESSION, VM, VPG = "s", "v", "g"  # the kinds of key
# 2: VPG ids are filed too; an index of an older version is rebuilt, not trusted to have them.
_VERSION = 2
_CHUNK = 1 << 20
_SCHEMA = (
    "CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL)",
    "CREATE TABLE keys (kind TEXT NOT NULL, key BLOB NOT NULL, offsets BLOB NOT NULL, "
    "mac TEXT NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID",
)
# Any access by group or others: an index with one of these bits is not used.
_LOOSE = stat.S_IRWXG | stat.S_IRWXO

log = logging.getLogger("zerto_rewind.log")

Lines = list[tuple[int, int]]  # (byte offset, 1-based line number), in log order


def index_path(log_path: str) -> str:
    return f"{log_path}.index"


def state_mac(state_dir: str) -> RecordMac | None:
    """The state's MAC key, which seals the index; None (read the log whole) until the
    guard has made it, or if others may read it: a reader never creates the key."""
    try:
        return RecordMac(key=read_key_file(state_key_path(state_dir)))
    except (KeyFileError, FileNotFoundError):
        return None


class _Invalid(Exception):
    """The index is not usable as it is: rebuild it."""


@dataclass
class _Meta:
    index_id: str
    ino: int
    dev: int
    through: int  # bytes of the log indexed: always the end of a whole line
    lines: int  # lines indexed
    last_start: int  # offset of the last indexed line (-1: none)
    last_hash: str  # SHA-256 of that line without its newline

    def to_json(self) -> dict[str, Any]:
        return {"version": _VERSION, **self.__dict__}


class LogIndex:
    """An open, verified index, up to date with the log when it was opened."""

    def __init__(self, conn: sqlite3.Connection, mac: RecordMac, meta: _Meta) -> None:
        self._conn, self._mac, self.meta = conn, mac, meta

    @property
    def through(self) -> int:
        """Bytes of the log the index covers; a line after this is not in it yet."""
        return self.meta.through

    @property
    def lines(self) -> int:
        return self.meta.lines

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LogIndex:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def sessions(self, prefix: str) -> dict[str, Lines] | None:
        """The sessions whose id starts with ``prefix``, each with its lines.

        None if a row does not verify (the caller falls back to reading the log)."""
        start = _key(prefix)
        rows = self._conn.execute(
            "SELECT key, offsets, mac FROM keys WHERE kind = ? AND key >= ? ORDER BY key",
            (SESSION, start),
        )
        found: dict[str, Lines] = {}
        for key, blob, mac in rows:
            if not bytes(key).startswith(start):
                break
            lines = self._open_row(SESSION, bytes(key), bytes(blob), mac)
            if lines is None:
                return None
            found[bytes(key).decode("utf-8", "surrogatepass")] = lines
        return found

    def vm(self, name: str) -> Lines | None:
        """The lines naming VM ``name`` in their ``vms``; None if its row does not verify."""
        return self.filed(VM, name)

    def filed(self, kind: str, name: str) -> Lines | None:
        """The lines filed under ``name`` (exactly) as a ``kind``; None if the row does not
        verify."""
        row = self._conn.execute(
            "SELECT offsets, mac FROM keys WHERE kind = ? AND key = ?", (kind, _key(name))
        ).fetchone()
        if row is None:
            return []
        return self._open_row(kind, _key(name), bytes(row[0]), row[1])

    def raw_lines(
        self, path: str, keys: Iterable[tuple[str, str]]
    ) -> list[tuple[int, bytes]] | None:
        """(line number, the line's bytes as written), in order: the lines filed under one of
        ``keys`` ((kind, name) pairs), then every line written after the index was opened
        (the caller sorts those out). The bytes, not a parse: a rewind plan's id is a
        digest of them. None if a row does not verify or the index cannot be read: read
        the log instead."""
        try:
            found: set[tuple[int, int]] = set()
            for kind, name in keys:
                lines = self.filed(kind, name)
                if lines is None:
                    return None
                found.update(lines)
            with open(path, "rb") as fh:
                out = [(number, _line_at(fh, offset)) for offset, number in sorted(found)]
                fh.seek(self.through)
                out.extend(enumerate(fh, start=self.lines + 1))
        except (OSError, sqlite3.Error, ValueError) as exc:
            log.warning("log index not read (%s); reading the log instead", exc)
            return None
        return out

    def lines_for(
        self, path: str, prefix: str, watched: Callable[[dict[str, Any]], Iterable[str]]
    ) -> list[tuple[int, dict[str, Any]]] | None:
        """(line number, record), in order: the lines of the sessions starting with
        ``prefix``, the lines naming a VM ``watched`` (a record -> the VMs it makes the
        reader watch) after the first of them that did, and every line written after
        the index was opened. None if a row does not verify or the index cannot be
        read: read the log instead."""
        try:
            return self._lines_for(path, prefix, watched)
        except (OSError, sqlite3.Error, ValueError) as exc:
            log.warning("log index not read (%s); reading the log instead", exc)
            return None

    def _lines_for(
        self, path: str, prefix: str, watched: Callable[[dict[str, Any]], Iterable[str]]
    ) -> list[tuple[int, dict[str, Any]]] | None:
        sessions = self.sessions(prefix)
        if sessions is None:
            return None
        with open(path, "rb") as fh:
            records = dict(_read(fh, sorted(p for lines in sessions.values() for p in lines)))
            first: dict[str, int] = {}
            for number in sorted(records):
                for vm in watched(records[number]):
                    first.setdefault(vm, number)
            more: set[tuple[int, int]] = set()
            for vm, since in first.items():
                lines = self.vm(vm)
                if lines is None:
                    return None
                more.update(p for p in lines if p[1] > since and p[1] not in records)
            records.update(_read(fh, sorted(more)))
            fh.seek(self.through)  # lines written since the index was brought up to date
            for number, line in enumerate(fh, start=self.lines + 1):
                if (record := log_record(line)) is not None:
                    records[number] = record
        return sorted(records.items())

    def _open_row(self, kind: str, key: bytes, blob: bytes, mac: Any) -> Lines | None:
        if not _row_ok(self._mac, self.meta, kind, key, blob, mac):
            log.warning("log index row does not verify; reading the log instead")
            return None
        return _pairs(blob)


def open_index(log_path: str, mac: RecordMac) -> LogIndex | None:
    """The log's index, checked, rebuilt or extended as needed; None to read the log instead.

    Only the log's owner uses an index: a reader running as another user (an
    approver reading the service's log) gets None."""
    try:
        return _open(log_path, mac)
    except FileNotFoundError:
        return None  # no log yet: nothing to index
    except (OSError, sqlite3.Error, ValueError) as exc:
        log.warning("log index not used (%s); reading the log instead", exc)
        return None


def _open(log_path: str, mac: RecordMac) -> LogIndex | None:
    fd = os.open(log_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            return None
        path = index_path(log_path)
        for _ in range(2):  # an unusable index is rebuilt once, then opened again
            try:
                return _load_and_extend(path, fd, info, mac)
            except _Invalid as exc:
                log.info("log index %s rebuilt: %s", path, exc)
                _rebuild(path, fd, info, mac)
        return None
    finally:
        os.close(fd)


def _load_and_extend(path: str, fd: int, info: os.stat_result, mac: RecordMac) -> LogIndex:
    _check_file(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _Invalid(str(exc)) from exc
    try:
        conn.execute("BEGIN IMMEDIATE")  # one extender at a time; readers wait for it
        meta = _read_meta(conn, mac, info, fd, path)
        if meta.through < info.st_size:
            _extend(conn, mac, meta, fd, info.st_size, _ident(path))
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _Invalid(str(exc)) from exc
    except BaseException:
        conn.close()
        raise
    return LogIndex(conn, mac, meta)


def _check_file(path: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        msg = "there is none yet"
        raise _Invalid(msg) from None
    if not stat.S_ISREG(info.st_mode):
        msg = "it is not a regular file"
        raise _Invalid(msg)
    if info.st_uid != os.geteuid():
        msg = f"it belongs to uid {info.st_uid}, not to the log's owner"
        raise _Invalid(msg)
    if info.st_mode & _LOOSE:
        msg = f"its mode is {stat.S_IMODE(info.st_mode):04o}, others may write it"
        raise _Invalid(msg)


def _read_meta(
    conn: sqlite3.Connection, mac: RecordMac, info: os.stat_result, fd: int, path: str
) -> _Meta:
    row = conn.execute("SELECT body FROM meta WHERE id = 1").fetchone()
    try:
        body = mac.open("log-index", _ident(path), json.loads(row[0])) if row else None
    except (ValueError, TypeError):  # not JSON text: not ours
        body = None
    if body is None or body.pop("version", None) != _VERSION:
        msg = "its header is missing or does not verify"
        raise _Invalid(msg)
    try:
        meta = _Meta(**body)
    except TypeError as exc:
        msg = "its header is of another version"
        raise _Invalid(msg) from exc
    if (meta.ino, meta.dev) != (info.st_ino, info.st_dev):
        msg = "the log is another file than the one indexed"
        raise _Invalid(msg)
    if info.st_size < meta.through:
        msg = "the log is shorter than when it was indexed"
        raise _Invalid(msg)
    if meta.last_start >= 0:
        line = os.pread(fd, meta.through - meta.last_start, meta.last_start)
        if hashlib.sha256(line.removesuffix(b"\n")).hexdigest() != meta.last_hash:
            msg = "the last indexed line of the log has changed"
            raise _Invalid(msg)
    return meta


def _rebuild(path: str, fd: int, info: os.stat_result, mac: RecordMac) -> None:
    """Index the whole log into a new private file, then put it in place atomically."""
    directory, name = os.path.split(path)
    temp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
    created = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.close(created)
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            meta = _Meta(secrets.token_hex(16), info.st_ino, info.st_dev, 0, 0, -1, "")
            conn.execute("BEGIN")
            conn.execute("INSERT INTO meta (id, body) VALUES (1, '')")
            _extend(conn, mac, meta, fd, info.st_size, _ident(path))
            conn.execute("COMMIT")
        finally:
            conn.close()
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _extend(
    conn: sqlite3.Connection,
    mac: RecordMac,
    meta: _Meta,
    fd: int,
    size: int,
    ident: str,
) -> None:
    """Index the whole lines from ``meta.through`` to ``size``; updates ``meta`` in place."""
    added: dict[tuple[str, bytes], list[int]] = {}
    for offset, number, line in _whole_lines(fd, meta.through, size, meta.lines):
        for filed in _keys_of(line):
            added.setdefault(filed, []).extend((offset, number))
        meta.through, meta.lines = offset + len(line) + 1, number
        meta.last_start, meta.last_hash = offset, hashlib.sha256(line).hexdigest()
    for (kind, key), more in added.items():
        row = conn.execute(
            "SELECT offsets, mac FROM keys WHERE kind = ? AND key = ?", (kind, key)
        ).fetchone()
        blob = b""
        if row is not None:
            blob = bytes(row[0])
            if not _row_ok(mac, meta, kind, key, blob, row[1]):
                msg = "a row does not verify"
                raise _Invalid(msg)
        blob += array.array("q", more).tobytes()
        conn.execute(
            "INSERT OR REPLACE INTO keys (kind, key, offsets, mac) VALUES (?, ?, ?, ?)",
            (kind, key, blob, _row_mac(mac, meta, kind, key, blob)),
        )
    sealed = mac.seal("log-index", ident, meta.to_json())
    conn.execute("UPDATE meta SET body = ? WHERE id = 1", (json.dumps(sealed),))


def _read(fh: BinaryIO, lines: Lines) -> Iterator[tuple[int, dict[str, Any]]]:
    for offset, number in lines:
        fh.seek(offset)
        if (record := log_record(fh.readline())) is not None:
            yield number, record


def _line_at(fh: BinaryIO, offset: int) -> bytes:
    fh.seek(offset)
    return fh.readline()


def _whole_lines(fd: int, start: int, size: int, before: int) -> Iterator[tuple[int, int, bytes]]:
    """(offset, line number, bytes without the newline) of each whole line in [start, size)."""
    position, number, carry = start, before, b""
    while position < size:
        block = os.pread(fd, min(_CHUNK, size - position), position)
        if not block:
            return
        data, base = carry + block, position - len(carry)
        position += len(block)
        begin = 0
        while (end := data.find(b"\n", begin)) >= 0:
            number += 1
            yield base + begin, number, data[begin:end]
            begin = end + 1
        carry = data[begin:]


def _keys_of(line: bytes) -> set[tuple[str, bytes]]:
    """The session and VM keys a line is filed under (the readers' own reading of it)."""
    record = log_record(line)
    if record is None:
        return set()
    keys: set[tuple[str, bytes]] = set()
    session_id = str(record.get("session_id") or "")
    if session_id:
        keys.add((SESSION, _key(session_id)))
    for kind, field in ((VM, "vms"), (VPG, "vpg_ids")):
        names = record.get(field)
        if isinstance(names, list):
            keys.update((kind, _key(str(name))) for name in names)
    return keys


def _ident(path: str) -> str:
    """What the header's MAC binds it to: the index's own place, however it was named."""
    return os.path.realpath(path)


def _key(text: str) -> bytes:
    # Bytes, not text: a name decoded from JSON may hold a lone surrogate, which
    # SQLite's text cannot; a UTF-8 prefix is a byte prefix, so lookups still work.
    return text.encode("utf-8", "surrogatepass")


def _pairs(blob: bytes) -> Lines:
    values = array.array("q")
    values.frombytes(blob)
    return list(zip(values[0::2], values[1::2], strict=True))


def _row_mac(mac: RecordMac, meta: _Meta, kind: str, key: bytes, blob: bytes) -> str:
    ident = f"{meta.index_id}:{kind}:{key.hex()}"
    digest = hashlib.sha256(blob).hexdigest()
    return str(mac.seal("log-index-row", ident, {"offsets": digest})[MAC_FIELD])


def _row_ok(mac: RecordMac, meta: _Meta, kind: str, key: bytes, blob: bytes, claimed: Any) -> bool:
    expected = _row_mac(mac, meta, kind, key, blob)
    return isinstance(claimed, str) and hmac.compare_digest(claimed, expected)
