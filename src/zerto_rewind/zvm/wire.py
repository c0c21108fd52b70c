"""Reading the ZVM's wire JSON: its timestamps, and typed getters for PascalCase fields.

Each getter raises ``ValueError`` when a required field is missing or has the wrong
type, and gives ``None`` for an absent optional field (older and newer ZVMs both parse).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "format_iso",
    "obj",
    "opt_int",
    "opt_obj",
    "opt_str",
    "opt_time",
    "parse_iso",
    "req_int",
    "req_str",
    "site_identifier",
]

# ---------------------------------------------------------------- timestamps

_ISO = re.compile(
    r"^(?P<base>\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?)"
    r"(?:\.(?P<frac>\d+))?(?P<tz>Z|z|[+-]\d{2}:?\d{2})?$"
)
_MS_DATE = re.compile(r"^/Date\((?P<ms>-?\d+)(?:[+-]\d{4})?\)/$")


def parse_iso(text: str) -> datetime:
    """Parse a ZVM timestamp into an aware UTC datetime.

    Accepts ``...Z``, ``+00:00``-style offsets, fractional seconds of any
    length (ZVM sometimes emits 7 digits) and naive values, which are UTC.
    Old ZVMs' ``/Date(ms)/`` also parses. Raises ``ValueError`` otherwise.
    """
    if not isinstance(text, str):  # wire data is untyped, whatever the annotation says
        msg = f"timestamp is not a string: {text!r}"  # type: ignore[unreachable]
        raise ValueError(msg)
    legacy = _MS_DATE.match(text.strip())
    if legacy:
        return datetime.fromtimestamp(int(legacy["ms"]) / 1000, UTC)
    m = _ISO.match(text.strip())
    if not m:
        msg = f"not an ISO-8601 timestamp: {text!r}"
        raise ValueError(msg)
    micros = int((m["frac"] or "0")[:6].ljust(6, "0"))
    tz = m["tz"] or "+00:00"
    tz = "+00:00" if tz in ("Z", "z") else tz
    parsed = datetime.fromisoformat(m["base"].replace(" ", "T") + tz)
    return (parsed + timedelta(microseconds=micros)).astimezone(UTC)


def format_iso(when: datetime) -> str:
    """Format ``when`` as ``YYYY-MM-DDTHH:MM:SS.fffZ`` (UTC) for query arguments."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    utc = when.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


# ---------------------------------------------------------------- field access


def obj(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        msg = f"{what}: expected a JSON object, got {type(data).__name__}"
        raise ValueError(msg)
    return data


def req_str(d: Mapping[str, Any], key: str) -> str:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        msg = f"missing or invalid {key!r}"
        raise ValueError(msg)
    return str(value)


def opt_str(d: Mapping[str, Any], key: str) -> str | None:
    value = d.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        msg = f"invalid {key!r}: {value!r}"
        raise ValueError(msg)
    return str(value)


def req_int(d: Mapping[str, Any], key: str) -> int:
    value = opt_int(d, key)
    if value is None:
        msg = f"missing {key!r}"
        raise ValueError(msg)
    return value


def opt_int(d: Mapping[str, Any] | None, key: str) -> int | None:
    value = None if d is None else d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"invalid {key!r}: {value!r}"
        raise ValueError(msg)
    return int(value)


def opt_obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = d.get(key)
    return value if isinstance(value, Mapping) else None


def opt_time(d: Mapping[str, Any], key: str) -> datetime | None:
    value = d.get(key)
    return None if value in (None, "") else parse_iso(value)


def site_identifier(d: Mapping[str, Any], key: str) -> str | None:
    """The ``identifier`` of a site link (``ProtectedSite``/``RecoverySite``), if given.

    Link objects keep lowercase keys on the wire (docs of the API reference, section 2).
    """
    found = opt_obj(d, key)
    value = found.get("identifier") if found is not None else None
    return value if isinstance(value, str) and value else None
