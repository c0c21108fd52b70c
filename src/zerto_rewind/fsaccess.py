"""What another user can do to a path: the permission logic of ``install`` and ``doctor --as-user``.

Pure and POSIX-only, from the files' owners, groups and mode bits (ACLs and
capabilities are not read): a path is *writable* by a user if the path is, or if
any directory above it lets the user rename it, or the directory, away and put
its own in place (the sticky bit respected). ``install claude-code --service``
refuses a socket whose directory the agent's user could change this way, and the
gateway a directory for its own sockets that any user but root and its own could
(:func:`directory_writer`); ``doctor --as-user`` reports every guard file it could
(:mod:`.cli.doctor.access`).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Collection
from dataclasses import dataclass

__all__ = [
    "ANY_OTHER_USER",
    "Access",
    "User",
    "access_of",
    "directory_writer",
    "group_name_of",
    "lookup_user",
    "uid_of",
    "user_label",
    "user_name_of",
    "users_except",
]


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gids: frozenset[int]


# A user that owns nothing and is in no group: what "the others" mode bits grant.
ANY_OTHER_USER = User("any other user", -1, frozenset())


def lookup_user(name: str) -> User:
    """The user's uid and every group it is in (primary and supplementary); KeyError if none."""
    entry = pwd.getpwnam(name)
    gids = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if name in g.gr_mem}
    return User(name, entry.pw_uid, frozenset(gids))


def uid_of(user: str) -> int | None:
    """The uid of ``user`` (a name, or a uid in digits); None for a name the database lacks."""
    if user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def user_name_of(uid: int) -> str:
    """The user's name, or the uid in digits for one the passwd database does not know."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name_of(gid: int) -> str:
    """The group's name, or the gid in digits for one the group database does not know."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def user_label(uid: int) -> str:
    """``zerto (uid 998)``, or ``uid 998`` for a uid the passwd database does not know."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def users_except(uids: Collection[int]) -> list[User]:
    """Every user of the passwd database whose uid is not in ``uids``, and :data:`ANY_OTHER_USER`.

    For a judgement made as root with no agent user named: whoever else may log in,
    or run a process under a uid the database does not list, is taken as the agent.
    """
    members: dict[str, set[int]] = {}
    for group in grp.getgrall():
        for member in group.gr_mem:
            members.setdefault(member, set()).add(group.gr_gid)
    found = {
        entry.pw_uid: User(entry.pw_name, entry.pw_uid,
                           frozenset({entry.pw_gid} | members.get(entry.pw_name, set())))
        for entry in pwd.getpwall()
        if entry.pw_uid not in uids
    }  # fmt: skip
    return [*found.values(), ANY_OTHER_USER]


@dataclass(frozen=True)
class Access:
    read: bool
    write: bool
    why: str  # which path and which bits grant the write, for the report


def _bits(st: os.stat_result, user: User) -> tuple[bool, bool, bool]:
    """(read, write, search) for ``user``; the owner may chmod, so it may do all three."""
    mode = st.st_mode
    if user.uid in (0, st.st_uid):
        return True, True, True
    if st.st_gid in user.gids:
        return bool(mode & stat.S_IRGRP), bool(mode & stat.S_IWGRP), bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IROTH), bool(mode & stat.S_IWOTH), bool(mode & stat.S_IXOTH)


def _can_replace_in(st: os.stat_result, user: User, child_uid: int) -> bool:
    """Can ``user`` rename or unlink entries of the directory stat ``st`` (sticky bit respected)?"""
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
    if st.st_uid == user.uid:
        why = f"{path} belongs to {user.name}"
    else:
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
        if not write and _can_replace_in(pst, user, child_uid):
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


def directory_writer(path: str, users: Collection[User]) -> tuple[User, Access] | None:
    """The first of ``users`` who may change the directory holding ``path``, and how.

    Both the directory named and the one ``path`` really leads to count, each with
    every directory above it (:func:`access_of`). None when no one of them may.
    """
    named = os.path.dirname(os.path.abspath(path))
    real = os.path.dirname(os.path.realpath(path))
    for directory in dict.fromkeys([named, real]):
        for user in users:
            access = access_of(directory, user)
            if access.write:
                return user, access
    return None
