"""The approvals socket: a unix socket where an approver, known by ``SO_PEERCRED``, answers.

Separate from the decide socket (which agents' hooks use), and authenticated by
the kernel, not by anything the client says: the peer's uid is read from the
connection, its user and groups are looked up here, and
:meth:`ApprovalsService.refusal` decides. An agent's user, anyone not listed in
``approvals.approvers`` and the principal that asked can read nothing and
approve nothing.

Protocol: one JSON object per line in, one per line out, e.g.
``{"op": "list"}`` → ``{"ok": true, "pending": [...]}``; ``{"op": "approve",
"id": "7K2Q-9XMA"}`` → ``{"ok": true, "request": {...}}``; any failure →
``{"ok": false, "error": "what failed"}``. ``zerto-rewind approvals`` is its client.
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
import stat
import struct
from typing import TYPE_CHECKING, Any

from ..core.approval_view import approver_json
from ..core.approvals import ApprovalError, Approver

if TYPE_CHECKING:
    from .approvals import ApprovalsService

__all__ = ["peer_approver", "serve_approvals_socket"]

log = logging.getLogger("zerto_rewind.gateway")

_MAX_LINE = 64 * 1024
_IDLE_S = 30.0


def peer_approver(sock: socket.socket) -> Approver:
    """The unix user at the other end of ``sock``, as the kernel reports it."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return Approver("unix", f"uid-{uid}")
    groups = set()
    with contextlib.suppress(KeyError, OSError):
        groups = {grp.getgrgid(g).gr_name for g in os.getgrouplist(entry.pw_name, entry.pw_gid)}
    return Approver("unix", entry.pw_name, tuple(sorted(groups)))


async def serve_approvals_socket(
    service: ApprovalsService, path: str, *, mode: int = 0o666
) -> None:
    """Serve the approvals socket at ``path`` until cancelled.

    The socket may be open to every local user (mode 0666 by default): who may
    do what is decided per connection from its peer credentials, not the mode.
    """
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o777 & ~mode)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, mode)
    listener.listen(64)
    listener.setblocking(False)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            approver = peer_approver(writer.get_extra_info("socket"))
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), _IDLE_S)
                except (TimeoutError, ValueError):
                    break
                if not line:
                    break
                answer = await _answer(service, approver, line)
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, OSError) as exc:
            log.warning("approvals socket: connection failed: %s", type(exc).__name__)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    server = await asyncio.start_unix_server(handle, sock=listener, limit=_MAX_LINE)
    try:
        async with server:
            await server.serve_forever()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


async def _answer(service: ApprovalsService, approver: Approver, line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {"ok": False, "error": "each line must be one JSON object"}
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        return {"ok": False, "error": 'each line must be a JSON object with an "op"'}
    op = message["op"]
    if op == "whoami":
        refused = service.refusal(approver, None)
        return {"ok": True, "approver": approver.label, "may_approve": refused is None,
                "why_not": refused}  # fmt: skip
    refused = service.refusal(approver, None)
    if refused is not None:
        log.warning("approvals socket: %s refused (%s)", approver.label, op)
        return {"ok": False, "error": refused}
    try:
        return await _op(service, approver, op, message)
    except ApprovalError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # the store is down: say so, change nothing
        log.warning("approvals socket: %s failed: %s", op, type(exc).__name__)
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
