"""The zerto-rewind settings types, where the config lives, and secret resolution.

The hook imports this module on every tool call, read-only ones included, so it
imports nothing heavy: plain classes and :class:`~.record.Record` instead of
dataclasses, the C JSON scanner instead of :mod:`json`, and ``re`` only when a
``vm_arg`` pattern must be checked. The catalog's types are in :mod:`.catalog_settings`,
the other sections' in :mod:`.sections`; both are re-exported here. Reading and
validating the file is :mod:`.loader` and :mod:`.parser`.

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

from ..errors import ConfigError
from .catalog_settings import (
    DEFAULT_ZERTO_ID_PATTERN,
    TOOL_DECISIONS,
    ZERTO_ID_FIELDS,
    CatalogSettings,
    ResolverSpec,
    ToolSpec,
    VmMap,
    VmPath,
)
from .sections import (
    DEFAULT_GUARD_TIMEOUT_S,
    DEFAULT_MAX_TAGS_PER_MINUTE,
    DEFAULT_SITE_CADENCE_S,
    DEFAULT_SITE_DOWN_S,
    ON_PENDING_CHOICES,
    PROMPT_AS_CHOICES,
    PROMPT_VIA_CHOICES,
    SITE_KINDS,
    TAG_VIA_CHOICES,
    UNKNOWN_CHOICES,
    ApprovalsSettings,
    GatewaySettings,
    GuardSettings,
    LimitsSettings,
    LogAnchorSettings,
    StateRedisSettings,
    UpstreamSettings,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_GUARD_TIMEOUT_S",
    "DEFAULT_MAX_TAGS_PER_MINUTE",
    "DEFAULT_SITE",
    "DEFAULT_SITE_CADENCE_S",
    "DEFAULT_SITE_DOWN_S",
    "DEFAULT_ZERTO_ID_PATTERN",
    "ON_PENDING_CHOICES",
    "PROMPT_AS_CHOICES",
    "PROMPT_VIA_CHOICES",
    "RECOVERY_VIA_CHOICES",
    "SITE_KINDS",
    "TAG_VIA_CHOICES",
    "TOOL_DECISIONS",
    "UNKNOWN_CHOICES",
    "ZERTO_ID_FIELDS",
    "ApprovalsSettings",
    "CatalogSettings",
    "GatewaySettings",
    "GuardSettings",
    "LimitsSettings",
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

# Which site's ZVM takes a failover test, failover or restore (several ZVMs): UNCONFIRMED.
RECOVERY_VIA_CHOICES = ("recovery", "protected")
# The site name of the single ``zvm`` key: a one-site estate.
DEFAULT_SITE = "default"


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
        from .secret_file import read_secret_file  # a file's secret: the mutating path only

        try:
            return read_secret_file(value)
        except ConfigError as exc:
            raise ConfigError(exc.detail, path=path, key=key) from None

    def __repr__(self) -> str:  # never print the secret
        return (
            f"ZvmSettings(site={self.site!r}, url={self.url!r}, grant={self.grant!r}, "
            f"client_id={self.client_id!r})"
        )


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
