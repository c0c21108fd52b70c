"""The read-only fast lane's wire: one strict parse of a request, and its one classification.

A ``tools/call`` body is parsed once, strictly: a duplicated key anywhere, a bare
``NaN`` or ``Infinity``, or anything that is not one plain request object makes
the fast lane decline, and the call takes the full path (the SDK's server, which
parses it once itself). The fast lane classifies the call from that parse and
forwards values taken from it, re-serialized; the raw bytes it read are never
sent on. So what was classified is what runs: no second reader can see another
tool name or other arguments in the same bytes.

:func:`takes` is the one place the fast lane asks which calls it may answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_types import SERVER_INFO_META_KEY

from ..core.catalog import READ_ONLY, classify
from ..errors import ConfigError
from .calls import host_tool_name

if TYPE_CHECKING:
    from ..config.settings import CatalogSettings
    from .pins import PinGate

__all__ = [
    "CALL_MARKER",
    "STRICT_MESSAGE_KEY",
    "LaneCall",
    "StrictJsonError",
    "in_clients_era",
    "lane_call",
    "strict_json",
    "takes",
]

# Where TokenLimits leaves a ``tools/call`` body it parsed strictly, for the fast lane to
# take (it pops it): one parse of a read-only call's body, not one per layer.
STRICT_MESSAGE_KEY = "zerto_rewind.strict_message"
# A body without this cannot be a tools/call: not parsed strictly (nor by the lane).
CALL_MARKER = b'"tools/call"'

# What a plain call may carry; anything else (inputResponses, requestState, a task)
# is the full path's to read.
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_RESULT_TYPE = "resultType"


class StrictJsonError(ValueError):
    """A body the fast lane will not read: a duplicated key, or a non-finite number."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        msg = "a key appears twice in one object"
        raise StrictJsonError(msg)
    return obj


def _constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise StrictJsonError(msg)


def strict_json(body: bytes) -> Any:
    """``body`` as JSON, refusing duplicated keys (at any depth) and NaN/Infinity.

    Raises ValueError (StrictJsonError, or the decoder's own for bad JSON or UTF-8).
    """
    return json.loads(body, object_pairs_hook=_pairs, parse_constant=_constant)


@dataclass(frozen=True, slots=True)
class LaneCall:
    """One plain ``tools/call``, as parsed once."""

    request_id: str | int
    tool: str
    arguments: dict[str, Any]
    message: dict[str, Any]  # the whole parsed request (the 2026-07-28 ladder reads it)


def lane_call(message: Any) -> LaneCall | None:
    """The call in a parsed body, or None when it is anything but one plain ``tools/call``."""
    if not isinstance(message, dict) or not message.keys() <= _ENVELOPE_KEYS:
        return None
    if message.get("jsonrpc") != "2.0" or message.get("method") != "tools/call":
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    params = message.get("params")
    if not isinstance(params, dict) or not params.keys() <= _PARAM_KEYS:
        return None
    tool = params.get("name")
    arguments = params.get("arguments", {})
    meta = params.get("_meta", {})
    if not isinstance(tool, str) or not tool or not isinstance(arguments, dict):
        return None
    if not isinstance(meta, dict):
        return None
    return LaneCall(request_id, tool, arguments, message)


def takes(
    catalog: CatalogSettings, pins: PinGate, upstream: str, tool: str, arguments: dict[str, Any]
) -> bool:
    """Whether the full path would answer this call read-only, by the same rules.

    The gateway's ``decide``: the catalog's classification (arguments included: a
    read-only tool given a host path is not read-only), and a tool of a pinned
    upstream counts only while it matches its reviewed pin. Anything else, or a
    catalog that cannot classify, is the full path's.
    """
    name = host_tool_name(upstream, tool)
    if pins.prefixes and name not in pins.reviewed and name.startswith(pins.prefixes):
        return False
    try:
        verdict = classify(name, arguments, catalog)
    except ConfigError:
        return False
    return verdict.kind == READ_ONLY


def in_clients_era(result: dict[str, Any], modern: bool, server_info: dict[str, Any]) -> None:
    """Shape an upstream's tool result, in place, for the client's era, as the SDK's server
    shapes the full path's: the upstream's era may be the other one.

    A 2026-07-28 client requires ``resultType``, which a handshake-era server (mcvsphere)
    never sends; it gets ``complete`` and, unless the upstream stamped its own, the
    gateway's ``serverInfo`` in ``_meta``. A 2025-11-25 client's schema has no
    ``resultType``: a 2026-07-28 upstream's is dropped.
    """
    if not modern:
        result.pop(_RESULT_TYPE, None)
        return
    result.setdefault(_RESULT_TYPE, "complete")
    meta = result.get("_meta")
    if meta is None:
        result["_meta"] = {SERVER_INFO_META_KEY: server_info}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        result["_meta"] = {**meta, SERVER_INFO_META_KEY: server_info}
