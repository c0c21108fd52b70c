"""The doctor's checks of the config and the ZVM: does it load, and does the ZVM agree?

Config, secret, ZVM reachability, credentials and TLS (the catalog's entries: :mod:`.catalog`).
Each returns :class:`.check.Check`; the host-settings
checks are in :mod:`.hook`, the command in
:mod:`zerto_rewind.cli.doctor`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ...config.loader import load_config
from ...config.settings import Settings, config_path
from ...errors import (
    ApiError,
    AuthError,
    ConfigError,
    ZertoRewindError,
)
from .check import Check
from .estate import EnvSecret, estate_checks, zvm_failure

__all__ = [
    "ZVM_DEADLINE_S",
    "approvals_check",
    "config_checks",
    "pending_check",
    "secret_and_zvm_checks",
    "tls_check",
    "zvm_secret_files",
]

ZVM_DEADLINE_S = 10.0


def config_checks(env: Mapping[str, str], origin: str) -> tuple[list[Check], Settings | None]:
    """Whether the config loads; the settings when it does."""
    path = config_path(env)
    try:
        settings = load_config(env)
    except ConfigError as exc:
        fix = f"edit {path} (or point --config / ZERTO_REWIND_CONFIG at the right file)"
        return [Check("config", "fail", str(exc), fix)], None
    catalog = settings.catalog
    detail = (
        f"{path}{origin}: valid; {len(catalog.tools)} mutating tool entries, "
        f"{len(catalog.read_only)} read-only entries, guard budget {settings.guard.timeout_s:g} s"
    )
    return [Check("config", "pass", detail)], settings


def secret_and_zvm_checks(
    settings: Settings, env: Mapping[str, str], deadline_s: float
) -> list[Check]:
    """The secret is found; then the ZVM and the credentials (skipped without a secret).

    Several ZVMs (``zvms``): one ``zvm: SITE`` and one ``pairing: SITE`` line per site
    (:mod:`.estate`).
    """
    if len(settings.zvms) > 1:
        return estate_checks(settings, env, deadline_s)
    zvm = settings.zvm
    try:
        zvm.secret(env)
    except ConfigError as exc:
        fix = f"make the secret available where the hook runs ({zvm.secret_hint})"
        return [Check("secret", "fail", str(exc), fix)]
    checks = [Check("secret", "pass", f"found in {zvm.secret_hint}")]
    return checks + _zvm_checks(settings, env, deadline_s)


def _zvm_checks(settings: Settings, env: Mapping[str, str], deadline_s: float) -> list[Check]:
    """Get a fresh token (no cache: the credentials must really work) and make one cheap call."""
    from ...zvm.client import ZvmClient

    zvm = settings.zvm
    started = time.monotonic()
    who = f"{zvm.grant} grant for client {zvm.client_id!r}" + (
        f", user {zvm.username!r}" if zvm.username else ""
    )
    try:
        with ZvmClient(EnvSecret(zvm, env), retries=1, backoff_s=0.1) as client:
            site = client.local_site(deadline=started + deadline_s)
    except (AuthError, ApiError) as exc:
        _detail, fix = zvm_failure(exc, zvm, "zvm")
        keycloak = " (its Keycloak refused the login)" if isinstance(exc, AuthError) else ""
        reached = Check("zvm", "pass", f"{zvm.url} answered{keycloak}")
        return [reached, Check("credentials", "fail", str(exc), fix)]
    except ZertoRewindError as exc:
        detail, fix = zvm_failure(exc, zvm, "zvm")
        return [Check("zvm", "fail", detail, fix)]
    elapsed_ms = int((time.monotonic() - started) * 1000)
    name = site.get("SiteName") or site.get("SiteIdentifier") or "unnamed site"
    version = site.get("DisplayVersion") or site.get("Version") or "unknown version"
    return [
        Check("zvm", "pass", f"{zvm.url} answered in {elapsed_ms} ms: {name} ({version})"),
        Check("credentials", "pass", f"token issued for the {who}; GET /v1/localsite accepted"),
    ]


def zvm_secret_files(settings: Settings) -> dict[str, str]:
    """{label: path} of every site's ZVM secret file (each ``zvms`` entry, not only the first)."""
    several = len(settings.zvms) > 1
    return {
        (f"ZVM secret file of site {site}" if several else "ZVM secret file"): zvm.secret_hint
        for site, zvm in settings.zvms.items()
        if zvm.secret_kind == "file"  # noqa: S105 - a kind, not a secret
    }


def tls_check(settings: Settings) -> Check:
    """Every ZVM is reached over https with certificates verified."""
    several = len(settings.zvms) > 1
    warnings, verified = [], []
    for site, zvm in settings.zvms.items():
        key = f"zvms.{site}" if several else "zvm"
        if zvm.url.startswith("http://"):
            warnings.append(
                f"{key}.url {zvm.url} is plain http: tokens and secrets cross the network in clear"
            )
        elif not zvm.verify_tls:
            warnings.append(
                f"{key}.verify_tls is false: anyone on the path can impersonate the ZVM"
            )
        else:
            via = f"against {zvm.ca_bundle}" if zvm.ca_bundle else "against the system CA store"
            verified.append(f"{site}: {via}" if several else via)
    if warnings:
        fix = "use each ZVM's https:// URL, drop verify_tls and set its ca_bundle instead"
        return Check("tls", "warn", "; ".join(warnings), fix)
    return Check("tls", "pass", f"certificates verified {'; '.join(verified)}")


def pending_check(settings: Settings) -> Check:
    """How a tag that lands after the budget is answered, and where that is safe."""
    if settings.guard.on_pending != "defer":
        detail = f"pending tags are answered with {settings.guard.on_pending}"
        return Check("on_pending", "pass", detail)
    detail = (
        "guard.on_pending is defer: Claude Code honours it only in `claude -p`, and with two "
        "calls in one turn it resumes only the last deferred call (the others are dropped)"
    )
    fix = "use defer only for single-call headless runs; deny (the default) suits the rest"
    return Check("on_pending", "warn", detail, fix)


def approvals_check(settings: Settings) -> Check:
    """Who answers prompt rows; a warning where the agent's own client would."""
    config = settings.approvals
    if config.trust_client_answers:
        detail = (
            "approvals.trust_client_answers is on: the MCP client's own answer approves a "
            "call with no checkpoint, and an agent that holds its session can give that "
            "answer itself"
        )
        fix = (
            "keep it only for a single-user stdio gateway; elsewhere turn it off and name "
            "approvers (approvals.approvers, docs/approvals.md)"
        )
        return Check("approvals", "warn", detail, fix)
    names = [*config.approver_users, *(f"group {g}" for g in config.approver_groups)]
    names += [f"web:{n}" for n in config.web_approvers]
    if not names:
        detail = "no approver is configured: prompt rows through the service are refused"
        fix = "name approvers under approvals.approvers (docs/approvals.md)"
        return Check("approvals", "warn", detail, fix)
    return Check("approvals", "pass", f"prompt rows wait for {', '.join(names)}")
