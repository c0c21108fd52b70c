"""How one key's value is read: the rules a :mod:`.schema` row names.

A rule is ``rule(parser, value, key) -> parsed``: it checks ``value`` (the raw JSON of
the dotted ``key``) and returns what the settings hold, or fails through
``parser.fail(key, message)`` with what is wrong. Rules that take bounds are made by a
small factory (``number(minimum=1.0, inclusive=True)``); the rest are plain functions.
"""

from __future__ import annotations

from .parse_base import _HEX, _kind
from .sections import DEFAULT_SITE_CADENCE_S, SITE_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .parse_base import ParserBase

    Rule = Callable[[ParserBase, Any, str], Any]

__all__ = [
    "cadences",
    "choice",
    "count",
    "digests",
    "flag",
    "number",
    "page_url",
    "path",
    "scrypt_hashes",
    "site_kind_cadences",
    "site_types",
    "tag_bound",
    "tag_prefix",
    "text",
    "user_names",
    "whole",
]


def number(
    *, minimum: float = 0.0, inclusive: bool = False, at_most: float | None = None, why: str = ""
) -> Rule:
    """A finite number above ``minimum`` (or at it, ``inclusive``), at most ``at_most``."""

    def rule(p: ParserBase, value: Any, key: str) -> float:
        found = p.number(value, key, minimum=minimum, inclusive=inclusive)
        if at_most is not None and found > at_most:
            p.fail(key, f"must be at most {at_most:g} seconds{why}")
        return found

    return rule


def count(*, minimum: float = 1.0) -> Rule:
    """A whole number of at least ``minimum`` (``5.0`` is 5; ``2.5`` is refused)."""

    def rule(p: ParserBase, value: Any, key: str) -> int:
        found = p.number(value, key, minimum=minimum, inclusive=True)
        if found != int(found):
            p.fail(key, f"must be a whole number, not {value!r}")
        return int(found)

    return rule


def whole(lowest: int, highest: int) -> Rule:
    """A JSON integer from ``lowest`` to ``highest`` (no float, no boolean)."""

    def rule(p: ParserBase, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
            p.fail(key, f"must be a whole number from {lowest} to {highest}, not {value!r}")
        return value

    return rule


def choice(choices: tuple[str, ...]) -> Rule:
    """One of ``choices``, exactly."""

    def rule(p: ParserBase, value: Any, key: str) -> str:
        return p.string(value, key, choices=choices)

    return rule


def flag(p: ParserBase, value: Any, key: str) -> bool:
    """``true`` or ``false``."""
    return p.boolean(value, key)


def text(p: ParserBase, value: Any, key: str) -> str:
    """A non-empty string."""
    return p.string(value, key)


def path(p: ParserBase, value: Any, key: str) -> str:
    """A file path; a relative one resolves against the config file's directory."""
    return p.file_path(value, key)


def digests(p: ParserBase, value: Any, key: str) -> dict[str, str]:
    """name -> the SHA-256 hex digest of a token (``gateway --hash-token``), lower-cased."""
    found = p.string_map(value, key)
    for who, digest in found.items():
        if len(digest) != 64 or digest.lower().strip(_HEX):
            p.fail(f"{key}.{who}", "must be the SHA-256 hex digest of a token")
    return {who: digest.lower() for who, digest in found.items()}


def scrypt_hashes(p: ParserBase, value: Any, key: str) -> dict[str, str]:
    """login -> a password hash from ``zerto-rewind approvals hash-password``."""
    found = p.string_map(value, key)
    for who, hashed in found.items():
        if not hashed.startswith("scrypt$") or hashed.count("$") != 5:
            msg = "must be a password hash from `zerto-rewind approvals hash-password`"
            p.fail(f"{key}.{who}", msg)
    return found


def user_names(p: ParserBase, value: Any, key: str) -> tuple[str, ...]:
    """A list of unix user or group names."""
    if not isinstance(value, list):
        p.fail(key, f"must be a list of unix user or group names, not {_kind(value)}")
    return tuple(p.string(item, f"{key}[{i}]") for i, item in enumerate(value))


def page_url(p: ParserBase, value: Any, key: str) -> str:
    """The approvals page as a person reaches it: an http(s):// URL, without a final /."""
    page = p.string(value, key)
    if not page.startswith(("https://", "http://")):
        p.fail(key, "must be an http(s):// URL of the approvals page")
    return page.rstrip("/")


def tag_prefix(p: ParserBase, value: Any, key: str) -> str:
    """The first word of every tag: at most 40 characters (ZVM limits tag length)."""
    prefix = p.string(value, key)
    if len(prefix) > 40:
        p.fail(key, "must be at most 40 characters (ZVM limits tag length)")
    return prefix


def tag_bound(p: ParserBase, value: Any, key: str) -> int | None:
    """A whole number of tags of at least 1, or null for no bound."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        p.fail(
            key,
            f"must be a whole number of tags of at least 1, or null for no bound, not {value!r}",
        )
    return value


def cadences(p: ParserBase, value: Any, key: str) -> dict[str, float]:
    """name -> seconds, each greater than 0."""
    if not isinstance(value, dict):
        p.fail(key, f"must be an object of name -> seconds, not {_kind(value)}")
    return {name: p.number(v, f"{key}.{name}") for name, v in value.items()}


def site_kind_cadences(p: ParserBase, value: Any, key: str) -> dict[str, float]:
    """site kind -> seconds, laid over the defaults of every kind."""
    found = cadences(p, value, key)
    for kind in found:
        if kind not in SITE_KINDS:
            p.fail(f"{key}.{kind}", f"unknown site kind; use {', '.join(SITE_KINDS)}")
    return {**DEFAULT_SITE_CADENCE_S, **found}


def site_types(p: ParserBase, value: Any, key: str) -> dict[int, str]:
    """Entities.Protected number (a string of digits) -> site kind."""
    if not isinstance(value, dict):
        p.fail(key, "must be an object of entity type number -> site kind")
    result: dict[int, str] = {}
    for number_text, kind in value.items():
        where = f"{key}.{number_text}"
        if not (number_text.isascii() and number_text.isdigit()):
            p.fail(where, 'keys are Entities.Protected numbers such as "3"')
        result[int(number_text)] = p.string(kind, where, choices=SITE_KINDS)
    return result
