"""The doctor's upstream checks: who each stdio VM server runs as, and what it can reach.

Whatever the agent makes a VM server do (write a local path, upload a local
file), the server does as its own user. Per stdio upstream: the user and group it
runs as (:mod:`zerto_rewind.gateway.upstream_user`, as the gateway resolves them); a
failure when that is root or the owner of the guard's files without the
allowance; a failure when that user, with no supplementary groups (as the
launcher starts it), can read the guard's config or ZVM secret file, or change
its state dir or decision log (:func:`~zerto_rewind.fsaccess.access_of`,
POSIX modes only); and a trial start as that user (:func:`upstream_start_checks`),
which names the first path it cannot reach.
"""

from __future__ import annotations

import os

from ...config.settings import Settings
from ...errors import ConfigError
from ...fsaccess import User, access_of
from ...gateway.upstream_probe import probe_start
from ...gateway.upstream_user import ALLOW_FLAG, privileged_reason, upstream_identity
from .check import Check
from .config import zvm_secret_files

__all__ = ["upstream_checks", "upstream_start_checks"]


def upstream_checks(settings: Settings, *, allow_privileged: bool = False) -> list[Check]:
    """One check per stdio upstream of the config."""
    checks: list[Check] = []
    for name, spec in settings.upstreams.items():
        if spec.command is None:
            continue
        label = f"upstream {name}: identity"
        key = f"upstreams.{name}.user"
        try:
            identity = upstream_identity(spec, settings.path)
        except ConfigError as exc:
            checks.append(Check(label, "fail", str(exc), f"fix {key} in {settings.path}"))
            continue
        runs_as = f"runs as {identity.label}, gid {identity.gid}, no supplementary groups"
        if not identity.switch:
            runs_as += f" (no {key}: the gateway's own user)"
        reason = privileged_reason(settings, identity)
        if reason is not None:
            fix = (
                f"set {key} to a user of its own (useradd --system --no-create-home NAME) "
                "that cannot read the guard's config or secret"
            )
            if allow_privileged:
                detail = f"{runs_as}; {reason}, allowed by {ALLOW_FLAG}"
                checks.append(Check(label, "warn", detail, fix))
            else:
                detail = f"{runs_as}; {reason}: the gateway refuses to start it"
                checks.append(
                    Check(label, "fail", detail, f"{fix}, or accept it with {ALLOW_FLAG}")
                )
            continue
        problems = _reach(settings, User(identity.name, identity.uid, frozenset({identity.gid})))
        if problems:
            fix = (
                "make those files root's (or the gateway user's) with mode 0600, in directories "
                "the upstream's user cannot write"
            )
            checks.append(Check(label, "fail", f"{runs_as}; it " + "; ".join(problems), fix))
        else:
            detail = f"{runs_as}; it cannot read the config or secret, nor change state or log"
            checks.append(Check(label, "pass", detail))
    return checks


def _reach(settings: Settings, user: User) -> list[str]:
    """What of the guard's ``user`` could read or change, in words."""
    found: list[str] = []
    readable = {"config": settings.path, **zvm_secret_files(settings)}
    for label, path in readable.items():
        access = access_of(path, user)
        if access.read:
            found.append(f"can read the {label} {path}")
        elif access.write:
            found.append(f"can change the {label}: {access.why}")
    for label, path in {"state dir": settings.state_dir, "decision log": settings.log_path}.items():
        access = access_of(path, user)
        if access.write:
            found.append(f"can change the {label}: {access.why}")
    return found


def upstream_start_checks(
    settings: Settings, *, allow_privileged: bool = False, timeout_s: float = 15.0
) -> list[Check]:
    """Per stdio upstream, a trial start as its user: does it run, and answer ``initialize``?

    It is started through the gateway's launcher (same user, no supplementary
    groups, same environment) and stopped at its answer or after ``timeout_s``.
    One the gateway would refuse to start, or that this doctor cannot start as its
    user, is not tried.
    """
    checks: list[Check] = []
    for name, spec in settings.upstreams.items():
        if spec.command is None:
            continue
        label = f"upstream {name}: start"
        try:
            identity = upstream_identity(spec, settings.path)
        except ConfigError:
            continue  # the identity check says why
        if identity.switch and os.geteuid() not in (0, identity.uid):
            detail = f"not tried: doctor runs as uid {os.geteuid()}, and cannot switch to "
            detail += identity.label
            checks.append(Check(label, "warn", detail, "run doctor as root to try it"))
            continue
        if privileged_reason(settings, identity) is not None and not allow_privileged:
            continue  # the identity check fails it: the gateway would not start it
        result = probe_start(spec, identity, timeout_s)
        if result.outcome == "ok":
            checks.append(Check(label, "pass", result.detail))
        elif result.outcome == "slow":
            fix = (
                "it may connect to vCenter before it answers; if the gateway's "
                f"connection fails too, see the upstream's log {_log(settings, name)}"
            )
            checks.append(Check(label, "warn", result.detail, fix))
        else:
            fix = (
                "make every directory on that way searchable by the upstream's user "
                "(chmod o+x), or install the server where that user can reach it"
            )
            checks.append(Check(label, "fail", result.detail, fix))
    return checks


def _log(settings: Settings, name: str) -> str:
    spec = settings.upstreams[name]
    return spec.log_path or os.path.join(settings.state_dir, "upstreams", f"{name}.log")
