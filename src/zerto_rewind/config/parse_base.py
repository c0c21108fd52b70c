"""The parser's ground floor: the scalar checks, and the rules a :mod:`.schema` row names.

Every check raises :class:`~zerto_rewind.errors.ConfigError` naming the file, the
dotted key and what is wrong. Import-light, like the rest of ``config``.

A rule is ``rule(parser, value, key) -> parsed``: it checks ``value`` (the raw JSON of
the dotted ``key``) and returns what the settings hold, or fails through
``parser.fail(key, message)`` with what is wrong. Rules that take bounds are made by a
small factory (``number(minimum=1.0, inclusive=True)``); the rest are plain functions.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from .sections import DEFAULT_SITE_CADENCE_S, SITE_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    Rule = Callable[["ParserBase", Any, str], Any]

__all__ = [
    "ParserBase",
    "cadences",
    "choice",
    "count",
    "digests",
    "flag",
    "number",
    "page_url",
    "path",
    "redis_url",
    "scrypt_hashes",
    "site_kind_cadences",
    "site_types",
    "tag_bound",
    "tag_prefix",
    "text",
    "tool_pins",
    "user_names",
    "whole",
]


class ParserBase:
    """Validates the raw JSON; every error names the file and the dotted key."""

    def __init__(self, path: str, base_dir: str) -> None:
        self.path = path
        self.base_dir = base_dir

    def fail(self, key: str, message: str) -> NoReturn:
        raise ConfigError(message, path=self.path, key=key)

    # ---- scalar helpers

    def obj(self, value: Any, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"must be a JSON object, not {_kind(value)}")
        for name in value:
            if name not in allowed and not name.startswith(("_", "$")):
                self.fail(f"{key}.{name}" if key else name, _unknown_key(name, allowed))
        return value

    def string(self, value: Any, key: str, *, choices: tuple[str, ...] = ()) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"must be a non-empty string, not {_kind(value)}")
        if choices and value not in choices:
            self.fail(key, f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    def number(
        self, value: Any, key: str, *, minimum: float = 0.0, inclusive: bool = False
    ) -> float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or value != value or value in (float("inf"), float("-inf")):
            self.fail(key, f"must be a finite number, not {value!r}")
        if value < minimum or (value == minimum and not inclusive):
            bound = "at least" if inclusive else "greater than"
            self.fail(key, f"must be a number {bound} {minimum:g}, not {value!r}")
        try:
            return float(value)
        except OverflowError:
            self.fail(key, "is too large a number")

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {value!r}")
        return value

    def file_path(self, value: Any, key: str) -> str:
        text = os.path.expanduser(self.string(value, key))
        return text if os.path.isabs(text) else os.path.normpath(os.path.join(self.base_dir, text))

    # ---- sections

    def string_map(self, value: Any, key: str) -> dict[str, str]:
        if not isinstance(value, dict):
            self.fail(key, f"must be a JSON object of strings, not {_kind(value)}")
        for name, item in value.items():
            if not isinstance(item, str):
                self.fail(f"{key}.{name}", f"must be a string, not {_kind(item)}")
        return dict(value)


_HEX = "0123456789abcdef"


def _kind(value: Any) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
    }
    return names.get(type(value), "a number")


def _unknown_key(name: str, allowed: tuple[str, ...]) -> str:
    """``unknown key; did you mean 'timeout_s'? (known keys: …)`` for a near miss."""
    import difflib  # only on this error path: the hook parses the config on every call

    hint = ", ".join(allowed)
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}? (known keys: {hint})"
    return f"unknown key (known keys: {hint})"


# ---- the rules (see the module docstring)


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


def tool_pins(p: ParserBase, value: Any, key: str) -> dict[str, str]:
    """host tool name -> ``sha256:<64 hex>``, as ``catalog scan`` writes it."""
    pins = p.string_map(value, key)
    for name, pin in pins.items():
        where = f"{key}.{name}"
        if not name.startswith("mcp__") or name.count("__") < 2 or "*" in name:
            p.fail(where, "must be a host tool name like mcp__SERVER__TOOL (no patterns)")
        digest = pin.removeprefix("sha256:")
        if not pin.startswith("sha256:") or len(digest) != 64 or digest.strip(_HEX):
            p.fail(where, "must be sha256: and 64 hex digits, as `catalog scan` writes it")
    return pins


def redis_url(p: ParserBase, value: Any, key: str) -> str:
    """A ``redis://``, ``rediss://`` or ``unix://`` URL."""
    url = p.string(value, key)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        p.fail(key, "must be a redis://, rediss:// or unix:// URL of a Redis server")
    return url
