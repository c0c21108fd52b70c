"""Validation of the raw config JSON into :mod:`zerto_rewind.config` settings.

Every error names the file, the dotted key and what is wrong, and the hook denies
every call while the config is broken. Like the rest of ``config`` it imports nothing
heavy: the hook runs it on every call.

Where things are:

* :mod:`.schema`: every key, one table per section (name, rule, docs heading). **A new
  key is a row there**, a field in its section's record (:mod:`.sections`) and a row in
  docs/configuration.md; its module docstring says how.
* :mod:`.rules`: how one value is read (numbers and their bounds, choices, paths…).
* :mod:`.parse_base`: the file, the dotted key and the scalar checks the rules use.
* ``parse_catalog``, ``parse_zvm``, ``parse_gateway`` and this module: one function per
  section, for what a table cannot say (keys that depend on each other, secrets,
  environment variables that win over the file).
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from .parse_catalog import CatalogParser
from .parse_gateway import GatewayParser
from .parse_zvm import ZvmParser
from .schema import GUARD, LOG_ANCHOR, RECOVERY, TOP
from .settings import (
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
        top = self.obj(raw, "", TOP.names)
        zvms = self.zvms(top, env, loose_permissions=loose_permissions)
        _recovery, recovery = RECOVERY.read(self, top.get("recovery", {}), "recovery")
        return Settings(
            path=self.path,
            zvm=next(iter(zvms.values())),
            zvms=zvms,
            catalog=self.catalog(top, env),
            guard=self.guard(top.get("guard", {}), env),
            allow_live_recovery=recovery.get("allow_live", False),
            recovery_via=recovery.get("via", "recovery"),
            state_dir=self.state_dir(top, env),
            log_path=self.log_path(top, env),
            upstreams=self.upstreams(top.get("upstreams", {}), loose_permissions),
            gateway=self.gateway(top.get("gateway", {})),
            state_url=self.state_url(top.get("state", {})),
            state_redis=self.state_redis(top.get("state", {})),
            approvals=self.approvals(top.get("approvals", {})),
            log_anchor=LogAnchorSettings(
                **LOG_ANCHOR.read(self, top.get("log_anchor", {}), "log_anchor")[1]
            ),
        )

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
        """``guard``: every key by its rule (schema.GUARD); ``ZERTO_HOOK_GUARD_TIMEOUT`` wins."""
        _guard, values = GUARD.read(self, raw, "guard")
        timeout = env.get("ZERTO_HOOK_GUARD_TIMEOUT", "").strip()
        if timeout:
            values["timeout_s"] = _env_seconds(timeout)
        return GuardSettings(**values)


def _env_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        msg = f"ZERTO_HOOK_GUARD_TIMEOUT must be a positive number of seconds, not {text!r}"
        raise ConfigError(msg)
    return value
