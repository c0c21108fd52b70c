"""The gateway's sections: ``upstreams``, ``gateway``, ``approvals`` and ``state``.

A hook's config has none of them: nothing to pay there.
"""

from __future__ import annotations

from .parse_base import ParserBase, _kind
from .schema import APPROVALS, APPROVERS, GATEWAY, LIMITS, NOTIFY, STATE, UPSTREAM
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

    def sections(self, top: dict[str, Any], loose_permissions: bool) -> dict[str, Any]:
        """``upstreams``, ``gateway``, ``state`` and ``approvals``, as Settings keywords."""
        state_url, state_redis = self.state(top.get("state", {}))
        return {
            "state_url": state_url,
            "state_redis": state_redis,
            "upstreams": self.upstreams(top.get("upstreams", {}), loose_permissions),
            "gateway": self.gateway(top.get("gateway", {})),
            "approvals": self.approvals(top.get("approvals", {})),
        }

    def upstreams(self, raw: Any, loose_permissions: bool) -> dict[str, UpstreamSettings]:
        if not isinstance(raw, dict):
            self.fail("upstreams", f"must be a JSON object of name -> server, not {_kind(raw)}")
        found: dict[str, UpstreamSettings] = {}
        for name, spec in raw.items():
            key = f"upstreams.{name}"
            if not name or not all(ch.isalnum() or ch in "-_" for ch in name):
                self.fail(key, "a server name may hold only letters, digits, - and _")
            found[name] = self.upstream(name, spec, key, loose_permissions)
        return found

    def upstream(self, name: str, raw: Any, key: str, loose_permissions: bool) -> UpstreamSettings:
        """One VM server: a stdio ``command`` (confined) or an HTTP ``url``."""
        spec, values = UPSTREAM.read(self, raw, key)
        if ("command" in spec) == ("url" in spec):
            self.fail(key, "give exactly one of command (a stdio server) or url (HTTP)")
        if (spec.get("env") or spec.get("headers")) and loose_permissions:
            msg = "holds credentials but the config file is readable by others; chmod 600 it"
            self.fail(key, msg)
        if "command" in spec:
            command = spec["command"]
            if not isinstance(command, list) or not command:
                self.fail(f"{key}.command", "must be a non-empty list of strings")
            argv = [self.string(part, f"{key}.command") for part in command]
            env = self.string_map(spec.get("env", {}), f"{key}.env")
            user, group, workdir = self.confinement(spec, key)
            log = self.file_path(spec["log"], f"{key}.log") if "log" in spec else None
            return UpstreamSettings(
                name=name, command=argv, env=env, user=user, group=group, workdir=workdir,
                log_path=log, **values,
            )  # fmt: skip
        for local in ("user", "group", "workdir", "log"):
            if local in spec:
                self.fail(f"{key}.{local}", "applies to a stdio server (command) only")
        url = self.string(spec["url"], f"{key}.url")
        if not url.startswith(("https://", "http://")):
            self.fail(f"{key}.url", "must be an http(s):// URL of the MCP endpoint")
        headers = self.string_map(spec.get("headers", {}), f"{key}.headers")
        return UpstreamSettings(name=name, url=url, headers=headers, **values)

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
        """``gateway``: every key by its rule (schema.GATEWAY), ``limits`` by its own table."""
        spec, values = GATEWAY.read(self, raw, "gateway")
        if ("tls_cert" in spec) != ("tls_key" in spec):
            self.fail("gateway.tls_cert", "give both tls_cert and tls_key, or neither")
        if "limits" in spec:
            values["limits"] = self.gateway_limits(spec["limits"])
        return GatewaySettings(**values)

    def gateway_limits(self, raw: Any) -> LimitsSettings:
        """``gateway.limits``: whole numbers of at least 1; seconds within their bounds."""
        _spec, values = LIMITS.read(self, raw, "gateway.limits")
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
        """``approvals``: its keys by their rules; ``approvers`` and ``notify`` are objects."""
        spec, values = APPROVALS.read(self, raw, "approvals")
        _approvers, people = APPROVERS.read(self, spec.get("approvers", {}), "approvals.approvers")
        values["approver_users"] = people.get("users", ())
        values["approver_groups"] = people.get("groups", ())
        both = sorted(set(values.get("agent_users", ())) & set(values["approver_users"]))
        if both:
            self.fail(
                "approvals.approvers.users",
                f"{', '.join(both)} also run agents (approvals.agent_users); an agent's "
                "user cannot approve calls",
            )
        if "notify" in spec:
            values.update(self.notify(spec["notify"]))
        return ApprovalsSettings(**values)

    def notify(self, raw: Any) -> dict[str, Any]:
        """``approvals.notify``: the webhook's URL, its HMAC key's source, its timeout."""
        notify, values = NOTIFY.read(self, raw, "approvals.notify")
        if "url" not in notify:
            self.fail("approvals.notify.url", "missing: the webhook's URL")
        url = self.string(notify["url"], "approvals.notify.url")
        if not url.startswith(("https://", "http://")):
            self.fail("approvals.notify.url", "must be an http(s):// URL")
        if ("secret_env" in notify) == ("secret_file" in notify):
            self.fail(
                "approvals.notify",
                "give one of secret_env or secret_file: notifications are HMAC-signed",
            )
        kind = "env" if "secret_env" in values else "file"
        found: dict[str, Any] = {
            "notify_url": url,
            "notify_secret_source": (kind, values[f"secret_{kind}"]),
        }
        if "timeout_s" in values:
            found["notify_timeout_s"] = values["timeout_s"]
        return found

    def state(self, raw: Any) -> tuple[str | None, StateRedisSettings | None]:
        """``state``: the Redis URL (None: the state directory) and how the guard
        authenticates to it; every other key applies to a Redis only."""
        spec, values = STATE.read(self, raw, "state")
        if "url" not in values:
            for key in STATE.names[1:]:
                if key in spec:
                    self.fail(f"state.{key}", "applies to a Redis only: state.url is not set")
            return None, None
        return values["url"], self.redis_auth(values["url"], values)

    def redis_auth(self, url: str, values: dict[str, Any]) -> StateRedisSettings:
        """A password kept out of this file (or a Redis explicitly left without one)."""
        if _url_has_password(url):
            self.fail(
                "state.url",
                "holds a password, which does not belong in the config file; "
                "name a 0600 file with state.password_file or a variable with state.password_env",
            )
        if "password_env" in values and "password_file" in values:
            self.fail("state", "give one of password_env or password_file, not both")
        source: tuple[str, str] | None = None
        if "password_env" in values:
            source = ("env", values["password_env"])
        elif "password_file" in values:
            source = ("file", values["password_file"])
        allow = values.get("allow_unauthenticated_redis", False)
        if source is None and not allow:
            self.fail(
                "state.url",
                "a Redis without authentication is refused: whoever reaches it could approve "
                "calls and make checkpoints appear; set a password (requirepass, or an ACL "
                "user in the URL) and name it with state.password_file or state.password_env",
            )
        if "ca_file" in values and not url.startswith("rediss://"):
            self.fail("state.ca_file", "applies to a rediss:// (TLS) state.url only")
        return StateRedisSettings(
            password_source=source, allow_unauthenticated=allow, ca_file=values.get("ca_file")
        )


def _url_has_password(url: str) -> bool:
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        return bool(parts.password) or "password" in parse_qs(parts.query)
    except ValueError:
        return False  # an unparseable URL: connecting says so, without quoting it
