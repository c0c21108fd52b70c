"""Validation of the raw config JSON into :mod:`zerto_rewind.config` settings.

Every error names the file, the dotted key and what is wrong, and the hook denies
every call while the config is broken. Like the rest of ``config`` it imports nothing
heavy: the hook runs it on every call.

Where things are:

* :mod:`.schema`: every key, one table per section (name, rule, docs heading). **A new
  key is a row there**, a field in its section's record (:mod:`.sections`) and a row in
  docs/configuration.md; its module docstring says how.
* :mod:`.parse_base`: the scalar checks, and the rules that read one value (numbers
  and their bounds, choices, paths…).
* This module (the top level, the ZVMs, the guard), ``parse_catalog`` and
  ``parse_gateway``: one function per section, for what a table cannot say (keys that
  depend on each other, secrets, environment variables that win over the file). The
  gateway's sections are read only when the config has one: a hook pays nothing for
  them.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from .parse_catalog import CatalogParser
from .schema import GUARD, LOG_ANCHOR, RECOVERY, TOP, ZVM
from .settings import (
    DEFAULT_SITE,
    GuardSettings,
    LogAnchorSettings,
    Settings,
    ZvmSettings,
    default_log_path,
    home_dir,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["Parser"]


# The top-level keys read by parse_gateway.GatewayParser.
GATEWAY_SECTIONS = ("upstreams", "gateway", "state", "approvals")


class Parser(CatalogParser):
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
            **self.gateway_sections(top, loose_permissions),
            log_anchor=LogAnchorSettings(
                **LOG_ANCHOR.read(self, top.get("log_anchor", {}), "log_anchor")[1]
            ),
        )

    def gateway_sections(self, top: dict[str, Any], loose_permissions: bool) -> dict[str, Any]:
        """The gateway's sections as Settings keywords; none (their defaults) when the
        config has none of them, as a hook's has not: it never imports their parser."""
        if not any(name in top for name in GATEWAY_SECTIONS):
            return {}
        from .parse_gateway import GatewayParser

        return GatewayParser(self.path, self.base_dir).sections(top, loose_permissions)

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
        """One ZVM: its URL, its login (grant and secret) and the keys read by their rules."""
        zvm, values = ZVM.read(self, raw, key)
        url = self.url(zvm.get("url"), f"{key}.url")
        insecure = values.pop("allow_insecure_http", False)  # not a setting: a check of url
        if url.startswith("http://") and not insecure:
            # The ZVM is the trust root for "did the tag land": in clear text, anyone on the
            # path can move a tag or forge a checkpoint unseen.
            self.fail(
                f"{key}.url",
                f"is plain http:// ({url!r}); the guard talks to a ZVM over https:// only "
                f"(for a test simulator without TLS, set {key}.allow_insecure_http: true)",
            )
        grant, client_id, username, chosen = self.login(zvm, key)
        source = self.secret_source(
            zvm, chosen, grant, loose_permissions=loose_permissions, key=key
        )
        if "ca_bundle" in values and values.get("verify_tls") is False:
            self.fail(
                f"{key}.verify_tls", f"is false while {key}.ca_bundle is set; drop one of them"
            )
        return ZvmSettings(
            url=url,
            grant=grant,
            client_id=client_id,
            username=username,
            secret_source=source,
            secret_origin=(self.path, f"{key}.{chosen[0]}"),
            env=env,
            site=site,
            config_key=key,
            **values,
        )

    def login(self, zvm: dict[str, Any], key: str) -> tuple[str, str, str | None, list[str]]:
        """(grant, client_id, username, the secret keys given): a username or a password key
        means the password grant, else client_credentials."""
        password_keys: list[str] = [
            k for k in ("password", "password_env", "password_file") if k in zvm
        ]
        secret_keys: list[str] = [
            k for k in ("client_secret", "client_secret_env", "client_secret_file") if k in zvm
        ]
        if "username" in zvm or password_keys:
            if secret_keys:
                self.fail(key, "give username + password or client_id + client_secret, not both")
            username = self.string(zvm.get("username"), f"{key}.username")
            client_id = self.string(zvm.get("client_id", "zerto-client"), f"{key}.client_id")
            return "password", client_id, username, password_keys
        client_id = self.string(zvm.get("client_id"), f"{key}.client_id")
        return "client_credentials", client_id, None, secret_keys

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


def _env_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        msg = f"ZERTO_HOOK_GUARD_TIMEOUT must be a positive number of seconds, not {text!r}"
        raise ConfigError(msg)
    return value
