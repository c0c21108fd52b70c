"""A host's config file, read one way: the object it holds, or one error that says what to do.

Every file an agent host keeps (Claude Code's ``settings.json`` and
``.claude.json``, a project's ``.mcp.json``, the MCP hosts' files, the Codex,
Gemini CLI and Copilot CLI hook files) is read here by :func:`read_object_file`:

* absent: an empty object, and :attr:`ObjectFile.exists` is False;
* empty (or only whitespace): an empty object;
* otherwise it must parse in the host's syntax (strict JSON, JSON with comments
  and trailing commas, or TOML) and hold an object at the top level.

A file that fails is a :class:`~zerto_rewind.errors.ConfigError` naming the
file, what is wrong with it, and what to do; its content is never quoted (it
may hold credentials). Nothing here writes: such a file is never overwritten
by whoever reads it.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from .formats import parse_jsonc

__all__ = ["ObjectFile", "Syntax", "read_object_file"]

Syntax = Literal["json", "jsonc", "toml"]
_FIX = "fix it by hand or move it aside, then run this again (nothing was written)"
_LABEL = {"json": "JSON", "jsonc": "JSON", "toml": "TOML"}


@dataclass(frozen=True)
class ObjectFile:
    """A read file: its path, the object it holds, its text (None: absent), whether it had
    comments (JSON with comments only)."""

    path: str
    data: dict[str, Any]
    text: str | None
    had_comments: bool = False

    @property
    def exists(self) -> bool:
        return self.text is not None


def read_object_file(path: str, syntax: Syntax = "json") -> ObjectFile:
    """The object in the file at ``path``; ConfigError when it cannot be read or used."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return ObjectFile(path, {}, None)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        msg = f"cannot read it ({reason}); check its owner and mode, or {_FIX}"
        raise ConfigError(msg, path=path) from None
    if not text.strip():
        return ObjectFile(path, {}, text)
    data, had_comments = _parse(text, syntax, path)
    if not isinstance(data, dict):
        msg = f"must hold an object at the top level; {_FIX}"
        raise ConfigError(msg, path=path)
    return ObjectFile(path, data, text, had_comments)


def _parse(text: str, syntax: Syntax, path: str) -> tuple[Any, bool]:
    """(the parsed value, whether JSON comments or trailing commas were needed)."""
    try:
        if syntax == "toml":
            return tomllib.loads(text), False
        try:
            return json.loads(text), False
        except ValueError:
            if syntax != "jsonc":
                raise
            return parse_jsonc(text), True
    except ValueError as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        why = exc.args[0] if exc.args else "parse error"
        msg = f"not valid {_LABEL[syntax]} ({why}); {_FIX}"
        raise ConfigError(msg, path=path) from None
