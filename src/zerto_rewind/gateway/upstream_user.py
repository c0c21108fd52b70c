"""Who a stdio upstream runs as, where it works, and whether the gateway may start it so.

The VM MCP server does whatever the agent can make it do (a tool that writes a
local path, one that uploads a local file) with the rights of its user. So that
user must not be root, nor the user that owns the guard's config, secret, state
or log: :func:`check_upstreams` refuses both unless the operator passed
``--allow-privileged-upstream``. :func:`private_dir` makes the upstream's own
working directory (its ``HOME`` and ``TMPDIR`` too). The process itself is set up by
:mod:`.confine`.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..fsaccess import user_label
from .confine import launcher_argv

if TYPE_CHECKING:
    from ..config.settings import Settings, UpstreamSettings

__all__ = [
    "ALLOW_FLAG",
    "UpstreamIdentity",
    "check_upstreams",
    "confined_argv",
    "guard_file_owners",
    "private_dir",
    "privileged_reason",
    "stdio_env",
    "upstream_identity",
]

ALLOW_FLAG = "--allow-privileged-upstream"
# Only these variables of the gateway's own environment reach a stdio server;
# the rest (the gateway's secrets among them) stay here. HOME and TMPDIR are the
# server's private directory, never the gateway's (private_dir).
_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "SSL_CERT_FILE", "SSL_CERT_DIR")


@dataclass(frozen=True)
class UpstreamIdentity:
    """The uid and gid an upstream runs as; ``switch``: the launcher changes to them."""

    uid: int
    gid: int
    label: str
    switch: bool

    @property
    def name(self) -> str:
        """The user's name (``USER``, ``LOGNAME``), or the uid in digits."""
        return self.label.partition(" (uid")[0].removeprefix("uid ")


def upstream_identity(spec: UpstreamSettings, config: str | None = None) -> UpstreamIdentity:
    """The identity ``spec`` names (``user``/``group``), else the gateway's own."""
    if spec.user is None:
        uid = os.geteuid()
        return UpstreamIdentity(uid, os.getegid(), user_label(uid), switch=False)
    key = f"upstreams.{spec.name}"
    try:
        entry: pwd.struct_passwd | None = (
            pwd.getpwuid(int(spec.user)) if spec.user.isdigit() else pwd.getpwnam(spec.user)
        )
    except KeyError:
        if not spec.user.isdigit():
            msg = f"no user named {spec.user!r} on this host; create it (useradd --system)"
            raise ConfigError(msg, path=config, key=f"{key}.user") from None
        entry = None
    uid = int(spec.user) if entry is None else entry.pw_uid
    if spec.group is not None:
        try:
            gid = int(spec.group) if spec.group.isdigit() else grp.getgrnam(spec.group).gr_gid
        except KeyError:
            msg = f"no group named {spec.group!r} on this host"
            raise ConfigError(msg, path=config, key=f"{key}.group") from None
    elif entry is not None:
        gid = entry.pw_gid
    else:
        msg = f"uid {uid} is not in the user database, so it has no primary group: give group"
        raise ConfigError(msg, path=config, key=f"{key}.group")
    return UpstreamIdentity(uid, gid, user_label(uid), switch=True)


def guard_file_owners(settings: Settings) -> dict[int, list[str]]:
    """uid -> the guard's files it owns: config, ZVM secret file, state dir, decision log."""
    paths = {"config": settings.path, "state dir": settings.state_dir}
    paths["decision log"] = settings.log_path
    for site, zvm in settings.zvms.items():  # every site's secret, not only the first's
        if zvm.secret_kind == "file":  # noqa: S105 - a kind, not a secret
            label = "ZVM secret file" if len(settings.zvms) == 1 else f"ZVM {site} secret file"
            paths[label] = zvm.secret_hint
    owners: dict[int, list[str]] = {}
    for label, path in paths.items():
        try:
            owners.setdefault(os.stat(path).st_uid, []).append(f"{label} {path}")
        except OSError:
            continue  # not there yet: nothing to own
    return owners


def privileged_reason(settings: Settings, identity: UpstreamIdentity) -> str | None:
    """Why running an upstream as ``identity`` puts the guard in its reach; None if it does not."""
    if identity.uid == 0:
        return f"it would run as root ({identity.label}), who can read and change every file"
    owned = guard_file_owners(settings).get(identity.uid)
    if owned:
        return f"it would run as {identity.label}, who owns the guard's {', '.join(owned)}"
    return None


def check_upstreams(settings: Settings, names: Iterable[str], *, allow_privileged: bool) -> None:
    """Refuse to start a stdio upstream that would run with the guard's own rights.

    Anything the agent makes the VM server do (a tool that writes a local path,
    one that reads a local file), it does as that server's user; as root or as
    the guard's owner, that reaches the guard's config, secret, state and log.
    """
    for name in names:
        spec = settings.upstreams[name]
        if spec.command is None:
            continue  # an HTTP upstream runs elsewhere, under its own identity
        key = f"upstreams.{name}"
        identity = upstream_identity(spec, settings.path)
        if identity.switch and os.geteuid() not in (0, identity.uid):
            msg = (
                f"the gateway runs as {user_label(os.geteuid())} and cannot start upstream "
                f"{name!r} as {identity.label}: run the gateway as root (it drops to that "
                "user for the upstream only, and keeps root for nothing else it starts)"
            )
            raise ConfigError(msg, path=settings.path, key=f"{key}.user")
        _check_workdir(settings, spec, key)
        reason = privileged_reason(settings, identity)
        if reason is not None and not allow_privileged:
            msg = (
                f"the gateway will not start upstream {name!r}: {reason}. Whatever the agent "
                "makes that server do (write a local path, upload a local file) would reach "
                f"the guard's config, secret, state and log. Set {key}.user to a user of its "
                "own (useradd --system --no-create-home NAME) that cannot read those files, "
                f"or start the gateway with {ALLOW_FLAG} to accept the risk"
            )
            raise ConfigError(msg, path=settings.path, key=f"{key}.user")


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _check_workdir(settings: Settings, spec: UpstreamSettings, key: str) -> None:
    """A configured workdir must not hold, or lie inside, the guard's own files."""
    workdir = spec.workdir
    if workdir is None:
        return
    guard = [settings.path, settings.state_dir, settings.log_path]
    guard += [
        zvm.secret_hint
        for zvm in settings.zvms.values()
        if zvm.secret_kind == "file"  # noqa: S105 - a kind, not a secret
    ]
    for path in guard:
        if _inside(workdir, path) or _inside(path, workdir):
            msg = (
                f"{workdir} overlaps the guard's {path}: the upstream owns its working "
                "directory, so give it one of its own, apart from the guard's files"
            )
            raise ConfigError(msg, path=settings.path, key=f"{key}.workdir")


def stdio_env(spec: UpstreamSettings, identity: UpstreamIdentity, home: str) -> dict[str, str]:
    """The environment a stdio upstream starts with: a few of the gateway's, then its own."""
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
    # Over the SDK's own defaults (HOME, USER, LOGNAME of the gateway's user).
    env.update(HOME=home, TMPDIR=home, USER=identity.name, LOGNAME=identity.name)
    return {**env, **spec.env}


@contextmanager
def private_dir(spec: UpstreamSettings, identity: UpstreamIdentity) -> Iterator[str]:
    """The upstream's working directory, owned by its user, mode 0700, for one start.

    ``workdir`` if configured (made if missing; it must be the upstream's already
    if it exists), else a fresh directory under the gateway's temporary directory,
    removed again when the upstream stops.
    """
    made = spec.workdir is None
    if spec.workdir is None:
        path = tempfile.mkdtemp(prefix=f"zerto-rewind-{spec.name}-")
    else:
        path = spec.workdir
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            owner = os.stat(path).st_uid
            if owner != identity.uid:
                msg = (
                    f"{path} belongs to {user_label(owner)}, not to {identity.label}: "
                    "give the upstream a working directory of its own"
                )
                raise ConfigError(msg, key=f"upstreams.{spec.name}.workdir") from None
    try:
        if identity.switch:
            os.chown(path, identity.uid, identity.gid)
        os.chmod(path, 0o700)
        yield path
    finally:
        if made:
            shutil.rmtree(path, ignore_errors=True)


def confined_argv(command: list[str], identity: UpstreamIdentity, home: str) -> list[str]:
    """The launcher's argv that runs ``command`` as ``identity`` in ``home``, dying with us."""
    switch = identity.switch
    return launcher_argv(
        command,
        uid=identity.uid if switch else None,
        gid=identity.gid if switch else None,
        cwd=home,
        parent=os.getpid(),
    )
