"""The approvals socket: a unix socket where an approver, known from the kernel, answers.

Separate from the decide socket (which agents' hooks use), and authenticated by
the kernel, not by anything the client says. Two credentials count, and both
must be an approver's (:meth:`ApprovalsService.refusal`):

* the connection's (``SO_PEERCRED``): the process that called ``connect()``;
* each request's (``SCM_CREDENTIALS``, with ``SO_PASSCRED`` on): the process that
  sent *that* request, as the kernel vouches for it at send time. A connection may
  be handed to another process (``SCM_RIGHTS``) long after it was opened; its
  ``SO_PEERCRED`` still names the opener, so it alone would let whoever holds the
  descriptor act as the approver who connected. The request is decided, and
  recorded, as its sender.

An agent's user, anyone not listed in ``approvals.approvers`` and the principal
that asked can read nothing and approve nothing. A connection also has a
lifetime: it is closed after ``approvals.socket_max_ops`` requests or
``approvals.socket_max_age_s`` seconds, whichever comes first, and after 30 s
without a request. One unix user may hold 16 connections at once; a 17th is
closed at once, and other users are not affected.

Protocol: one JSON object per line in, one per line out, e.g.
``{"op": "list"}`` → ``{"ok": true, "pending": [...]}``; ``{"op": "approve",
"id": "7K2Q-9XMA"}`` → ``{"ok": true, "request": {...}}``; any failure →
``{"ok": false, "error": "what failed"}``. ``zerto-rewind approvals`` is its
client: it sends each request with ``sendmsg`` and its own ``SCM_CREDENTIALS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import logging
import os
import pwd
import socket
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from ..core.approval_view import approver_json
from ..core.approvals import ApprovalError, Approver

if TYPE_CHECKING:
    from .approvals import ApprovalsService

__all__ = ["Sender", "approver_of", "serve_approvals_socket"]

log = logging.getLogger("zerto_rewind.gateway")

_MAX_LINE = 64 * 1024
_IDLE_S = 30.0
# Connections one unix user may hold open at once: one user's flood never keeps out another.
_MAX_PER_USER = 16
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Sender(NamedTuple):
    """A process as the kernel names it: on a connection (SO_PEERCRED) or a message."""

    pid: int
    uid: int
    gid: int


def approver_of(uid: int) -> Approver:
    """The unix user ``uid`` and its groups, from the user database."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return Approver("unix", f"uid-{uid}")
    groups = set()
    with contextlib.suppress(KeyError, OSError):
        groups = {grp.getgrgid(g).gr_name for g in os.getgrouplist(entry.pw_name, entry.pw_gid)}
    return Approver("unix", entry.pw_name, tuple(sorted(groups)))


def _opener(sock: socket.socket) -> Sender:
    """The process that connected, as the kernel recorded it at ``connect()``."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return Sender(*_UCRED.unpack(raw))


class CredentialLines:
    """Lines read from a ``SO_PASSCRED`` socket, each with the senders of its bytes.

    With ``SO_PASSCRED`` on, the kernel attaches the sender's credentials to every
    write and never returns bytes of two senders in one ``recvmsg``; so each chunk
    read has one sender, and a line whose bytes came from two is known as such.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._ends: list[tuple[int, Sender | None]] = []  # (end offset, sender) per chunk

    async def next_line(self) -> tuple[bytes, set[Sender | None]] | None:
        """The next line and who sent its bytes (None: no credentials came); None at EOF.

        ValueError when a line runs past the limit.
        """
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_LINE:
                msg = f"a request longer than {_MAX_LINE} bytes"
                raise ValueError(msg)
            data, sender = await _receive(self._sock)
            if not data:
                return None
            self._buffer += data
            self._ends.append((len(self._buffer), sender))
        end = self._buffer.index(b"\n") + 1
        line = bytes(self._buffer[:end])
        del self._buffer[:end]
        senders: set[Sender | None] = set()
        kept: list[tuple[int, Sender | None]] = []
        start = 0
        for stop, sender in self._ends:
            if start < end:
                senders.add(sender)
            if stop > end:
                kept.append((stop - end, sender))
            start = stop
        self._ends = kept
        return line, senders


async def _receive(sock: socket.socket) -> tuple[bytes, Sender | None]:
    """One ``recvmsg``: the bytes and the credentials the kernel attached to them."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            # Room for the credentials only: descriptors sent along are not installed.
            data, ancillary, _flags, _addr = sock.recvmsg(_MAX_LINE, socket.CMSG_SPACE(_UCRED.size))
        except BlockingIOError:
            await _readable(loop, sock)
            continue
        sender = None
        for level, kind, payload in ancillary:
            ours = level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
            if ours and len(payload) >= _UCRED.size:
                sender = Sender(*_UCRED.unpack_from(payload))
        return data, sender


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def serve_approvals_socket(
    service: ApprovalsService, listener: socket.socket, path: str
) -> None:
    """Serve the approvals socket ``listener`` (bound at ``path``, :func:`.unix_listen.bind_unix`)
    until cancelled; its file is removed then.

    The socket may be open to every local user (mode 0666 by default): who may
    do what is decided per request from the kernel's credentials, not the mode.
    """
    # Set before listen(): a connection accepted inherits it, and bytes sent before
    # accept() carry credentials already.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    listener.listen(64)
    listener.setblocking(False)
    loop = asyncio.get_running_loop()
    open_by_uid: dict[int, int] = {}
    try:
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    conn, _ = await loop.sock_accept(listener)
                except OSError as exc:  # out of descriptors: wait, never stop the gateway
                    log.warning("approvals socket: accept failed: %s", type(exc).__name__)
                    await anyio.sleep(0.5)
                    continue
                tg.start_soon(_counted, service, conn, open_by_uid)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)


async def _counted(
    service: ApprovalsService, conn: socket.socket, open_by_uid: dict[int, int]
) -> None:
    """Serve ``conn`` unless its user already holds the most connections one user may."""
    try:
        uid = _opener(conn).uid
    except OSError:
        conn.close()
        return
    if open_by_uid.get(uid, 0) >= _MAX_PER_USER:
        log.warning("approvals socket: uid %d holds %d connections; one more closed", uid,
                    _MAX_PER_USER)  # fmt: skip
        conn.close()
        return
    open_by_uid[uid] = open_by_uid.get(uid, 0) + 1
    try:
        await _connection(service, conn)
    finally:
        open_by_uid[uid] -= 1
        if not open_by_uid[uid]:
            del open_by_uid[uid]


async def _connection(service: ApprovalsService, conn: socket.socket) -> None:
    """Answer one connection's requests until EOF, idleness, or the end of its lifetime."""
    loop = asyncio.get_running_loop()
    config = service.config
    deadline = loop.time() + config.socket_max_age_s
    with conn:
        try:
            conn.setblocking(False)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            opener = _opener(conn)
            lines = CredentialLines(conn)
            for _ in range(config.socket_max_ops):
                got = None
                with anyio.move_on_after(min(_IDLE_S, deadline - loop.time())):
                    got = await lines.next_line()
                if got is None:
                    break  # EOF, idle, or its lifetime is over: a request after it is not read
                answer = await _answer(service, opener, *got)
                await loop.sock_sendall(conn, json.dumps(answer).encode() + b"\n")
        except ValueError as exc:  # a line past the limit (next_line): the connection is dropped
            log.warning("approvals socket: %s; closed", exc)
        except (ConnectionError, OSError) as exc:
            log.warning("approvals socket: connection failed: %s", type(exc).__name__)
        except Exception as exc:  # one connection's failure never stops the socket
            log.warning("approvals socket: connection dropped: %s", type(exc).__name__)


def _sender_refusal(
    service: ApprovalsService, opener: Sender, senders: set[Sender | None]
) -> tuple[Approver | None, str | None]:
    """(the approver who sent this request, why it may not act); the approver None if unknown."""
    sender = next(iter(senders)) if len(senders) == 1 else None
    if sender is None:
        why = (
            "the request did not come with one sender's credentials (SCM_CREDENTIALS): nothing "
            "was done; send each request in one piece, as zerto-rewind approvals does"
        )
        return None, why
    approver = approver_of(sender.uid)
    refused = service.refusal(approver, None)
    if refused is None and sender.uid != opener.uid:
        # Handed over: the one who opened the connection must be an approver too.
        opened_by = service.refusal(approver_of(opener.uid), None)
        if opened_by is not None:
            refused = (
                f"this connection was opened by another user, and {opened_by}: connect "
                "again yourself"
            )
    return approver, refused


async def _answer(
    service: ApprovalsService, opener: Sender, line: bytes, senders: set[Sender | None]
) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {"ok": False, "error": "each line must be one JSON object"}
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        return {"ok": False, "error": 'each line must be a JSON object with an "op"'}
    op = message["op"]
    approver, refused = _sender_refusal(service, opener, senders)
    if approver is not None and op == "whoami":
        return {"ok": True, "approver": approver.label, "may_approve": refused is None,
                "why_not": refused}  # fmt: skip
    if approver is None or refused is not None:
        who = approver.label if approver is not None else "a sender without credentials"
        pids = sorted(s.pid for s in senders if s is not None)
        log.warning(
            "approvals socket: %s (pid %s) refused (%r) on a connection opened by uid %d "
            "(pid %d)", who, pids, op[:40], opener.uid, opener.pid,
        )  # fmt: skip
        return {"ok": False, "error": refused}
    try:
        return await _op(service, approver, op, message)
    except ApprovalError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # the store is down: say so, change nothing
        log.warning("approvals socket: %r failed: %s", op[:40], type(exc).__name__)
        return {"ok": False, "error": f"the approvals store failed ({type(exc).__name__})"}


async def _op(
    service: ApprovalsService, approver: Approver, op: str, message: dict[str, Any]
) -> dict[str, Any]:
    import anyio.to_thread

    store = service.store
    if op == "list":
        pending = await anyio.to_thread.run_sync(store.pending)
        return {"ok": True, "pending": [approver_json(r) for r in pending]}
    if op == "recent":
        limit = message.get("limit", 50)
        limit = limit if isinstance(limit, int) and 0 < limit <= 500 else 50
        recent = await anyio.to_thread.run_sync(store.recent, limit)
        return {"ok": True, "recent": [approver_json(r) for r in recent]}
    request_id = message.get("id")
    if not isinstance(request_id, str) or not request_id:
        return {"ok": False, "error": f'"{op}" needs the request\'s "id"'}
    if op == "show":
        request = await anyio.to_thread.run_sync(store.get, request_id)
        if request is None:
            return {"ok": False, "error": f"no approval request {request_id}"}
        return {"ok": True, "request": approver_json(request), "link": service.link(request_id)}
    if op in ("approve", "deny"):
        note = message.get("reason")
        note = note if isinstance(note, str) else None
        decided = await service.answer(approver, request_id, op == "approve", note)
        return {"ok": True, "request": approver_json(decided)}
    return {"ok": False, "error": f"unknown op {op!r}; use list, recent, show, approve or deny"}
