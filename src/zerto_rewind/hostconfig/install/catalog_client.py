"""What the guard service tells an installer: its catalog and its budget (``GET /v1/catalog``).

``install claude-code --service URL`` compiles the thin hook's matcher from the
service's own catalog (so the hook starts for every call the service guards) and
plans the hook's budget and the host's timeout above the service's guard budget.
The request goes through the one client of the service
(:func:`zerto_rewind.service_client.request_json`), as the hooks' own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...config.settings import DEFAULT_GUARD_TIMEOUT_S, CatalogSettings, ToolSpec
from ...errors import ConfigError
from ...service_client import ServiceError, request_json

__all__ = ["ServiceCatalog", "fetch_catalog", "service_options", "thin_budget"]

# How long the thin hook waits beyond the service's own guard budget: the service
# answers (deny, with its reason) just before its budget; the round trip needs room.
THIN_MARGIN_S = 5.0
FETCH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServiceCatalog:
    """The service's catalog (names only: no vm_arg, no secret) and its guard budget."""

    catalog: CatalogSettings
    guard_timeout_s: float


def service_options(
    service: str,
    *,
    token_file: str | None = None,
    ca_file: str | None = None,
    service_user: str | None = None,
) -> dict[str, str]:
    """The thin hook's options for ``service`` (as its command line gives them).

    ``service_user`` (a uid or a name): on a unix socket, the client sends nothing
    to a listener of another uid, and nothing at all without it.
    """
    opts = {"service": service}
    if service_user:
        opts["service_user"] = service_user
    if token_file:
        opts["token_file"] = token_file
    if ca_file:
        opts["ca_file"] = ca_file
    return opts


def fetch_catalog(opts: dict[str, str], *, timeout_s: float = FETCH_TIMEOUT_S) -> ServiceCatalog:
    """``GET /v1/catalog`` of the service; ConfigError (naming the service) when it fails."""
    service = opts["service"]
    try:
        answer = request_json(opts, "GET", "/v1/catalog", timeout_s=timeout_s)
    except ServiceError as exc:
        msg = f"the guard service {service} did not give its catalog: {exc}"
        raise ConfigError(msg) from None
    return ServiceCatalog(_catalog(answer, service), _budget(answer))


def thin_budget(guard_timeout_s: float) -> int:
    """The thin hook's ``--budget``: the service's guard budget plus the round trip."""
    return math.ceil(guard_timeout_s + THIN_MARGIN_S)


def _catalog(answer: dict[str, Any], service: str) -> CatalogSettings:
    read_only = answer.get("read_only_tools", [])
    tools = answer.get("tools", [])
    if not _names(read_only) or not _names(tools):
        msg = f"the guard service {service} answered /v1/catalog without lists of tool names"
        raise ConfigError(msg)
    unknown = answer.get("unknown_tools")
    return CatalogSettings(
        tuple(read_only),
        {name: ToolSpec(name, (), None) for name in tools},
        None,
        unknown if isinstance(unknown, str) else "prompt",
        "service",
    )


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _budget(answer: dict[str, Any]) -> float:
    value = answer.get("guard_timeout_s")
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return DEFAULT_GUARD_TIMEOUT_S  # a service from before the field: its default
    return float(value)
