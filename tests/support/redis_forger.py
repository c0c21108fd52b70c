"""What an agent's unix user does to a Redis it can reach: rewrite the guard's records.

``FORGER`` is a Python program for ``python -c``, run as that user: a few bytes of
RESP over a plain socket, no client library, no key. Its arguments are the port,
a key pattern (``approve``: every request matching it is set to approved) or one
key (any other mode: a VPG record with a tag that "landed" a second ago, its
``vpg_name`` the mode), and the mode.
"""

from __future__ import annotations

__all__ = ["FORGER"]

FORGER = r"""
import json, socket, sys, time
port, pattern, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sock = socket.create_connection(("127.0.0.1", port))
stream = sock.makefile("rb")

def read():
    line = stream.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"-":
        raise SystemExit(rest.decode())
    if kind in (b"+", b":"):
        return rest.decode()
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else stream.read(size + 2)[:-2].decode()
    return [read() for _ in range(int(rest))]

def command(*args):
    out = b"*%d\r\n" % len(args)
    for arg in args:
        data = arg.encode()
        out += b"$%d\r\n%s\r\n" % (len(data), data)
    sock.sendall(out)
    return read()

keys = command("KEYS", pattern) if mode == "approve" else [pattern]
for key in keys:
    record = json.loads(command("GET", key) or "{}")
    now = time.time()
    if mode == "approve":
        record.update(state="approved", decided_by="unix:zr-never-acted", decided_at=now)
    else:
        record.update(vpg_id=key.rsplit(":", 1)[1], vpg_name=mode, allowed_since_landing=0)
        record["tag"] = {
            "name": "zerto-rewind forged", "requested_at": now - 30, "expected_at": now - 20,
            "overdue_at": now + 3600, "state": "landed", "checkpoint_id": "forged-checkpoint",
            "landed_at": now - 1,
        }
    command("SET", key, json.dumps(record))
    if mode != "approve":
        command("SADD", "zerto-rewind:vpgs", record["vpg_id"])
print(len(keys))
"""
