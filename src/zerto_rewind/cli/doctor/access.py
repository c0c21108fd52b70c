"""What the agent's user can touch: every guard file it could write, every credential it could read.

The guard is only as strong as the files it trusts. ``doctor --as-user NAME``
answers, for the user that runs the agent, from the files' owners, groups and
mode bits (POSIX permissions; ACLs and capabilities are not read, and say so;
the logic itself is :mod:`...fsaccess`, shared with ``install``):

* a guard file (config, hook settings, state, log, venv, socket) is writable if
  the file is, or if any directory above it is (a writable directory lets the
  user rename the file, or the directory, away and put its own in place);
* a credential (the ZVM secret file, a config holding an inline secret or an
  upstream's credentials, the token cache, vCenter credentials in an MCP host
  config) is exposed if the user can read it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ...fsaccess import Access, User, access_of, lookup_user
from .check import Check

__all__ = ["Access", "User", "access_checks", "access_of", "lookup_user"]

# .files labels the directory of a thin hook's unix socket so.
_SOCKET_DIRECTORY = "service socket directory"


def access_checks(
    user: User,
    *,
    guard_files: Mapping[str, str],
    credentials: Mapping[str, str],
    mcp_credentials: Iterable[tuple[str, str, list[str]]] = (),
) -> list[Check]:
    """One check per guard file and per credential; fail when the user can touch it.

    ``guard_files`` and ``credentials`` map a label to a path; ``mcp_credentials``
    lists (file, server, reasons) for VM-server entries holding credentials in MCP
    host configs the user can read (found by :mod:`zerto_rewind.hostconfig`).
    """
    checks: list[Check] = []
    for label, path in guard_files.items():
        if not os.path.lexists(path):
            checks.append(Check(f"guard file: {label}", "warn", f"{path} does not exist"))
            continue
        access = access_of(path, user)
        if access.write and label.startswith(_SOCKET_DIRECTORY):
            fix = (
                "whoever can change that directory can put its own socket in the service's "
                "place and answer allow: serve the socket from a directory that only root or "
                "the service's user can write (every directory above it too, and not a sticky "
                "/tmp), then re-run zerto-rewind install claude-code --service"
            )
            checks.append(Check(f"guard file: {label}", "fail", access.why, fix))
        elif access.write:
            fix = f"give {path} to another user (root or the service's user); mode 0644 or 0600"
            checks.append(Check(f"guard file: {label}", "fail", access.why, fix))
        else:
            checks.append(
                Check(f"guard file: {label}", "pass", f"{user.name} cannot change {path}")
            )
    for label, path in credentials.items():
        if not os.path.lexists(path):
            continue
        access = access_of(path, user)
        if access.read:
            detail = f"{user.name} can read {path}"
            fix = f"make {path} readable only by the guard's user (chmod 600, chown)"
            checks.append(Check(f"credential: {label}", "fail", detail, fix))
        else:
            detail = f"{user.name} cannot read {path}"
            checks.append(Check(f"credential: {label}", "pass", detail))
    for file, server, reasons in mcp_credentials:
        if access_of(file, user).read:
            detail = (
                f"{file}: server {server!r} ({'; '.join(reasons)}) gives {user.name} the VM "
                "system's credentials, so the agent can bypass every guarded tool"
            )
            fix = f"zerto-rewind install mcp-host … --server {server} (the gateway then holds them)"
            checks.append(Check("credential: VM server in an MCP config", "fail", detail, fix))
    return checks
