"""Who can change the directory of a guard service's unix socket: the doctor's side of it.

The gateway refuses to make its decide socket (``--socket``) or approvals socket
(``--approvals-socket``) in a directory that any user but root and its own can
change (:mod:`zerto_rewind.gateway.unix_listen`); ``install --service`` refuses
such a socket too. The doctor says the same of the sockets it is shown: a thin
hook's or a host hook's ``--service unix:PATH``, and the approvals CLI's
``ZERTO_REWIND_APPROVALS``, judged for every user but root and the socket's owner
(the service's user), with the same logic (:func:`zerto_rewind.fsaccess.directory_writer`).
"""

from __future__ import annotations

import os

from ...fsaccess import directory_writer, user_label, users_except
from .check import Check

__all__ = ["socket_directory_checks"]

_NAME = "socket directory"


def socket_directory_checks(path: str, where: str) -> list[Check]:
    """One check of the socket ``path`` (named by ``where``); none when it does not exist.

    A missing socket is the service checks' to report: who owns it is unknown.
    """
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return []
    found = directory_writer(path, users_except({0, owner}))
    directory = os.path.dirname(os.path.abspath(path))
    if found is None:
        detail = (
            f"{where}: only root and the service's user {user_label(owner)} can change "
            f"{directory} and the directories above it"
        )
        return [Check(_NAME, "pass", detail)]
    user, access = found
    detail = (
        f"{where}: {directory} can be changed by {user.name} ({access.why}); whoever can "
        f"write there can put their own socket in the place of {path}, and the gateway "
        "refuses to serve a socket there"
    )
    fix = (
        "serve the socket from a directory that only root or the service's user can write, "
        "every directory above it too (e.g. /run/zerto-rewind, mode 0755, owned by the "
        "service's user), and point the hooks and the approvals CLI there"
    )
    return [Check(_NAME, "fail", detail, fix)]
