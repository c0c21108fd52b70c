"""Validation of the raw config JSON into :mod:`zerto_rewind.config` settings.

Every error names the file, the dotted key and what is wrong. Like config.py it
imports nothing heavy: the hook runs it on every call.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from .parse_base import _kind
from .parse_catalog import CatalogParser
from .parse_gateway import GatewayParser
from .parse_zvm import ZvmParser
from .settings import (
    DEFAULT_SITE_CADENCE_S,
    ON_PENDING_CHOICES,
    PROMPT_AS_CHOICES,
    PROMPT_VIA_CHOICES,
    RECOVERY_VIA_CHOICES,
    SITE_KINDS,
    TAG_VIA_CHOICES,
    GuardSettings,
    LogAnchorSettings,
    Settings,
    default_log_path,
    home_dir,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["Parser"]


class Parser(CatalogParser, ZvmParser, GatewayParser):
    """Validates the raw JSON; every error names the file and the dotted key."""

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
        return LogAnchorSettings(every_lines=lines, every_s=every_s, path=path)

    # ---- the gateway's sections (absent from a hook's config: nothing to pay there)

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
        values["site_cadence_s"] = {**DEFAULT_SITE_CADENCE_S, **site_cadence}
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


def _env_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        msg = f"ZERTO_HOOK_GUARD_TIMEOUT must be a positive number of seconds, not {text!r}"
        raise ConfigError(msg)
    return value
