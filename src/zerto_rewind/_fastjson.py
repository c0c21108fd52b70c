"""JSON decoding without importing :mod:`json`.

``import json`` pulls in ``re``, ``enum`` and ``functools`` — several
milliseconds that the hook would pay on every read-only tool call, where the
whole budget is a few milliseconds over bare interpreter start-up. The C
scanner behind :mod:`json` lives in the built-in ``_json`` module, which costs
nothing to import, so the hook's fast path decodes with it directly.
"""

from __future__ import annotations

import _json  # CPython's C accelerator behind json

__all__ = ["JSONDecodeError", "loads", "loads_hook_input"]

_WHITESPACE = " \t\n\r"


class JSONDecodeError(ValueError):
    """The text is not one valid JSON document."""


def _reject_constant(name: str) -> object:
    # NaN and Infinity are not JSON; the stdlib accepts them, we don't.
    msg = f"invalid JSON constant {name}"
    raise JSONDecodeError(msg)


class _Context:
    # The attributes the C scanner reads from its context object.
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_reject_constant)
    memo: dict[str, str]

    def __init__(self) -> None:
        self.memo = {}


def loads(text: str | bytes) -> object:
    """Decode one JSON document; raise JSONDecodeError (a ValueError) on anything else."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
            raise JSONDecodeError(msg) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    start = _skip_ws(text, 0)
    if start == len(text):
        msg = "empty input, expected a JSON document"
        raise JSONDecodeError(msg)
    scanner = _json.make_scanner(_Context())  # type: ignore[arg-type]  # duck-typed context
    try:
        value, end = scanner(text, start)
    except (StopIteration, ValueError, SystemError, RecursionError):
        # The C scanner reports syntax errors through json.decoder, which it
        # only finds if already imported (else SystemError). Errors are the
        # slow path: let the stdlib decoder produce the precise message.
        raise _stdlib_error(text) from None
    end = _skip_ws(text, end)
    if end != len(text):
        msg = f"extra data after the JSON document at char {end}"
        raise JSONDecodeError(msg)
    return value


def _stdlib_error(text: str) -> JSONDecodeError:
    import json

    try:
        json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        return JSONDecodeError("JSON nested too deeply")
    except ValueError as exc:
        return JSONDecodeError(str(exc))
    return JSONDecodeError("JSON the fast decoder could not read")


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def loads_hook_input(data: bytes, max_bytes: int) -> dict[str, object]:
    """A hook's stdin as a JSON object of at most ``max_bytes``; ValueError says what is wrong.

    Every hook (Claude Code's and the other hosts') reads its payload this way and
    turns the ValueError into its host's blocking error.
    """
    if len(data) > max_bytes:
        msg = f"hook input is {len(data)} bytes, more than the {max_bytes} accepted"
        raise ValueError(msg)
    try:
        raw = loads(data)
    except ValueError as exc:
        msg = f"hook input is not valid JSON: {exc}"
        raise ValueError(msg) from None
    if not isinstance(raw, dict):
        msg = "hook input must be a JSON object"
        raise ValueError(msg)
    return raw
