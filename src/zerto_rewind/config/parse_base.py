"""The parser's ground floor: the file, the dotted key, and the scalar checks.

Every check raises :class:`~zerto_rewind.errors.ConfigError` naming the file, the
dotted key and what is wrong. Import-light, like the rest of ``config``.
"""

from __future__ import annotations

import os

from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["ParserBase"]


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
