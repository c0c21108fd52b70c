"""The gateway's sections: ``upstreams``, ``gateway``, ``approvals`` and ``state``.

A hook's config has none of them: nothing to pay there.
"""

from __future__ import annotations

from .parse_base import ParserBase, _kind
from .settings import (
    ApprovalsSettings,
    GatewaySettings,
    LimitsSettings,
    StateRedisSettings,
    UpstreamSettings,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["GatewayParser"]


class GatewayParser(ParserBase):
    """The gateway's own keys, its VM servers, its approvers and its shared state."""

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


# state.url first: the others apply to a Redis only.
_LISTENER_TIMEOUTS = ("header_timeout_s", "body_timeout_s", "idle_timeout_s")
_LISTENER_CAPS = ("max_connections", "max_connections_per_source")
_STATE_KEYS = ("url", "password_env", "password_file", "allow_unauthenticated_redis", "ca_file")


def _url_has_password(url: str) -> bool:
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        return bool(parts.password) or "password" in parse_qs(parts.query)
    except ValueError:
        return False  # an unparseable URL: connecting says so, without quoting it
