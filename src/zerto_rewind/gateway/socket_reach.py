"""Who besides the service's own user can connect to its unix socket.

``approvals.trust_client_answers`` lets the MCP client's own form answer
approve a call: sound only where the one who answers is the person, not an
agent. An agent's host connects to ``gateway --socket`` as the agent's user, so
any such socket that another user can reach (its mode lets others write, or
its group write and the group has members) may have an agent as its peer, and
the option is refused there at start-up (:func:`check_trust_socket`). The
socket file's own mode and group decide who may ``connect()`` (write
permission); the directories above it are not counted, so this errs on the
side of refusing.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..fsaccess import group_name_of, user_name_of

if TYPE_CHECKING:
    from ..config.settings import Settings

__all__ = ["check_trust_socket", "others_who_can_connect"]

_KEY = "approvals.trust_client_answers"


def others_who_can_connect(path: str, agent_users: tuple[str, ...] = ()) -> str | None:
    """Who, other than the socket's owner, may connect to ``path``; None if nobody may.

    Said for a person: ``any local user (mode 0666)``, or ``the members of group
    agents, alice, bob (mode 0660),``, agents' users (``approvals.agent_users``) first.
    """
    info = os.stat(path)
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o002:
        return f"any local user (mode {mode:04o})"
    if not mode & 0o020:
        return None
    members = _group_members(info.st_gid)
    owner = user_name_of(info.st_uid)
    others = sorted(members - {owner}, key=lambda name: (name not in agent_users, name))
    if not others:
        return None
    group = group_name_of(info.st_gid)
    return f"the members of group {group}, {', '.join(others)} (mode {mode:04o}),"


def check_trust_socket(settings: Settings, path: str) -> None:
    """ConfigError naming the key if trust_client_answers is on and others reach ``path``."""
    if not settings.approvals.trust_client_answers:
        return
    reach = others_who_can_connect(path, settings.approvals.agent_users)
    if reach is None:
        return
    msg = (
        f"approvals.trust_client_answers is on, and the socket {path} lets {reach} connect: "
        "an agent connecting as one of them could answer its own questions. Use it only "
        "with --stdio or a socket that only the service's own user can reach "
        "(--socket-mode 0600), or turn it off and name approvers (approvals.approvers)"
    )
    raise ConfigError(msg, path=settings.path, key=_KEY)


def _group_members(gid: int) -> set[str]:
    """Users listed in the group, and users whose primary group it is."""
    try:
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        members = set()
    members.update(user.pw_name for user in pwd.getpwall() if user.pw_gid == gid)
    return members
