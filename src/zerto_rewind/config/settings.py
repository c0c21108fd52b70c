"""The zerto-rewind settings types, where the config lives, and secret resolution.

The hook imports this module on every tool call, read-only ones included, so it
imports nothing heavy: plain classes instead of dataclasses, the C JSON scanner
instead of :mod:`json`, and ``re`` only when a ``vm_arg`` pattern must be checked.
Reading and validating the file is :mod:`.loader` and :mod:`.parser`.

Environment (precedence: variable > config file > default):

``ZERTO_REWIND_CONFIG``       the config file
                              (default ``$XDG_CONFIG_HOME/zerto-rewind/config.json``)
``ZERTO_HOOK_UNKNOWN``        unlisted tools: ``prompt`` | ``allow`` | ``deny``
``ZERTO_HOOK_GUARD_TIMEOUT``  the guard's hard budget in seconds (default 150)
``ZERTO_HOOK_LOG``            the decision log (default ``~/.zerto-guard-hook.log``)
``ZERTO_REWIND_STATE_DIR``    token cache, pending tags, locks
                              (default ``$XDG_STATE_HOME/zerto-rewind``)
"""

from __future__ import annotations

import os
import stat

from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "ApprovalsSettings",
    "CatalogSettings",
    "GatewaySettings",
    "GuardSettings",
    "LogAnchorSettings",
    "ResolverSpec",
    "Settings",
    "StateRedisSettings",
    "ToolSpec",
    "UpstreamSettings",
    "VmMap",
    "VmPath",
    "ZvmSettings",
    "config_path",
    "default_log_path",
    "home_dir",
    "validate_patterns",
]

UNKNOWN_CHOICES = ("prompt", "allow", "deny")
ON_PENDING_CHOICES = ("deny", "prompt", "defer")
PROMPT_AS_CHOICES = ("ask", "deny")
PROMPT_VIA_CHOICES = ("host", "approvals")
# Which ZVM takes a VPG's tag: its protected site's, or any that lists it (UNCONFIRMED
# that Zerto accepts a tag from the recovery site's ZVM; docs/configuration.md).
TAG_VIA_CHOICES = ("protected", "any")
# Which site's ZVM takes a failover test, failover or restore (several ZVMs): UNCONFIRMED.
RECOVERY_VIA_CHOICES = ("recovery", "protected")
# The site name of the single ``zvm`` key: a one-site estate.
DEFAULT_SITE = "default"
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


class ZvmSettings:
    """How to reach and authenticate to the ZVM."""

    __slots__ = (
        "_env",
        "_secret_origin",
        "_secret_source",
        "ca_bundle",
        "client_id",
        "config_key",
        "connect_timeout_s",
        "grant",
        "read_timeout_s",
        "scope",
        "site",
        "url",
        "username",
        "verify_tls",
    )

    def __init__(
        self,
        *,
        url: str,
        grant: str,
        client_id: str,
        username: str | None,
        secret_source: tuple[str, str],
        ca_bundle: str | None = None,
        verify_tls: bool = True,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        scope: str | None = None,
        secret_origin: tuple[str | None, str | None] = (None, None),
        env: Mapping[str, str] | None = None,
        site: str = DEFAULT_SITE,
        config_key: str = "zvm",
    ) -> None:
        self.site = site  # the estate's name for this ZVM's site (zvms key; "default" for zvm)
        self.config_key = config_key  # where the config sets it: zvm or zvms.SITE (for hints)
        self._secret_origin = secret_origin  # (config file, key) for messages
        self._env = env  # the environment the settings were loaded from
        self.url = url
        self.grant = grant
        self.client_id = client_id
        self.username = username
        self._secret_source = secret_source
        self.ca_bundle = ca_bundle
        self.verify_tls = verify_tls
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.scope = scope

    @property
    def secret_hint(self) -> str:
        """Where the secret comes from, for messages (never the secret itself)."""
        kind, value = self._secret_source
        return {"env": f"${value}", "file": value}.get(kind, "the config file")

    @property
    def secret_kind(self) -> str:
        """Where the secret is kept: ``env``, ``file`` (then :attr:`secret_hint` is the path)
        or ``inline`` (in the config file itself)."""
        return self._secret_source[0]

    def secret(self, env: Mapping[str, str] | None = None) -> str:
        """The client secret or password; ConfigError if it cannot be found."""
        kind, value = self._secret_source
        if kind == "inline":
            return value
        path, key = self._secret_origin
        if kind == "env":
            source = env if env is not None else self._env if self._env is not None else os.environ
            found = source.get(value, "")
            if not found:
                msg = f"names environment variable {value}, which is empty or unset"
                raise ConfigError(msg, path=path, key=key)
            return found
        try:
            return _read_secret_file(value)
        except ConfigError as exc:
            raise ConfigError(exc.detail, path=path, key=key) from None

    def __repr__(self) -> str:  # never print the secret
        return (
            f"ZvmSettings(site={self.site!r}, url={self.url!r}, grant={self.grant!r}, "
            f"client_id={self.client_id!r})"
        )


class VmPath:
    """One place to look for the VM name in ``tool_input``: a dotted path, maybe a regex."""

    __slots__ = ("parts", "path", "pattern")

    def __init__(self, path: str, pattern: str | None = None) -> None:
        self.path = path
        self.parts = tuple(path.split("."))
        self.pattern = pattern


class VmMap:
    """Turns what a tool calls a VM into what Zerto calls it."""

    __slots__ = ("aliases", "strip_domain")

    def __init__(self, aliases: dict[str, str], strip_domain: bool | tuple[str, ...]) -> None:
        self.aliases = aliases  # keys exactly as configured: matching never folds case
        self.strip_domain = strip_domain


TOOL_DECISIONS = ("prompt", "deny", "allow")


class ToolSpec:
    """A mutating tool: where its VM names are, how to map them, what else it touches.

    ``vpgs`` are VPG names tagged before every call (a host-level tool changes
    many VMs and names none); ``decision`` is the per-tool policy when nothing
    can be checkpointed (no ``vm_arg`` and no ``vpgs``, or no VM in the call).
    ``host_paths`` are argument paths that name a file or directory on the machine
    where the VM server runs: a call that gives one needs a person, checkpoint or not.
    """

    __slots__ = ("decision", "host_paths", "name", "vm_arg", "vm_map", "vpgs")

    def __init__(
        self,
        name: str,
        vm_arg: tuple[VmPath, ...],
        vm_map: VmMap | None,
        *,
        vpgs: tuple[str, ...] = (),
        decision: str | None = None,
        host_paths: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.vm_arg = vm_arg
        self.vm_map = vm_map
        self.vpgs = vpgs
        self.decision = decision
        self.host_paths = host_paths


# A Zerto VM identifier (``<server id>.vm-42``, documented as ``serverid.moref``): the
# vCenter and the moref, compared whole, since a moref is unique only within one vCenter.
# UNCONFIRMED on real ZVMs, so ``catalog.resolvers.*.zerto_pattern`` can replace it.
DEFAULT_ZERTO_ID_PATTERN = r"^(?P<vcenter>.+)\.(?P<id>vm-[0-9]+)$"
ZERTO_ID_FIELDS = ("vm_identifier", "instance_identifier")


class ResolverSpec:
    """How the gateway asks one VM server which VM a name means (the identity check).

    ``tool`` (read-only) is called with ``{arg: <the call's VM argument>}``; the
    value at ``id_path`` of its JSON result must equal group ``id`` of
    ``zerto_pattern`` applied to Zerto's ``zerto_field`` for that VM. For a
    ``vm_identifier`` the vCenter is compared too: group ``vcenter`` of the pattern
    against the value at ``vcenter_path`` of the answer, else the fixed ``vcenter``.
    """

    __slots__ = (
        "arg", "id_path", "server", "timeout_s", "tool", "vcenter", "vcenter_path",
        "zerto_field", "zerto_pattern",
    )  # fmt: skip

    def __init__(
        self,
        server: str,
        tool: str,
        arg: str,
        id_path: str,
        *,
        zerto_field: str = "vm_identifier",
        zerto_pattern: str = DEFAULT_ZERTO_ID_PATTERN,
        timeout_s: float = 10.0,
        vcenter: str | None = None,
        vcenter_path: str | None = None,
    ) -> None:
        self.server = server
        self.vcenter = vcenter
        self.vcenter_path = vcenter_path
        self.tool = tool
        self.arg = arg
        self.id_path = id_path
        self.zerto_field = zerto_field
        self.zerto_pattern = zerto_pattern
        self.timeout_s = timeout_s


class CatalogSettings:
    """The seed's catalog: read-only tools, mutating tools, and the unlisted rule."""

    __slots__ = (
        "from_annotations",
        "pins",
        "read_only",
        "resolvers",
        "tools",
        "unknown",
        "unknown_source",
        "vm_map",
    )

    def __init__(
        self,
        read_only: tuple[str, ...],
        tools: dict[str, ToolSpec],
        vm_map: VmMap | None,
        unknown: str,
        unknown_source: str,
        *,
        from_annotations: bool = False,
        resolvers: dict[str, ResolverSpec] | None = None,
        pins: dict[str, str] | None = None,
    ) -> None:
        self.read_only = read_only
        self.tools = tools
        self.vm_map = vm_map
        self.unknown = unknown
        self.unknown_source = unknown_source
        # catalog.from_annotations: a door that sees the live tools/list (the gateway) may
        # classify tools the catalog does not list with the scan's rules; explicit entries win.
        self.from_annotations = from_annotations
        # catalog.resolvers: server name -> the identity check the gateway runs before it
        # forwards a checkpointed call to that server (docs/gateway.md).
        self.resolvers = resolvers or {}
        # catalog.pins: host tool name -> "sha256:..." of the tool as reviewed (catalog scan);
        # the gateway treats a live tool of a pinned server that is new or changed as unlisted.
        self.pins: dict[str, str] = pins or {}


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
        "handshake_timeout_s",
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
        self.handshake_timeout_s: float = values.get("handshake_timeout_s", 10.0)
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
        return _read_secret_file(value)

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
                extra["password"] = _read_secret_file(value)
        if self.ca_file is not None:
            extra["ssl_ca_certs"] = self.ca_file
        if not extra:
            return url
        return f"{url}{'&' if '?' in url else '?'}{urlencode(extra)}"


class Settings:
    """Everything zerto-rewind is configured with, validated."""

    __slots__ = (
        "allow_live_recovery",
        "approvals",
        "catalog",
        "gateway",
        "guard",
        "log_anchor",
        "log_path",
        "path",
        "recovery_via",
        "state_dir",
        "state_redis",
        "state_url",
        "upstreams",
        "zvm",
        "zvms",
    )

    def __init__(
        self,
        *,
        path: str,
        zvm: ZvmSettings,
        catalog: CatalogSettings,
        guard: GuardSettings,
        allow_live_recovery: bool,
        state_dir: str,
        log_path: str,
        upstreams: dict[str, UpstreamSettings] | None = None,
        gateway: GatewaySettings | None = None,
        state_url: str | None = None,
        approvals: ApprovalsSettings | None = None,
        zvms: dict[str, ZvmSettings] | None = None,
        recovery_via: str = "recovery",
        log_anchor: LogAnchorSettings | None = None,
        state_redis: StateRedisSettings | None = None,
    ) -> None:
        self.path = path
        self.approvals = approvals or ApprovalsSettings()
        # The first site's ZVM, for callers that know one ZVM; the estate is ``zvms``.
        self.zvm = zvm
        self.zvms: dict[str, ZvmSettings] = zvms or {zvm.site: zvm}
        self.catalog = catalog
        self.guard = guard
        self.allow_live_recovery = allow_live_recovery
        # With several ZVMs: the site whose ZVM runs recovery operations (recovery.via).
        self.recovery_via = recovery_via
        self.state_dir = state_dir
        self.log_path = log_path
        self.log_anchor = log_anchor or LogAnchorSettings()
        self.upstreams = upstreams or {}
        self.gateway = gateway or GatewaySettings()
        self.state_url = state_url  # redis://… when gateway replicas share state
        self.state_redis = state_redis  # its password's source and CA bundle

    def state_connection_url(self, env: Mapping[str, str] | None = None) -> str | None:
        """``state_url`` with its credentials (state.password_env/_file); ConfigError if
        they cannot be read. For connecting only: never shown, never logged."""
        if self.state_url is None or self.state_redis is None:
            return self.state_url
        return self.state_redis.connection_url(self.state_url, env)


# --------------------------------------------------------------------------- loading


def config_path(env: Mapping[str, str] | None = None) -> str:
    """The config file named by ``ZERTO_REWIND_CONFIG``, else the XDG default."""
    env = os.environ if env is None else env
    named = env.get("ZERTO_REWIND_CONFIG", "").strip()
    if named:
        return os.path.abspath(os.path.expanduser(named))
    base = env.get("XDG_CONFIG_HOME") or os.path.join(home_dir(env), ".config")
    return os.path.join(base, "zerto-rewind", "config.json")


LEGACY_LOG_NAME = ".zerto-guard-hook.log"  # the default log before it moved to the XDG state dir


def legacy_log_path(env: Mapping[str, str]) -> str:
    """``~/.zerto-guard-hook.log``: where the decision log was kept by default before."""
    return os.path.join(home_dir(env), LEGACY_LOG_NAME)


def default_log_path(env: Mapping[str, str] | None = None) -> str:
    """``ZERTO_HOOK_LOG``, else ``$XDG_STATE_HOME/zerto-rewind/decisions.log``
    (``~/.local/state/…``); usable without a valid config.

    A log at the old default, ``~/.zerto-guard-hook.log``, is still the log while it
    exists: the hook keeps appending to it and ``log`` reads it, so an existing
    install keeps one file and one chain. Moving that file to the new path moves
    the log.
    """
    env = os.environ if env is None else env
    named = env.get("ZERTO_HOOK_LOG", "").strip()
    if named:
        return os.path.abspath(os.path.expanduser(named))
    legacy = legacy_log_path(env)
    if os.path.isfile(legacy):
        return legacy
    base = env.get("XDG_STATE_HOME") or os.path.join(home_dir(env), ".local", "state")
    return os.path.join(base, "zerto-rewind", "decisions.log")


def validate_patterns(settings: Settings) -> None:
    """Compile every ``vm_arg`` regex (imports ``re``); ConfigError on the first bad one."""
    import re

    for spec in settings.catalog.tools.values():
        for vm_path in spec.vm_arg:
            if vm_path.pattern is None:
                continue
            key = f"tools.{spec.name}.vm_arg.pattern"
            try:
                compiled = re.compile(vm_path.pattern)
            except re.error as exc:
                msg = f"not a valid regular expression: {exc}"
                raise ConfigError(msg, path=settings.path, key=key) from None
            if "vm" not in compiled.groupindex:
                msg = "the pattern needs a named group (?P<vm>...) that captures the VM name"
                raise ConfigError(msg, path=settings.path, key=key)


def home_dir(env: Mapping[str, str]) -> str:
    """``$HOME``, else the user's home directory."""
    return env.get("HOME") or os.path.expanduser("~")


def _read_secret_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            value = fh.read().strip()
    except OSError as exc:
        msg = f"cannot read secret file {path}: {exc.strerror}"
        raise ConfigError(msg) from None
    if mode & 0o077:
        octal = f"{stat.S_IMODE(mode):04o}"
        msg = f"secret file {path} is readable by others (mode {octal}); run chmod 600 {path}"
        raise ConfigError(msg)
    if not value:
        msg = f"secret file {path} is empty"
        raise ConfigError(msg)
    return value
