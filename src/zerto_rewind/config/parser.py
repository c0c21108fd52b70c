"""Validation of the raw config JSON into :mod:`zerto_rewind.config` settings.

Every error names the file, the dotted key and what is wrong. Like config.py it
imports nothing heavy: the hook runs it on every call.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from .settings import (
    DEFAULT_SITE,
    ON_PENDING_CHOICES,
    PROMPT_AS_CHOICES,
    PROMPT_VIA_CHOICES,
    RECOVERY_VIA_CHOICES,
    SITE_KINDS,
    TAG_VIA_CHOICES,
    TOOL_DECISIONS,
    UNKNOWN_CHOICES,
    ZERTO_ID_FIELDS,
    ApprovalsSettings,
    CatalogSettings,
    GatewaySettings,
    GuardSettings,
    LimitsSettings,
    LogAnchorSettings,
    ResolverSpec,
    Settings,
    StateRedisSettings,
    ToolSpec,
    UpstreamSettings,
    VmMap,
    VmPath,
    ZvmSettings,
    default_log_path,
    home_dir,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NoReturn

__all__ = ["Parser"]


class Parser:
    """Validates the raw JSON; every error names the file and the dotted key."""

    def __init__(self, path: str, base_dir: str) -> None:
        self.path = path
        self.base_dir = base_dir

    def fail(self, key: str, message: str) -> NoReturn:
        raise ConfigError(message, path=self.path, key=key)

    # ---- scalar helpers

    def obj(self, value: Any, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"must be a JSON object, not {_kind(value)}")
        for name in value:
            if name not in allowed and not name.startswith(("_", "$")):
                self.fail(f"{key}.{name}" if key else name, _unknown_key(name, allowed))
        return value

    def string(self, value: Any, key: str, *, choices: tuple[str, ...] = ()) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"must be a non-empty string, not {_kind(value)}")
        if choices and value not in choices:
            self.fail(key, f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    def number(
        self, value: Any, key: str, *, minimum: float = 0.0, inclusive: bool = False
    ) -> float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or value != value or value in (float("inf"), float("-inf")):
            self.fail(key, f"must be a finite number, not {value!r}")
        if value < minimum or (value == minimum and not inclusive):
            bound = "at least" if inclusive else "greater than"
            self.fail(key, f"must be a number {bound} {minimum:g}, not {value!r}")
        try:
            return float(value)
        except OverflowError:
            self.fail(key, "is too large a number")

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {value!r}")
        return value

    def file_path(self, value: Any, key: str) -> str:
        text = os.path.expanduser(self.string(value, key))
        return text if os.path.isabs(text) else os.path.normpath(os.path.join(self.base_dir, text))

    # ---- sections

    def settings(self, raw: Any, env: Mapping[str, str], *, loose_permissions: bool) -> Settings:
        top = self.obj(
            raw,
            "",
            (
                "zvm",
                "zvms",
                "read_only_tools",
                "tools",
                "vm_map",
                "unknown_tools",
                "catalog",
                "guard",
                "recovery",
                "state_dir",
                "log",
                "log_anchor",
                "upstreams",
                "gateway",
                "state",
                "approvals",
            ),
        )
        zvms = self.zvms(top, env, loose_permissions=loose_permissions)
        catalog = self.catalog(top, env)
        guard = self.guard(top.get("guard", {}), env)
        recovery = self.obj(top.get("recovery", {}), "recovery", ("allow_live", "via"))
        allow_live = self.boolean(recovery.get("allow_live", False), "recovery.allow_live")
        via = self.string(
            recovery.get("via", "recovery"), "recovery.via", choices=RECOVERY_VIA_CHOICES
        )
        return Settings(
            path=self.path,
            zvm=next(iter(zvms.values())),
            zvms=zvms,
            catalog=catalog,
            guard=guard,
            allow_live_recovery=allow_live,
            recovery_via=via,
            state_dir=self.state_dir(top, env),
            log_path=self.log_path(top, env),
            upstreams=self.upstreams(top.get("upstreams", {}), loose_permissions),
            gateway=self.gateway(top.get("gateway", {})),
            state_url=self.state_url(top.get("state", {})),
            state_redis=self.state_redis(top.get("state", {})),
            approvals=self.approvals(top.get("approvals", {})),
            log_anchor=self.log_anchor(top.get("log_anchor", {})),
        )

    def log_anchor(self, raw: Any) -> LogAnchorSettings:
        spec = self.obj(raw, "log_anchor", ("every_lines", "every_s", "path"))
        lines = spec.get("every_lines", 100)
        if isinstance(lines, bool) or not isinstance(lines, int) or not 1 <= lines <= 1_000_000:
            self.fail("log_anchor.every_lines", f"must be a whole number 1..1000000, not {lines!r}")
        every_s = self.number(
            spec.get("every_s", 60.0), "log_anchor.every_s", minimum=1.0, inclusive=True
        )
        path = self.file_path(spec["path"], "log_anchor.path") if "path" in spec else None
        return LogAnchorSettings(lines, every_s, path)

    # ---- the gateway's sections (absent from a hook's config: nothing to pay there)

    def upstreams(self, raw: Any, loose_permissions: bool) -> dict[str, UpstreamSettings]:
        if not isinstance(raw, dict):
            self.fail("upstreams", f"must be a JSON object of name -> server, not {_kind(raw)}")
        found: dict[str, UpstreamSettings] = {}
        for name, spec in raw.items():
            key = f"upstreams.{name}"
            if not name or not all(ch.isalnum() or ch in "-_" for ch in name):
                self.fail(key, "a server name may hold only letters, digits, - and _")
            spec = self.obj(
                spec,
                key,
                (
                    *("command", "env", "url", "headers", "timeout_s"),
                    *("user", "group", "workdir", "log"),
                ),
            )
            if ("command" in spec) == ("url" in spec):
                self.fail(key, "give exactly one of command (a stdio server) or url (HTTP)")
            secrets = spec.get("env") or spec.get("headers")
            if secrets and loose_permissions:
                self.fail(
                    key,
                    "holds credentials but the config file is readable by others; chmod 600 it",
                )
            timeout = self.number(spec.get("timeout_s", 60.0), f"{key}.timeout_s")
            if "command" in spec:
                command = spec["command"]
                if not isinstance(command, list) or not command:
                    self.fail(f"{key}.command", "must be a non-empty list of strings")
                argv = [self.string(part, f"{key}.command") for part in command]
                env = self.string_map(spec.get("env", {}), f"{key}.env")
                user, group, workdir = self.confinement(spec, key)
                log = self.file_path(spec["log"], f"{key}.log") if "log" in spec else None
                found[name] = UpstreamSettings(
                    name, command=argv, env=env, timeout_s=timeout,
                    user=user, group=group, workdir=workdir, log_path=log,
                )  # fmt: skip
            else:
                for local in ("user", "group", "workdir", "log"):
                    if local in spec:
                        self.fail(f"{key}.{local}", "applies to a stdio server (command) only")
                url = self.string(spec["url"], f"{key}.url")
                if not url.startswith(("https://", "http://")):
                    self.fail(f"{key}.url", "must be an http(s):// URL of the MCP endpoint")
                headers = self.string_map(spec.get("headers", {}), f"{key}.headers")
                found[name] = UpstreamSettings(name, url=url, headers=headers, timeout_s=timeout)
        return found

    def confinement(
        self, spec: dict[str, Any], key: str
    ) -> tuple[str | None, str | None, str | None]:
        """A stdio upstream's user, group and private directory (see gateway/upstream_user.py)."""
        found: dict[str, str | None] = {"user": None, "group": None, "workdir": None}
        for part in ("user", "group"):
            if part in spec:
                value = self.string(spec[part], f"{key}.{part}")
                if value != value.strip() or ":" in value or "/" in value:
                    self.fail(f"{key}.{part}", f"must be a {part} name or a numeric id")
                found[part] = value
        if found["group"] is not None and found["user"] is None:
            self.fail(f"{key}.group", "give user as well: the group alone changes no identity")
        if "workdir" in spec:
            found["workdir"] = self.file_path(spec["workdir"], f"{key}.workdir")
        return found["user"], found["group"], found["workdir"]

    def gateway(self, raw: Any) -> GatewaySettings:
        allowed = (
            "clients",
            "tls_cert",
            "tls_key",
            "allow_insecure_bind",
            "limits",
            "max_body_bytes",
            "elicit_timeout_s",
            *_LISTENER_TIMEOUTS,
            *_LISTENER_CAPS,
            "metrics_clients",
        )
        spec = self.obj(raw, "gateway", allowed)
        values: dict[str, Any] = {}
        clients = self.string_map(spec.get("clients", {}), "gateway.clients")
        for who, digest in clients.items():
            if len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest.lower()):
                self.fail(f"gateway.clients.{who}", "must be the SHA-256 hex digest of a token")
        values["clients"] = {who: digest.lower() for who, digest in clients.items()}
        values.update(self._listener(spec))
        if ("tls_cert" in spec) != ("tls_key" in spec):
            self.fail("gateway.tls_cert", "give both tls_cert and tls_key, or neither")
        if "tls_cert" in spec:
            values["tls_cert"] = self.file_path(spec["tls_cert"], "gateway.tls_cert")
            values["tls_key"] = self.file_path(spec["tls_key"], "gateway.tls_key")
        if "allow_insecure_bind" in spec:
            values["allow_insecure_bind"] = self.boolean(
                spec["allow_insecure_bind"], "gateway.allow_insecure_bind"
            )
        if "max_body_bytes" in spec:
            size = self.number(spec["max_body_bytes"], "gateway.max_body_bytes", minimum=1024.0)
            values["max_body_bytes"] = int(size)
        if "elicit_timeout_s" in spec:
            values["elicit_timeout_s"] = self.number(
                spec["elicit_timeout_s"], "gateway.elicit_timeout_s"
            )
        if "limits" in spec:
            values["limits"] = self.gateway_limits(spec["limits"])
        return GatewaySettings(**values)

    def _listener(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The HTTP listener's bounds and who may read its details (gateway/listener.py)."""
        values: dict[str, Any] = {}
        for key in _LISTENER_TIMEOUTS:
            if key in spec:
                values[key] = self.number(spec[key], f"gateway.{key}", minimum=0.1, inclusive=True)
        for key in _LISTENER_CAPS:
            if key in spec:
                count = self.number(spec[key], f"gateway.{key}", minimum=1.0, inclusive=True)
                values[key] = int(count)
        readers = self.string_map(spec.get("metrics_clients", {}), "gateway.metrics_clients")
        for who, digest in readers.items():
            if len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest.lower()):
                self.fail(
                    f"gateway.metrics_clients.{who}", "must be the SHA-256 hex digest of a token"
                )
        values["metrics_clients"] = {who: digest.lower() for who, digest in readers.items()}
        return values

    def gateway_limits(self, raw: Any) -> LimitsSettings:
        """``gateway.limits``: whole numbers of at least 1; seconds within their bounds."""
        counts = (
            "sessions_per_token", "sessions", "calls_per_token",
            "argument_bytes_per_token", "argument_bytes", "retry_after_s",
        )  # fmt: skip
        spec = self.obj(raw, "gateway.limits", (*counts, "handshake_s", "idle_s"))
        values: dict[str, Any] = {}
        for name in counts:
            if name in spec:
                key = f"gateway.limits.{name}"
                number = self.number(spec[name], key, minimum=1.0, inclusive=True)
                if number != int(number):
                    self.fail(key, f"must be a whole number, not {spec[name]!r}")
                values[name] = int(number)
        # Within a minute: a longer wait lets abandoned sessions fill the gateway again.
        if "handshake_s" in spec:
            values["handshake_s"] = self.number(spec["handshake_s"], "gateway.limits.handshake_s")
            if values["handshake_s"] > 60:
                self.fail("gateway.limits.handshake_s", "must be at most 60 seconds")
        if "idle_s" in spec:
            values["idle_s"] = self.number(spec["idle_s"], "gateway.limits.idle_s")
            if values["idle_s"] > 86400:
                self.fail("gateway.limits.idle_s", "must be at most 86400 seconds (a day)")
        limits = LimitsSettings(**values)
        if limits.sessions_per_token > limits.sessions:
            key = "gateway.limits.sessions_per_token"
            self.fail(key, "must not exceed gateway.limits.sessions")
        if limits.argument_bytes_per_token > limits.argument_bytes:
            self.fail(
                "gateway.limits.argument_bytes_per_token",
                "must not exceed gateway.limits.argument_bytes",
            )
        return limits

    def approvals(self, raw: Any) -> ApprovalsSettings:
        keys = (
            "approvers", "agent_users", "web_approvers", "wait_s", "expires_s",
            "trust_client_answers", "page_url", "notify", "max_open_per_principal",
            "socket_max_ops", "socket_max_age_s",
        )  # fmt: skip
        spec = self.obj(raw, "approvals", keys)
        values: dict[str, Any] = {}
        approvers = self.obj(spec.get("approvers", {}), "approvals.approvers", ("users", "groups"))
        values["approver_users"] = tuple(
            self.user_list(approvers.get("users", []), "approvals.approvers.users")
        )
        values["approver_groups"] = tuple(
            self.user_list(approvers.get("groups", []), "approvals.approvers.groups")
        )
        agents = tuple(self.user_list(spec.get("agent_users", []), "approvals.agent_users"))
        values["agent_users"] = agents
        both = sorted(set(agents) & set(values["approver_users"]))
        if both:
            self.fail(
                "approvals.approvers.users",
                f"{', '.join(both)} also run agents (approvals.agent_users); an agent's "
                "user cannot approve calls",
            )
        web = self.string_map(spec.get("web_approvers", {}), "approvals.web_approvers")
        for who, hashed in web.items():
            if not hashed.startswith("scrypt$") or hashed.count("$") != 5:
                self.fail(
                    f"approvals.web_approvers.{who}",
                    "must be a password hash from `zerto-rewind approvals hash-password`",
                )
        values["web_approvers"] = web
        for name in ("wait_s", "expires_s"):
            if name in spec:
                values[name] = self.number(spec[name], f"approvals.{name}", inclusive=True)
        if "max_open_per_principal" in spec:
            cap = spec["max_open_per_principal"]
            if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= 1000:
                self.fail(
                    "approvals.max_open_per_principal",
                    f"must be a whole number from 1 to 1000, not {cap!r}",
                )
            values["max_open_per_principal"] = cap
        if "socket_max_ops" in spec:
            ops = spec["socket_max_ops"]
            if not isinstance(ops, int) or isinstance(ops, bool) or not 1 <= ops <= 10000:
                self.fail(
                    "approvals.socket_max_ops",
                    f"must be a whole number from 1 to 10000, not {ops!r}",
                )
            values["socket_max_ops"] = ops
        if "socket_max_age_s" in spec:
            values["socket_max_age_s"] = self.number(
                spec["socket_max_age_s"], "approvals.socket_max_age_s"
            )
        if "trust_client_answers" in spec:
            values["trust_client_answers"] = self.boolean(
                spec["trust_client_answers"], "approvals.trust_client_answers"
            )
        if "page_url" in spec:
            page = self.string(spec["page_url"], "approvals.page_url")
            if not page.startswith(("https://", "http://")):
                self.fail("approvals.page_url", "must be an http(s):// URL of the approvals page")
            values["page_url"] = page.rstrip("/")
        if "notify" in spec:
            notify = self.obj(
                spec["notify"],
                "approvals.notify",
                ("url", "secret_env", "secret_file", "timeout_s"),
            )
            if "url" not in notify:
                self.fail("approvals.notify.url", "missing: the webhook's URL")
            url = self.string(notify["url"], "approvals.notify.url")
            if not url.startswith(("https://", "http://")):
                self.fail("approvals.notify.url", "must be an http(s):// URL")
            values["notify_url"] = url
            if ("secret_env" in notify) == ("secret_file" in notify):
                self.fail(
                    "approvals.notify",
                    "give one of secret_env or secret_file: notifications are HMAC-signed",
                )
            if "secret_env" in notify:
                values["notify_secret_source"] = (
                    "env",
                    self.string(notify["secret_env"], "approvals.notify.secret_env"),
                )
            else:
                values["notify_secret_source"] = (
                    "file",
                    self.file_path(notify["secret_file"], "approvals.notify.secret_file"),
                )
            if "timeout_s" in notify:
                values["notify_timeout_s"] = self.number(
                    notify["timeout_s"], "approvals.notify.timeout_s"
                )
        return ApprovalsSettings(**values)

    def user_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            self.fail(key, f"must be a list of unix user or group names, not {_kind(value)}")
        return [self.string(item, f"{key}[{i}]") for i, item in enumerate(value)]

    def state_url(self, raw: Any) -> str | None:
        spec = self.obj(raw, "state", _STATE_KEYS)
        if "url" not in spec:
            return None
        url = self.string(spec["url"], "state.url")
        if not url.startswith(("redis://", "rediss://", "unix://")):
            self.fail("state.url", "must be a redis://, rediss:// or unix:// URL of a Redis server")
        return url

    def state_redis(self, raw: Any) -> StateRedisSettings | None:
        """How the guard authenticates to ``state.url``: a password kept out of this file."""
        spec = self.obj(raw, "state", _STATE_KEYS)
        if "url" not in spec:
            for key in _STATE_KEYS[1:]:
                if key in spec:
                    self.fail(f"state.{key}", "applies to a Redis only: state.url is not set")
            return None
        url = str(spec["url"])
        if _url_has_password(url):
            self.fail(
                "state.url",
                "holds a password, which does not belong in the config file; "
                "name a 0600 file with state.password_file or a variable with state.password_env",
            )
        if "password_env" in spec and "password_file" in spec:
            self.fail("state", "give one of password_env or password_file, not both")
        source: tuple[str, str] | None = None
        if "password_env" in spec:
            source = ("env", self.string(spec["password_env"], "state.password_env"))
        elif "password_file" in spec:
            source = ("file", self.file_path(spec["password_file"], "state.password_file"))
        allow = self.boolean(
            spec.get("allow_unauthenticated_redis", False), "state.allow_unauthenticated_redis"
        )
        if source is None and not allow:
            self.fail(
                "state.url",
                "a Redis without authentication is refused: whoever reaches it could approve "
                "calls and make checkpoints appear; set a password (requirepass, or an ACL "
                "user in the URL) and name it with state.password_file or state.password_env",
            )
        ca_file = None
        if "ca_file" in spec:
            if not url.startswith("rediss://"):
                self.fail("state.ca_file", "applies to a rediss:// (TLS) state.url only")
            ca_file = self.file_path(spec["ca_file"], "state.ca_file")
        return StateRedisSettings(
            password_source=source, allow_unauthenticated=allow, ca_file=ca_file
        )

    def string_map(self, value: Any, key: str) -> dict[str, str]:
        if not isinstance(value, dict):
            self.fail(key, f"must be a JSON object of strings, not {_kind(value)}")
        for name, item in value.items():
            if not isinstance(item, str):
                self.fail(f"{key}.{name}", f"must be a string, not {_kind(item)}")
        return dict(value)

    def state_dir(self, top: dict[str, Any], env: Mapping[str, str]) -> str:
        named = env.get("ZERTO_REWIND_STATE_DIR", "").strip()
        if named:
            return os.path.abspath(os.path.expanduser(named))
        if "state_dir" in top:
            return self.file_path(top["state_dir"], "state_dir")
        base = env.get("XDG_STATE_HOME") or os.path.join(home_dir(env), ".local", "state")
        return os.path.join(base, "zerto-rewind")

    def log_path(self, top: dict[str, Any], env: Mapping[str, str]) -> str:
        if env.get("ZERTO_HOOK_LOG", "").strip() or "log" not in top:
            return default_log_path(env)
        return self.file_path(top["log"], "log")

    def zvms(
        self, top: dict[str, Any], env: Mapping[str, str], *, loose_permissions: bool
    ) -> dict[str, ZvmSettings]:
        """``zvm`` (one ZVM: a one-site estate named ``default``) or ``zvms`` (site -> ZVM)."""
        if "zvm" in top and "zvms" in top:
            self.fail(
                "zvms",
                "the config gives both zvm and zvms; use zvms alone (one entry per site) or "
                "zvm alone (a single ZVM)",
            )
        if "zvm" in top:
            return {DEFAULT_SITE: self.zvm(top["zvm"], env, loose_permissions=loose_permissions)}
        if "zvms" not in top:
            self.fail("zvm", "missing: the ZVM's url and credentials are required (zvm or zvms)")
        raw = top["zvms"]
        if not isinstance(raw, dict) or not raw:
            self.fail("zvms", "must be a non-empty JSON object of site name -> ZVM settings")
        sites: dict[str, ZvmSettings] = {}
        urls: dict[str, str] = {}
        for site, spec in raw.items():
            key = f"zvms.{site}"
            if not site or not all(ch.isalnum() or ch in "-_" for ch in site):
                self.fail(key, "a site name may hold only letters, digits, - and _")
            zvm = self.zvm(spec, env, loose_permissions=loose_permissions, key=key, site=site)
            if zvm.url in urls:
                self.fail(
                    f"{key}.url",
                    f"is also the url of site {urls[zvm.url]}; each site has its own ZVM",
                )
            urls[zvm.url] = site
            sites[site] = zvm
        return sites

    def zvm(
        self,
        raw: Any,
        env: Mapping[str, str],
        *,
        loose_permissions: bool,
        key: str = "zvm",
        site: str = DEFAULT_SITE,
    ) -> ZvmSettings:
        keys = (
            "url", "client_id", "client_secret", "client_secret_env", "client_secret_file",
            "username", "password", "password_env", "password_file",
            "ca_bundle", "verify_tls", "connect_timeout_s", "read_timeout_s", "scope",
            "allow_insecure_http",
        )  # fmt: skip
        zvm = self.obj(raw, key, keys)
        url = self.url(zvm.get("url"), f"{key}.url")
        insecure = self.boolean(zvm.get("allow_insecure_http", False), f"{key}.allow_insecure_http")
        if url.startswith("http://") and not insecure:
            # The ZVM is the trust root for "did the tag land": in clear text, anyone on the
            # path can move a tag or forge a checkpoint unseen.
            self.fail(
                f"{key}.url",
                f"is plain http:// ({url!r}); the guard talks to a ZVM over https:// only "
                f"(for a test simulator without TLS, set {key}.allow_insecure_http: true)",
            )
        password_keys: list[str] = [
            k for k in ("password", "password_env", "password_file") if k in zvm
        ]
        secret_keys: list[str] = [
            k for k in ("client_secret", "client_secret_env", "client_secret_file") if k in zvm
        ]
        chosen: list[str]
        username: str | None = None
        if "username" in zvm or password_keys:
            if secret_keys:
                self.fail(key, "give username + password or client_id + client_secret, not both")
            grant, chosen, client_id = (
                "password",
                password_keys,
                zvm.get("client_id", "zerto-client"),
            )
            username = self.string(zvm.get("username"), f"{key}.username")
        else:
            grant, chosen, client_id = "client_credentials", secret_keys, zvm.get("client_id")
        client_id = self.string(client_id, f"{key}.client_id")
        source = self.secret_source(
            zvm, chosen, grant, loose_permissions=loose_permissions, key=key
        )
        verify = self.boolean(zvm.get("verify_tls", True), f"{key}.verify_tls")
        ca_bundle = (
            self.file_path(zvm["ca_bundle"], f"{key}.ca_bundle") if "ca_bundle" in zvm else None
        )
        if ca_bundle is not None and not verify:
            self.fail(
                f"{key}.verify_tls", f"is false while {key}.ca_bundle is set; drop one of them"
            )
        return ZvmSettings(
            url=url,
            grant=grant,
            client_id=client_id,
            username=username,
            secret_source=source,
            ca_bundle=ca_bundle,
            verify_tls=verify,
            connect_timeout_s=self.number(
                zvm.get("connect_timeout_s", 5), f"{key}.connect_timeout_s"
            ),
            read_timeout_s=self.number(zvm.get("read_timeout_s", 30), f"{key}.read_timeout_s"),
            scope=self.string(zvm["scope"], f"{key}.scope") if "scope" in zvm else None,
            secret_origin=(self.path, f"{key}.{chosen[0]}"),
            env=env,
            site=site,
            config_key=key,
        )

    def url(self, value: Any, key: str = "zvm.url") -> str:
        url = self.string(value, key).rstrip("/")
        if not url.startswith(("https://", "http://")) or len(url.split("://", 1)[1]) == 0:
            self.fail(key, f"must be an https:// URL of the ZVM, not {url!r}")
        return url

    def secret_source(
        self,
        zvm: dict[str, Any],
        chosen: list[str],
        grant: str,
        *,
        loose_permissions: bool,
        key: str = "zvm",
    ) -> tuple[str, str]:
        what = "password" if grant == "password" else "client_secret"
        if len(chosen) != 1:
            options = f"{what}_env, {what}_file or {what}"
            problem = "missing" if not chosen else f"set only one of {', '.join(chosen)}"
            self.fail(f"{key}.{what}", f"{problem}: give exactly one of {options}")
        name = chosen[0]
        if name.endswith("_env"):
            return ("env", self.string(zvm[name], f"{key}.{name}"))
        if name.endswith("_file"):
            return ("file", self.file_path(zvm[name], f"{key}.{name}"))
        if loose_permissions:
            msg = (
                "holds a secret but the config file is readable by others; "
                f"chmod 600 the file, or use {key}.{what}_env / {key}.{what}_file"
            )
            self.fail(f"{key}.{name}", msg)
        return ("inline", self.string(zvm[name], f"{key}.{name}"))

    def catalog(self, top: dict[str, Any], env: Mapping[str, str]) -> CatalogSettings:
        read_only = self.name_list(top.get("read_only_tools", []), "read_only_tools")
        tools_raw = top.get("tools", {})
        if not isinstance(tools_raw, dict):
            self.fail(
                "tools", f"must be a JSON object of tool name -> spec, not {_kind(tools_raw)}"
            )
        tools = {name: self.tool(name, spec) for name, spec in tools_raw.items()}
        both = sorted(set(read_only) & set(tools))
        if both and tools[both[0]].host_paths:
            msg = (
                f"{both[0]!r} names a path on the VM server's host (host_paths), so it is never "
                "read-only; take it out of read_only_tools"
            )
            self.fail("read_only_tools", msg)
        if both:
            self.fail(
                "tools", f"{both[0]!r} is also in read_only_tools; a tool is one or the other"
            )
        vm_map = self.vm_map(top["vm_map"], "vm_map") if "vm_map" in top else None
        unknown, source = self.unknown(top, env)
        options = self.obj(
            top.get("catalog", {}), "catalog", ("from_annotations", "resolvers", "pins")
        )
        from_annotations = self.boolean(
            options.get("from_annotations", False), "catalog.from_annotations"
        )
        resolvers = self.resolvers(options.get("resolvers", {}), tools)
        return CatalogSettings(
            tuple(read_only),
            tools,
            vm_map,
            unknown,
            source,
            from_annotations=from_annotations,
            resolvers=resolvers,
            pins=self.pins(options.get("pins", {})),
        )

    # ---- catalog.resolvers: the gateway's identity check, one block per VM server
    def resolvers(self, raw: Any, tools: dict[str, ToolSpec]) -> dict[str, ResolverSpec]:
        if not isinstance(raw, dict):
            self.fail(
                "catalog.resolvers",
                f"must be a JSON object of server -> resolver, not {_kind(raw)}",
            )
        return {
            self.string(server, "catalog.resolvers"): self.resolver(server, spec, tools)
            for server, spec in raw.items()
        }

    def resolver(self, server: str, raw: Any, tools: dict[str, ToolSpec]) -> ResolverSpec:
        key = f"catalog.resolvers.{server}"
        keys = ("tool", "arg", "id_path", "zerto_field", "zerto_pattern", "timeout_s",
                "vcenter", "vcenter_path")  # fmt: skip
        spec = self.obj(raw, key, keys)
        for required in ("tool", "arg", "id_path"):
            if required not in spec:
                self.fail(f"{key}.{required}", "is required")
        tool = self.string(spec["tool"], f"{key}.tool")
        if f"mcp__{server}__{tool}" in tools:
            msg = (
                f"names {tool!r}, which the catalog lists as a mutating tool; the resolver is "
                "called before every checkpointed call, so it must be a read-only tool"
            )
            self.fail(f"{key}.tool", msg)
        arg = self.string(spec["arg"], f"{key}.arg")
        id_path = self.arg_path(spec["id_path"], f"{key}.id_path")
        if "[]" in id_path:
            self.fail(f"{key}.id_path", "must name one value (no '[]' fan-out)")
        field = self.string(
            spec.get("zerto_field", "vm_identifier"), f"{key}.zerto_field", choices=ZERTO_ID_FIELDS
        )
        pattern = self.id_pattern(spec.get("zerto_pattern"), f"{key}.zerto_pattern")
        timeout = self.number(spec.get("timeout_s", 10.0), f"{key}.timeout_s")
        extra: dict[str, Any] = {"zerto_pattern": pattern} if pattern is not None else {}
        if "vcenter" in spec:
            extra["vcenter"] = self.string(spec["vcenter"], f"{key}.vcenter")
        if "vcenter_path" in spec:
            vcenter_path = self.arg_path(spec["vcenter_path"], f"{key}.vcenter_path")
            if "[]" in vcenter_path:
                self.fail(f"{key}.vcenter_path", "must name one value (no '[]' fan-out)")
            extra["vcenter_path"] = vcenter_path
        return ResolverSpec(
            server, tool, arg, id_path, zerto_field=field, timeout_s=timeout, **extra
        )

    def id_pattern(self, value: Any, key: str) -> str | None:
        if value is None:
            return None
        import re  # only a config with resolvers pays for it

        pattern = self.string(value, key)
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            self.fail(key, f"is not a valid regular expression: {exc}")
        if "id" not in compiled.groupindex:
            self.fail(key, "needs a named group (?P<id>...) that captures the vCenter identity")
        return pattern

    def pins(self, value: Any) -> dict[str, str]:
        """``catalog.pins``: host tool name -> ``sha256:<64 hex>`` (written by catalog scan)."""
        pins = self.string_map(value, "catalog.pins")
        for name, pin in pins.items():
            key = f"catalog.pins.{name}"
            if not name.startswith("mcp__") or name.count("__") < 2 or "*" in name:
                self.fail(key, "must be a host tool name like mcp__SERVER__TOOL (no patterns)")
            digest = pin.removeprefix("sha256:")
            if not pin.startswith("sha256:") or len(digest) != 64 or digest.strip(_HEX):
                self.fail(key, "must be sha256: and 64 hex digits, as `catalog scan` writes it")
        return pins

    def unknown(self, top: dict[str, Any], env: Mapping[str, str]) -> tuple[str, str]:
        named = env.get("ZERTO_HOOK_UNKNOWN", "").strip().lower()
        if named:
            if named not in UNKNOWN_CHOICES:
                msg = (
                    f"ZERTO_HOOK_UNKNOWN must be one of {', '.join(UNKNOWN_CHOICES)}, not {named!r}"
                )
                raise ConfigError(msg)
            return named, "ZERTO_HOOK_UNKNOWN"
        if "unknown_tools" in top:
            return self.string(
                top["unknown_tools"], "unknown_tools", choices=UNKNOWN_CHOICES
            ), "config"
        return "prompt", "default"

    def name_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            self.fail(key, f"must be a list of tool names or glob patterns, not {_kind(value)}")
        names = [self.string(item, f"{key}[{i}]") for i, item in enumerate(value)]
        if len(set(names)) != len(names):
            dupe = next(n for n in names if names.count(n) > 1)
            self.fail(key, f"lists {dupe!r} twice")
        return names

    def tool(self, name: str, spec: Any) -> ToolSpec:
        key = f"tools.{name}"
        if not name.strip():
            self.fail("tools", "a tool name is empty")
        spec = self.obj(spec, key, ("vm_arg", "vm_map", "vpgs", "decision", "host_paths"))
        vm_arg = self.vm_arg(spec["vm_arg"], f"{key}.vm_arg") if "vm_arg" in spec else ()
        vm_map = self.vm_map(spec["vm_map"], f"{key}.vm_map") if "vm_map" in spec else None
        vpgs: tuple[str, ...] = ()
        if "vpgs" in spec:
            raw_vpgs = spec["vpgs"]
            if not isinstance(raw_vpgs, list) or not raw_vpgs:
                self.fail(f"{key}.vpgs", "must be a non-empty list of VPG names")
            vpgs = tuple(
                dict.fromkeys(self.string(v, f"{key}.vpgs[{i}]") for i, v in enumerate(raw_vpgs))
            )
        decision = None
        if "decision" in spec:
            decision = self.string(spec["decision"], f"{key}.decision", choices=TOOL_DECISIONS)
            if decision == "allow" and vm_arg:
                msg = (
                    "is 'allow', but the tool names an existing VM (vm_arg): a change to an "
                    "existing VM is never allowed without a checkpoint; use prompt or deny"
                )
                self.fail(f"{key}.decision", msg)
            if vpgs:
                msg = (
                    "applies only when nothing can be checkpointed, and this tool's vpgs are "
                    "checkpointed on every call; remove one of the two"
                )
                self.fail(f"{key}.decision", msg)
        host_paths = self.host_paths(spec["host_paths"], key) if "host_paths" in spec else ()
        return ToolSpec(name, vm_arg, vm_map, vpgs=vpgs, decision=decision, host_paths=host_paths)

    def host_paths(self, value: Any, key: str) -> tuple[str, ...]:
        """``tools.NAME.host_paths``: the arguments that name a file on the VM server's host."""
        if not isinstance(value, list) or not value:
            msg = (
                "must be a non-empty list of argument paths (like 'save_to') that name a file "
                "or directory on the machine where the VM server runs"
            )
            self.fail(f"{key}.host_paths", msg)
        paths = [self.arg_path(v, f"{key}.host_paths[{i}]") for i, v in enumerate(value)]
        return tuple(dict.fromkeys(paths))

    def vm_arg(self, value: Any, key: str) -> tuple[VmPath, ...]:
        items = value if isinstance(value, list) else [value]
        if not items:
            self.fail(key, "is an empty list; name at least one argument path")
        return tuple(
            self.vm_path(item, f"{key}[{i}]" if isinstance(value, list) else key)
            for i, item in enumerate(items)
        )

    def vm_path(self, value: Any, key: str) -> VmPath:
        if isinstance(value, dict):
            spec = self.obj(value, key, ("path", "pattern"))
            pattern = (
                self.string(spec.get("pattern"), f"{key}.pattern") if "pattern" in spec else None
            )
            return VmPath(self.arg_path(spec.get("path"), f"{key}.path"), pattern)
        return VmPath(self.arg_path(value, key))

    def arg_path(self, value: Any, key: str) -> str:
        path = self.string(value, key)
        for part in path.split("."):
            bare = part[:-2] if part.endswith("[]") else part
            if not bare or "[" in bare or "]" in bare:
                self.fail(key, f"{path!r} is not a dotted path like 'name', 'vm.name' or 'vms[]'")
        return path

    def vm_map(self, value: Any, key: str) -> VmMap:
        spec = self.obj(value, key, ("aliases", "strip_domain"))
        aliases_raw = spec.get("aliases", {})
        if not isinstance(aliases_raw, dict):
            self.fail(f"{key}.aliases", "must be an object of alias -> VM name")
        # Exact, as the VM server matches names: an alias never folds case or whitespace.
        aliases = {
            self.string(k, f"{key}.aliases"): self.string(v, f"{key}.aliases.{k}")
            for k, v in aliases_raw.items()
        }
        strip = spec.get("strip_domain", False)
        if isinstance(strip, list):
            domains = tuple(self.string(d, f"{key}.strip_domain").lstrip(".") for d in strip)
            return VmMap(aliases, domains)
        return VmMap(aliases, self.boolean(strip, f"{key}.strip_domain"))

    def guard(self, raw: Any, env: Mapping[str, str]) -> GuardSettings:
        keys = (
            "timeout_s", "on_pending", "prompt_as", "cadence_s", "site_cadence_s", "site_types",
            "landing_allowance_s", "overdue_factor", "overdue_min_s", "vm_cache_ttl_s",
            "tag_prefix", "protect_self", "prompt_via", "max_tags_per_minute", "tag_via",
            "site_down_s",
        )  # fmt: skip
        guard = self.obj(raw, "guard", keys)
        values: dict[str, Any] = {}
        for name in ("timeout_s", "overdue_min_s"):
            if name in guard:
                values[name] = self.number(guard[name], f"guard.{name}")
        for name in ("landing_allowance_s", "vm_cache_ttl_s", "site_down_s"):
            if name in guard:
                values[name] = self.number(guard[name], f"guard.{name}", inclusive=True)
        if "overdue_factor" in guard:
            factor = guard["overdue_factor"]
            values["overdue_factor"] = self.number(
                factor, "guard.overdue_factor", minimum=1.0, inclusive=True
            )
        for name, choices in (
            ("on_pending", ON_PENDING_CHOICES),
            ("prompt_as", PROMPT_AS_CHOICES),
            ("prompt_via", PROMPT_VIA_CHOICES),
            ("tag_via", TAG_VIA_CHOICES),
        ):
            if name in guard:
                values[name] = self.string(guard[name], f"guard.{name}", choices=choices)
        if "tag_prefix" in guard:
            values["tag_prefix"] = self.tag_prefix(guard["tag_prefix"])
        if "protect_self" in guard:
            values["protect_self"] = self.boolean(guard["protect_self"], "guard.protect_self")
        if "max_tags_per_minute" in guard:
            values["max_tags_per_minute"] = self.tag_bound(guard["max_tags_per_minute"])
        values["cadence_s"] = self.seconds_map(guard.get("cadence_s", {}), "guard.cadence_s")
        site_cadence = self.seconds_map(guard.get("site_cadence_s", {}), "guard.site_cadence_s")
        for kind in site_cadence:
            if kind not in SITE_KINDS:
                self.fail(
                    f"guard.site_cadence_s.{kind}",
                    f"unknown site kind; use {', '.join(SITE_KINDS)}",
                )
        values["site_cadence_s"] = site_cadence
        values["site_types"] = self.site_types(guard.get("site_types", {}))
        timeout = env.get("ZERTO_HOOK_GUARD_TIMEOUT", "").strip()
        if timeout:
            values["timeout_s"] = _env_seconds(timeout)
        return GuardSettings(**values)

    def tag_bound(self, value: Any) -> int | None:
        """``guard.max_tags_per_minute``: a whole number of at least 1, or null for no bound."""
        key = "guard.max_tags_per_minute"
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            self.fail(
                key,
                f"must be a whole number of tags of at least 1, or null for no bound, not "
                f"{value!r}",
            )
        return value

    def tag_prefix(self, value: Any) -> str:
        prefix = self.string(value, "guard.tag_prefix")
        if len(prefix) > 40:
            self.fail("guard.tag_prefix", "must be at most 40 characters (ZVM limits tag length)")
        return prefix

    def seconds_map(self, value: Any, key: str) -> dict[str, float]:
        if not isinstance(value, dict):
            self.fail(key, f"must be an object of name -> seconds, not {_kind(value)}")
        return {name: self.number(v, f"{key}.{name}") for name, v in value.items()}

    def site_types(self, value: Any) -> dict[int, str]:
        if not isinstance(value, dict):
            self.fail("guard.site_types", "must be an object of entity type number -> site kind")
        result: dict[int, str] = {}
        for number, kind in value.items():
            key = f"guard.site_types.{number}"
            if not (number.isascii() and number.isdigit()):
                self.fail(key, 'keys are Entities.Protected numbers such as "3"')
            result[int(number)] = self.string(kind, key, choices=SITE_KINDS)
        return result


_HEX = "0123456789abcdef"


def _env_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        msg = f"ZERTO_HOOK_GUARD_TIMEOUT must be a positive number of seconds, not {text!r}"
        raise ConfigError(msg)
    return value


def _kind(value: Any) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
    }
    return names.get(type(value), "a number")


# state.url first: the others apply to a Redis only.
_LISTENER_TIMEOUTS = ("header_timeout_s", "body_timeout_s", "idle_timeout_s", "handshake_timeout_s")
_LISTENER_CAPS = ("max_connections", "max_connections_per_source")
_STATE_KEYS = ("url", "password_env", "password_file", "allow_unauthenticated_redis", "ca_file")


def _url_has_password(url: str) -> bool:
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        return bool(parts.password) or "password" in parse_qs(parts.query)
    except ValueError:
        return False  # an unparseable URL: connecting says so, without quoting it


def _unknown_key(name: str, allowed: tuple[str, ...]) -> str:
    """``unknown key; did you mean 'timeout_s'? (known keys: …)`` for a near miss."""
    import difflib  # only on this error path: the hook parses the config on every call

    hint = ", ".join(allowed)
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}? (known keys: {hint})"
    return f"unknown key (known keys: {hint})"
