"""The Zerto Virtual Manager client: Keycloak tokens, VMs, VPGs, checkpoints, tasks, recovery.

The client and the token cache import httpx, so they are loaded on first use:
``from zerto_rewind.zvm.models import tag_refusal`` stays cheap for the hook.
The token cache can live in Redis for gateway replicas (``token_redis``, over
``redis_conn``, which the core's Redis state uses too); ``redis`` itself is
imported only when such a cache or state is opened.

May import only the base modules (``errors``, ``fsutil``); never the guard or a door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .models import (
    VPG_STATUS_NAMES,
    VPG_SUBSTATUS_NAMES,
    Checkpoint,
    Task,
    TaskState,
    VmRef,
    Vpg,
    format_iso,
    parse_iso,
    site_kind,
    tag_refusal,
)

if TYPE_CHECKING:
    from .auth import TokenCache, TokenProvider
    from .client import ZvmClient

__all__ = [
    "VPG_STATUS_NAMES",
    "VPG_SUBSTATUS_NAMES",
    "Checkpoint",
    "Task",
    "TaskState",
    "TokenCache",
    "TokenProvider",
    "VmRef",
    "Vpg",
    "ZvmClient",
    "format_iso",
    "parse_iso",
    "site_kind",
    "tag_refusal",
]

_LAZY = {"TokenCache": ".auth", "TokenProvider": ".auth", "ZvmClient": ".client"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
