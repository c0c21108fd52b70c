"""The settings of the sections past the catalog: guard, upstreams, gateway, approvals, state.

Each section is a frozen :class:`~.record.Record`: one line per field, its type and its
default; a misspelt keyword fails mypy and raises TypeError. The hook builds the guard's
on every call, so nothing here imports ``dataclasses`` or ``typing``.
"""

from __future__ import annotations

from .record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

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
# The gateway listener's HTTP/1.1 parser (gateway/http_impl.py); auto: httptools when installed.
HTTP_IMPL_CHOICES = ("auto", "h11", "httptools")
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


class GuardSettings(Record):
    """The guard's policy knobs (docs/configuration.md#guard)."""

    timeout_s: float = DEFAULT_GUARD_TIMEOUT_S
    on_pending: str = "deny"
    prompt_as: str = "ask"
    # host: a hook's prompt is the host's own (Claude Code's permission prompt);
    # approvals: it becomes an approval request a person answers elsewhere (headless runs).
    prompt_via: str = "host"
    cadence_s: dict[str, float] = {}
    # Every site kind's cadence: the parser lays the file's over DEFAULT_SITE_CADENCE_S.
    site_cadence_s: dict[str, float] = DEFAULT_SITE_CADENCE_S
    site_types: dict[int, str] = {}
    landing_allowance_s: float = 3.0
    overdue_factor: float = 3.0
    overdue_min_s: float = 60.0
    vm_cache_ttl_s: float = 60.0
    tag_prefix: str = "zerto-rewind"
    # protected: a VPG is tagged on its protected site's ZVM; any: on any ZVM that lists
    # it, the protected site's first (whether Zerto takes that is UNCONFIRMED).
    tag_via: str = "protected"
    # How long a ZVM that failed to answer is treated as down without asking it again,
    # so a hanging site costs its timeout once, not on every call.
    site_down_s: float = DEFAULT_SITE_DOWN_S
    # The hook also watches the host's file and shell tools and denies writes to the
    # guard's own files (config, host settings, state, log, venv).
    protect_self: bool = True
    # Tags the guard requests per VPG in any 60 s; past it a call that needs a new tag is
    # denied (a joined or reused tag is not counted). None: no bound.
    max_tags_per_minute: int | None = DEFAULT_MAX_TAGS_PER_MINUTE
    # A mutating call whose last identical call's outcome is unknown (sent, no answer) within
    # this many seconds is asked of a person instead of sent again (core.execute_once).
    unknown_outcome_window_s: float = 600.0


class UpstreamSettings(Record):
    """One VM MCP server behind the gateway: a stdio command or a streamable-HTTP URL."""

    name: str
    # upstreams.NAME.log: a stdio server's stderr, redacted (default: under state_dir)
    log_path: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = {}
    url: str | None = None
    headers: dict[str, str] = {}
    timeout_s: float = 60.0
    # A stdio server's own identity (names or numeric ids) and private directory;
    # None: the gateway's user, a fresh directory per start (gateway/confine.py).
    user: str | None = None
    group: str | None = None
    workdir: str | None = None

    def __repr__(self) -> str:
        # env and headers hold credentials: never in a repr, a log or an error
        where = self.url if self.url is not None else (self.command or ["?"])[0]
        return f"UpstreamSettings({self.name!r}, {where!r})"


class LimitsSettings(Record):
    """``gateway.limits``: what one token, and all tokens, may hold (gateway.limits)."""

    sessions_per_token: int = 64
    sessions: int = 1024
    calls_per_token: int = 32
    argument_bytes_per_token: int = 8_000_000
    argument_bytes: int = 64_000_000
    # bytes of request bodies one token may send a second, on average (a token bucket of a
    # second's worth; one body of any size passes when it has any room)
    argument_bytes_per_s_per_token: int = 2_000_000
    # a session that does nothing past initialize this long is ended
    handshake_s: float = 30.0
    # a session with no request in flight this long is ended (the SDK's idle timeout)
    idle_s: float = 1800.0
    # what Retry-After says past the calls and bytes caps
    retry_after_s: int = 5


class GatewaySettings(Record):
    """The gateway's own settings: who may call it, TLS, limits."""

    # client name -> SHA-256 hex digest of its bearer token
    clients: dict[str, str] = {}
    tls_cert: str | None = None
    tls_key: str | None = None
    allow_insecure_bind: bool = False
    fast_lane: bool = True
    http_impl: str = "auto"
    max_body_bytes: int = 1_000_000
    elicit_timeout_s: float = 120.0
    # the listener's bounds (gateway/listener.py)
    header_timeout_s: float = 10.0
    body_timeout_s: float = 20.0
    idle_timeout_s: float = 15.0
    handshake_timeout_s: float = 10.0
    max_connections: int = 4096
    max_connections_per_source: int = 128
    # name -> token digest: may read /metrics and /healthz's details
    metrics_clients: dict[str, str] = {}
    limits: LimitsSettings = LimitsSettings()


class LogAnchorSettings(Record):
    """``log_anchor``: the decision log's head, signed and kept outside the log
    (core.log_anchor): every ``every_lines`` lines or ``every_s`` seconds, whichever
    comes first; ``path`` is the anchor file (default: under ``state_dir``)."""

    every_lines: int = 100
    every_s: float = 60.0
    path: str | None = None


class ApprovalsSettings(Record):
    """Who may approve a prompt-row call, on which channels, and for how long it waits."""

    # unix users and groups who may approve on the approvals socket (SO_PEERCRED)
    approver_users: tuple[str, ...] = ()
    approver_groups: tuple[str, ...] = ()
    # unix users that run agents: refused as approvers even if a group lists them
    agent_users: tuple[str, ...] = ()
    # approver logins of the approvals page: name -> scrypt hash (`approvals hash-password`)
    web_approvers: dict[str, str] = {}
    wait_s: float = 120.0
    expires_s: float = 600.0
    # Open requests one principal may hold; past it a new call is refused at once.
    max_open_per_principal: int = 20
    # Form elicitation answered by the agent's own client counts as approval: only
    # where the agent's user is the approver (stdio, single user); never with tokens.
    trust_client_answers: bool = False
    # The approvals page as a person reaches it, for links in notifications and URL
    # elicitation; None: the page's own listen address.
    page_url: str | None = None
    notify_url: str | None = None
    notify_secret_source: tuple[str, str] | None = None
    notify_timeout_s: float = 5.0
    # An approvals-socket connection is closed after this many requests or seconds.
    socket_max_ops: int = 100
    socket_max_age_s: float = 60.0

    def notify_secret(self, env: Mapping[str, str] | None = None) -> str | None:
        """The webhook's HMAC key, or None when no notification is configured."""
        if self.notify_secret_source is None:
            return None
        from .secret_file import read_secret_source  # off the hook's read-only path

        return read_secret_source(self.notify_secret_source, "approvals.notify.secret_env", env)

    def __repr__(self) -> str:
        return f"ApprovalsSettings(users={self.approver_users!r}, groups={self.approver_groups!r})"


class StateRedisSettings(Record):
    """How the guard authenticates to the Redis of ``state.url`` (the password's source only)."""

    password_source: tuple[str, str] | None = None  # ("env", NAME) | ("file", PATH)
    allow_unauthenticated: bool = False
    ca_file: str | None = None  # rediss://: the CA bundle that verifies the server

    def connection_url(self, url: str, env: Mapping[str, str] | None = None) -> str:
        """``url`` with the password and CA bundle added to its query (never logged:
        messages show ``redis_conn.redacted_url``, which drops the query)."""
        from urllib.parse import urlencode

        from .secret_file import read_secret_source

        extra: dict[str, str] = {}
        if self.password_source is not None:
            extra["password"] = read_secret_source(self.password_source, "state.password_env", env)
        if self.ca_file is not None:
            extra["ssl_ca_certs"] = self.ca_file
        if not extra:
            return url
        return f"{url}{'&' if '?' in url else '?'}{urlencode(extra)}"
