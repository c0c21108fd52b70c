"""The Redis of ``state.url``: does it refuse strangers, and who can reach it?

Approval requests and tag records live there. Their MACs stop a stranger from
approving a call, but one who can write to the Redis can still delete or delay
them, and read what the approver reads. So the doctor connects as a stranger
would, with no credentials: a PING that answers is a failure. And it warns when
any local user can reach the server without TLS: ``redis://`` over TCP, or a unix
socket that others may connect to.
"""

from __future__ import annotations

import os
import stat
from urllib.parse import urlsplit

from ...config.settings import Settings, StateRedisSettings
from ...errors import ConfigError
from ...zvm.redis_conn import connect, redacted_url
from .check import Check

__all__ = ["redis_checks"]


def redis_checks(settings: Settings) -> list[Check]:
    """Authentication and reach of ``state.url``; nothing when the state is a directory."""
    if not settings.state_url:
        return []
    return [_authentication_check(settings.state_url, settings), _reach_check(settings.state_url)]


def _authentication_check(url: str, settings: Settings) -> Check:
    where = redacted_url(url)
    answered, problem = _ping(_stranger_url(url, settings))
    if answered:
        detail = (
            f"the Redis at {where} answers a connection without a password: any process "
            "that reaches it can delete or delay approval requests and tag records, and "
            "read the arguments of every waiting call"
        )
        fix = (
            "set requirepass (or an ACL user with a password, and the default user off) and "
            "name the password with state.password_file or state.password_env"
        )
        return Check("redis authentication", "fail", detail, fix)
    if problem != "authentication":
        return Check("redis authentication", "warn", f"cannot reach {where}: {problem}")
    try:
        ours, ours_problem = _ping(settings.state_connection_url() or url)
    except ConfigError as exc:
        return Check("redis authentication", "fail", f"{where}: {exc}", exc.advice)
    if not ours:
        detail = f"{where} refuses a connection without a password, and the guard's: {ours_problem}"
        fix = "check the password that state.password_file or state.password_env names"
        return Check("redis authentication", "fail", detail, fix)
    return Check("redis authentication", "pass", f"{where} answers only with the guard's password")


def _reach_check(url: str) -> Check:
    parts = urlsplit(url)
    where = redacted_url(url)
    if parts.scheme == "rediss":
        return Check("redis transport", "pass", f"{where}: TLS, the server's certificate verified")
    if parts.scheme == "redis":
        detail = (
            f"{where} is plain TCP: any local user (and anyone on its network) can reach it, "
            "and its password crosses the network in clear"
        )
        fix = "use rediss:// (TLS, state.ca_file), or a unix socket only the guard's user may open"
        return Check("redis transport", "warn", detail, fix)
    path = parts.path
    if _others_may_connect(path):
        detail = f"the Redis socket {path} can be opened by any local user"
        fix = "set unixsocketperm 660 (or 600) and keep its directory closed to others"
        return Check("redis transport", "warn", detail, fix)
    return Check("redis transport", "pass", f"the Redis socket {path} is closed to other users")


def _others_may_connect(path: str) -> bool:
    """Connecting to a socket needs write on it and search on every directory above it."""
    try:
        if not os.stat(path).st_mode & stat.S_IWOTH:
            return False
        directory = os.path.dirname(os.path.abspath(path))
        while True:
            if not os.stat(directory).st_mode & stat.S_IXOTH:
                return False
            parent = os.path.dirname(directory)
            if parent == directory:
                return True
            directory = parent
    except OSError:
        return False  # missing: the authentication check says it cannot be reached


def _stranger_url(url: str, settings: Settings) -> str:
    """``url`` as a stranger would use it: no user, no password, the same TLS settings."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    # Not urlunsplit: it drops the "//" of unix:// when there is no host.
    bare = f"{parts.scheme}://{netloc}{parts.path}"
    ca_file = settings.state_redis.ca_file if settings.state_redis is not None else None
    return StateRedisSettings(ca_file=ca_file).connection_url(bare)


def _ping(url: str) -> tuple[bool, str]:
    """(answered, why not): "authentication" when the server asks for credentials."""
    from redis import exceptions

    try:
        client = connect(url)
    except ConfigError as exc:
        return False, exc.problem
    try:
        return bool(client.ping()), ""
    except exceptions.AuthenticationError:
        return False, "authentication"
    except exceptions.ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            return False, "authentication"
        return False, type(exc).__name__
    except exceptions.RedisError as exc:
        return False, f"{type(exc).__name__} (is Redis running there?)"
    finally:
        client.close()
