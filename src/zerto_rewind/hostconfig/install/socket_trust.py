"""Whether install may trust the guard service's unix socket (``--service unix:PATH``).

Install refuses a socket that someone other than the guard service could put in
place (a directory at or above it that the agent's user can change, judged by
:mod:`.fsaccess`), and one the agent's own user serves. What it accepts, it pins:
the service's uid goes into the hook command (``--service-user``).
"""

from __future__ import annotations

import os
import pwd

from ...fsaccess import User, directory_writer, lookup_user, uid_of, user_label, users_except
from .plan import InstallRefused

__all__ = ["socket_identity", "user_name"]


def socket_identity(
    path: str, *, service_user: str | None, agent_user: str | None
) -> tuple[int, str]:
    """(the uid the service must run as, a summary) for the socket at ``path``.

    InstallRefused when the socket is missing, when the agent's user serves it, or when a
    directory at or above it lets the agent's user put its own socket there (a
    world-writable sticky directory too: the agent can create the path before the
    service does). ``--force`` does not override any of these.
    """
    owner, uid = _owner_and_service_uid(path, service_user)
    agents, who = _agent_users(agent_user, uid)
    label = user_label(uid)
    if any(agent.uid == uid for agent in agents):  # as root, by default, it is left out
        msg = (
            f"the socket {path} is served by {label}, the agent's own user: a guard the agent "
            "runs can answer allow for itself. Run the guard service as another user (root, or "
            "its own, e.g. zerto-rewind) and install again"
        )
        if not agent_user:
            msg += "; if the agent runs as another user, name it with --agent-user NAME"
        raise InstallRefused(msg)
    if not agent_user and not service_user and os.geteuid() == 0 and owner != 0:
        msg = (
            f"the socket {path} belongs to {label}, not root: name the guard service's user "
            f"with --service-user {user_name(str(uid)) or uid} to confirm it is the service's "
            "(or the agent's user with --agent-user NAME), so that install does not trust a "
            "socket the agent made"
        )
        raise InstallRefused(msg)
    found = directory_writer(path, agents)
    if found is not None:
        agent, access = found
        msg = (
            f"the socket {path} is in a directory that {agent.name} (the agent's user) "
            f"can change: {access.why}. Whoever can write there can put its own socket "
            "in the guard service's place and answer allow (a sticky directory such as "
            "/tmp does not help: the agent can create the path before the service "  # noqa: S108
            "starts), so --force does not override this. Serve the socket from a "
            "directory only root or the service's user can write, every directory "
            "above it too (e.g. /run/zerto-rewind, 0755), and install again"
        )
        raise InstallRefused(msg)
    summary = (
        f"{path} must be served by {label} (--service-user {uid}): the hook sends nothing to "
        f"any other listener; no directory at or above it can be changed by {who}"
    )
    return uid, summary


def _owner_and_service_uid(path: str, service_user: str | None) -> tuple[int, int]:
    """(who owns the socket, the uid the service must run as: ``service_user``, else the owner)."""
    try:
        owner = os.stat(path).st_uid
    except OSError as exc:
        msg = (
            f"cannot find the guard service's socket {path} ({exc.strerror or exc}): start the "
            "service (zerto-rewind gateway --socket PATH) first"
        )
        raise InstallRefused(msg) from None
    if not service_user:
        return owner, owner
    uid = uid_of(service_user)
    if uid is None:
        msg = f"--service-user {service_user}: no such user"
        raise InstallRefused(msg)
    return owner, uid


def _agent_users(name: str | None, service_uid: int) -> tuple[list[User], str]:
    """Who may run the agent: ``--agent-user``, else the user running install; as root, all but
    root and the service's user."""
    if name:
        try:
            user = lookup_user(name)
        except KeyError:
            msg = f"--agent-user {name}: no such user"
            raise InstallRefused(msg) from None
        return [user], user.name
    euid = os.geteuid()
    if euid == 0:
        return users_except({0, service_uid}), "any user but root and the service's"
    try:
        user = lookup_user(pwd.getpwuid(euid).pw_name)
    except KeyError:
        user = User(f"uid {euid}", euid, frozenset({os.getegid(), *os.getgroups()}))
    return [user], user.name


def user_name(user: str) -> str | None:
    """The name of ``user`` (a name or a uid), None when the passwd database has no such user."""
    try:
        return pwd.getpwuid(int(user)).pw_name if user.isdigit() else pwd.getpwnam(user).pw_name
    except KeyError:
        return None
