"""The settings of the sections past the catalog: guard, upstreams, gateway, approvals, state.

Plain classes: the hook builds the guard's on every call.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from .secret_file import read_secret_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "ApprovalsSettings",
    "GatewaySettings",
    "GuardSettings",
    "LimitsSettings",
    "LogAnchorSettings",
    "StateRedisSettings",
    "UpstreamSettings",
]

UNKNOWN_CHOICES = ("prompt", "allow", "deny")
ON_PENDING_CHOICES = ("deny", "prompt", "defer")
PROMPT_AS_CHOICES = ("ask", "deny")
PROMPT_VIA_CHOICES = ("host", "approvals")
# Which ZVM takes a VPG's tag: its protected site's, or any that lists it (UNCONFIRMED
# that Zerto accepts a tag from the recovery site's ZVM; docs/configuration.md).
TAG_VIA_CHOICES = ("protected", "any")
DEFAULT_SITE_DOWN_S = 10.0
SITE_KINDS = ("vcenter", "hyperv", "vcd", "aws", "azure", "gcp", "public_cloud", "unknown")
DEFAULT_SITE_CADENCE_S = {
    "vcenter": 5.0,
    "hyperv": 5.0,
    "vcd": 5.0,
    "azure": 60.0,
    "aws": 630.0,
    "gcp": 630.0,
    "public_cloud": 630.0,
    "unknown": 630.0,
}
DEFAULT_GUARD_TIMEOUT_S = 150.0
DEFAULT_MAX_TAGS_PER_MINUTE = 6


class GuardSettings:
    """The guard's policy knobs (see docs/configuration.md)."""

    __slots__ = (
        "cadence_s",
        "landing_allowance_s",
        "max_tags_per_minute",
        "on_pending",
        "overdue_factor",
        "overdue_min_s",
        "prompt_as",
        "prompt_via",
        "protect_self",
        "site_cadence_s",
        "site_down_s",
        "site_types",
        "tag_prefix",
        "tag_via",
        "timeout_s",
        "vm_cache_ttl_s",
    )

    def __init__(self, **values: Any) -> None:
        self.timeout_s: float = values.get("timeout_s", DEFAULT_GUARD_TIMEOUT_S)
        self.on_pending: str = values.get("on_pending", "deny")
        self.prompt_as: str = values.get("prompt_as", "ask")
        # host: a hook's prompt is the host's own (Claude Code's permission prompt);
        # approvals: it becomes an approval request a person answers elsewhere (headless runs).
        self.prompt_via: str = values.get("prompt_via", "host")
        self.cadence_s: dict[str, float] = values.get("cadence_s", {})
        self.site_cadence_s: dict[str, float] = {
            **DEFAULT_SITE_CADENCE_S,
            **values.get("site_cadence_s", {}),
        }
        self.site_types: dict[int, str] = values.get("site_types", {})
        self.landing_allowance_s: float = values.get("landing_allowance_s", 3.0)
        self.overdue_factor: float = values.get("overdue_factor", 3.0)
        self.overdue_min_s: float = values.get("overdue_min_s", 60.0)
        self.vm_cache_ttl_s: float = values.get("vm_cache_ttl_s", 60.0)
        self.tag_prefix: str = values.get("tag_prefix", "zerto-rewind")
        # protected: a VPG is tagged on its protected site's ZVM; any: on any ZVM that lists
        # it, the protected site's first (whether Zerto takes that is UNCONFIRMED).
        self.tag_via: str = values.get("tag_via", "protected")
        # How long a ZVM that failed to answer is treated as down without asking it again,
        # so a hanging site costs its timeout once, not on every call.
        self.site_down_s: float = values.get("site_down_s", DEFAULT_SITE_DOWN_S)
        # The hook also watches the host's file and shell tools and denies writes to the
        # guard's own files (config, host settings, state, log, venv).
        self.protect_self: bool = values.get("protect_self", True)
        # Tags the guard requests per VPG in any 60 s; past it a call that needs a new tag is
        # denied (a joined or reused tag is not counted). None: no bound.
        self.max_tags_per_minute: int | None = values.get(
            "max_tags_per_minute", DEFAULT_MAX_TAGS_PER_MINUTE
        )


class UpstreamSettings:
    """One VM MCP server behind the gateway: a stdio command or a streamable-HTTP URL."""

    __slots__ = (
        "command",
        "env",
        "group",
        "headers",
        "log_path",
        "name",
        "timeout_s",
        "url",
        "user",
        "workdir",
    )

    def __init__(
        self,
        name: str,
        *,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 60.0,
        user: str | None = None,
        group: str | None = None,
        workdir: str | None = None,
        log_path: str | None = None,
    ) -> None:
        self.name = name
        # upstreams.NAME.log: a stdio server's stderr, redacted (default: under state_dir)
        self.log_path = log_path
        self.command = command
        self.env = env or {}
        self.url = url
        self.headers = headers or {}
        self.timeout_s = timeout_s
        # A stdio server's own identity (names or numeric ids) and private directory;
        # None: the gateway's user, a fresh directory per start (gateway/confine.py).
        self.user = user
        self.group = group
        self.workdir = workdir

    def __repr__(self) -> str:
        # env and headers hold credentials: never in a repr, a log or an error
        where = self.url if self.url is not None else (self.command or ["?"])[0]
        return f"UpstreamSettings({self.name!r}, {where!r})"


class GatewaySettings:
    """The gateway's own settings: who may call it, TLS, limits."""

    __slots__ = (
        "allow_insecure_bind",
        "body_timeout_s",
        "clients",
        "elicit_timeout_s",
        "header_timeout_s",
        "idle_timeout_s",
        "limits",
        "max_body_bytes",
        "max_connections",
        "max_connections_per_source",
        "metrics_clients",
        "tls_cert",
        "tls_key",
    )

    def __init__(self, **values: Any) -> None:
        # client name -> SHA-256 hex digest of its bearer token
        self.clients: dict[str, str] = values.get("clients", {})
        self.tls_cert: str | None = values.get("tls_cert")
        self.tls_key: str | None = values.get("tls_key")
        self.allow_insecure_bind: bool = values.get("allow_insecure_bind", False)
        self.max_body_bytes: int = values.get("max_body_bytes", 1_000_000)
        self.elicit_timeout_s: float = values.get("elicit_timeout_s", 120.0)
        # the listener's bounds (gateway/listener.py)
        self.header_timeout_s: float = values.get("header_timeout_s", 10.0)
        self.body_timeout_s: float = values.get("body_timeout_s", 20.0)
        self.idle_timeout_s: float = values.get("idle_timeout_s", 15.0)
        self.max_connections: int = values.get("max_connections", 4096)
        self.max_connections_per_source: int = values.get("max_connections_per_source", 128)
        # name -> token digest: may read /metrics and /healthz's details
        self.metrics_clients: dict[str, str] = values.get("metrics_clients", {})
        self.limits: LimitsSettings = values.get("limits") or LimitsSettings()


class LimitsSettings:
    """``gateway.limits``: what one token, and all tokens, may hold (gateway.limits)."""

    __slots__ = (
        "argument_bytes",
        "argument_bytes_per_token",
        "calls_per_token",
        "handshake_s",
        "idle_s",
        "retry_after_s",
        "sessions",
        "sessions_per_token",
    )

    def __init__(self, **values: Any) -> None:
        self.sessions_per_token: int = values.get("sessions_per_token", 64)
        self.sessions: int = values.get("sessions", 1024)
        self.calls_per_token: int = values.get("calls_per_token", 32)
        self.argument_bytes_per_token: int = values.get("argument_bytes_per_token", 8_000_000)
        self.argument_bytes: int = values.get("argument_bytes", 64_000_000)
        # a session that does nothing past initialize this long is ended
        self.handshake_s: float = values.get("handshake_s", 30.0)
        # a session with no request in flight this long is ended (the SDK's idle timeout)
        self.idle_s: float = values.get("idle_s", 1800.0)
        # what Retry-After says past the calls and bytes caps
        self.retry_after_s: int = values.get("retry_after_s", 5)


class LogAnchorSettings:
    """``log_anchor``: the decision log's head, signed and kept outside the log
    (core.log_anchor): every ``every_lines`` lines or ``every_s`` seconds, whichever
    comes first; ``path`` is the anchor file (default: under ``state_dir``)."""

    __slots__ = ("every_lines", "every_s", "path")

    def __init__(
        self, every_lines: int = 100, every_s: float = 60.0, path: str | None = None
    ) -> None:
        self.every_lines = every_lines
        self.every_s = every_s
        self.path = path


class ApprovalsSettings:
    """Who may approve a prompt-row call, on which channels, and for how long it waits."""

    __slots__ = (
        "agent_users",
        "approver_groups",
        "approver_users",
        "expires_s",
        "max_open_per_principal",
        "notify_secret_source",
        "notify_timeout_s",
        "notify_url",
        "page_url",
        "socket_max_age_s",
        "socket_max_ops",
        "trust_client_answers",
        "wait_s",
        "web_approvers",
    )

    def __init__(self, **values: Any) -> None:
        # unix users and groups who may approve on the approvals socket (SO_PEERCRED)
        self.approver_users: tuple[str, ...] = values.get("approver_users", ())
        self.approver_groups: tuple[str, ...] = values.get("approver_groups", ())
        # unix users that run agents: refused as approvers even if a group lists them
        self.agent_users: tuple[str, ...] = values.get("agent_users", ())
        # approver logins of the approvals page: name -> scrypt hash (`approvals hash-password`)
        self.web_approvers: dict[str, str] = values.get("web_approvers", {})
        self.wait_s: float = values.get("wait_s", 120.0)
        self.expires_s: float = values.get("expires_s", 600.0)
        # Open requests one principal may hold; past it a new call is refused at once.
        self.max_open_per_principal: int = values.get("max_open_per_principal", 20)
        # Form elicitation answered by the agent's own client counts as approval: only
        # where the agent's user is the approver (stdio, single user); never with tokens.
        self.trust_client_answers: bool = values.get("trust_client_answers", False)
        # The approvals page as a person reaches it, for links in notifications and URL
        # elicitation; None: the page's own listen address.
        self.page_url: str | None = values.get("page_url")
        self.notify_url: str | None = values.get("notify_url")
        self.notify_secret_source: tuple[str, str] | None = values.get("notify_secret_source")
        self.notify_timeout_s: float = values.get("notify_timeout_s", 5.0)
        # An approvals-socket connection is closed after this many requests or seconds.
        self.socket_max_ops: int = values.get("socket_max_ops", 100)
        self.socket_max_age_s: float = values.get("socket_max_age_s", 60.0)

    def notify_secret(self, env: Mapping[str, str] | None = None) -> str | None:
        """The webhook's HMAC key, or None when no notification is configured."""
        if self.notify_secret_source is None:
            return None
        kind, value = self.notify_secret_source
        if kind == "env":
            found = (os.environ if env is None else env).get(value, "")
            if not found:
                msg = f"approvals.notify.secret_env names {value}, which is empty or unset"
                raise ConfigError(msg)
            return found
        return read_secret_file(value)

    def __repr__(self) -> str:
        return f"ApprovalsSettings(users={self.approver_users!r}, groups={self.approver_groups!r})"


class StateRedisSettings:
    """How the guard authenticates to the Redis of ``state.url`` (the password's source only)."""

    __slots__ = ("allow_unauthenticated", "ca_file", "password_source")

    def __init__(
        self,
        *,
        password_source: tuple[str, str] | None = None,
        allow_unauthenticated: bool = False,
        ca_file: str | None = None,
    ) -> None:
        self.password_source = password_source  # ("env", NAME) | ("file", PATH)
        self.allow_unauthenticated = allow_unauthenticated
        self.ca_file = ca_file  # rediss://: the CA bundle that verifies the server

    def connection_url(self, url: str, env: Mapping[str, str] | None = None) -> str:
        """``url`` with the password and CA bundle added to its query (never logged:
        messages show ``redis_conn.redacted_url``, which drops the query)."""
        from urllib.parse import urlencode

        extra: dict[str, str] = {}
        if self.password_source is not None:
            kind, value = self.password_source
            if kind == "env":
                found = (os.environ if env is None else env).get(value, "")
                if not found:
                    msg = f"state.password_env names {value}, which is empty or unset"
                    raise ConfigError(msg)
                extra["password"] = found
            else:
                extra["password"] = read_secret_file(value)
        if self.ca_file is not None:
            extra["ssl_ca_certs"] = self.ca_file
        if not extra:
            return url
        return f"{url}{'&' if '?' in url else '?'}{urlencode(extra)}"
