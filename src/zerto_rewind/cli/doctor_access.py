"""What the agent's user can touch: every guard file it could write, every credential it could read.

The guard is only as strong as the files it trusts. ``doctor --as-user NAME``
answers, for the user that runs the agent, from the files' owners, groups and
mode bits (POSIX permissions; ACLs and capabilities are not read, and say so):

* a guard file (config, hook settings, state, log, venv, socket) is writable if
  the file is, or if any directory above it is (a writable directory lets the
  user rename the file, or the directory, away and put its own in place);
* a credential (the ZVM secret file, a config holding an inline secret or an
  upstream's credentials, the token cache, vCenter credentials in an MCP host
  config) is exposed if the user can read it.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .doctor_config import Check

__all__ = ["Access", "User", "access_checks", "access_of", "lookup_user"]


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gids: frozenset[int]


def lookup_user(name: str) -> User:
    """The user's uid and every group it is in (primary and supplementary)."""
    entry = pwd.getpwnam(name)
    gids = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if name in g.gr_mem}
    return User(name, entry.pw_uid, frozenset(gids))


@dataclass(frozen=True)
class Access:
    read: bool
    write: bool
    why: str  # which path and which bits grant the write, for the report


def _bits(st: os.stat_result, user: User) -> tuple[bool, bool, bool]:
    mode = st.st_mode
    if user.uid == 0:
        return True, True, True
    if st.st_uid == user.uid:
        return bool(mode & stat.S_IRUSR), bool(mode & stat.S_IWUSR), bool(mode & stat.S_IXUSR)
    if st.st_gid in user.gids:
        return bool(mode & stat.S_IRGRP), bool(mode & stat.S_IWGRP), bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IROTH), bool(mode & stat.S_IWOTH), bool(mode & stat.S_IXOTH)


def _can_replace_in(directory: str, st: os.stat_result, user: User, child_uid: int) -> bool:
    """Can ``user`` rename or unlink entries of ``directory`` (sticky bit respected)?"""
    _, write, search = _bits(st, user)
    if not (write and search):
        return False
    if st.st_mode & stat.S_ISVTX:  # /tmp: only the owner of the entry or of the directory
        return user.uid in (0, st.st_uid, child_uid)
    return True


def access_of(path: str, user: User) -> Access:
    """Whether ``user`` may read ``path``, and whether it may change what ``path`` is."""
    path = os.path.abspath(path)
    try:
        st = os.stat(path)
    except OSError:
        return Access(False, False, "")
    read, write, _ = _bits(st, user)
    search_ok = True
    why = f"{path} is writable by {user.name}" if write else ""
    child, child_uid = path, st.st_uid
    # Walk up: every directory must be searchable to read; any replaceable one is a write.
    while True:
        parent = os.path.dirname(child)
        try:
            pst = os.stat(parent)
        except OSError:
            break
        _, _, search = _bits(pst, user)
        search_ok = search_ok and search
        if not write and _can_replace_in(parent, pst, user, child_uid):
            write, why = True, f"{parent} lets {user.name} replace {os.path.basename(child)}"
        if parent == child:
            break
        child, child_uid = parent, pst.st_uid
    # A symlink anywhere is the target's business too: check where it leads.
    real = os.path.realpath(path)
    if real != path:
        target = access_of(real, user)
        if target.write and not write:
            write, why = True, f"{path} leads to {real}: {target.why}"
    return Access(read and search_ok, write, why)


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
    host configs the user can read (found by :mod:`zerto_rewind.gateway.hosts`).
    """
    checks: list[Check] = []
    for label, path in guard_files.items():
        if not os.path.lexists(path):
            checks.append(Check(f"guard file: {label}", "warn", f"{path} does not exist"))
            continue
        access = access_of(path, user)
        if access.write:
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
