"""The text formats of host config files: JSONC (comments, trailing commas) and TOML editing."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

__all__ = [
    "render_toml",
    "strip_jsonc",
]


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas → JSON (strings are left alone)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    joined = "".join(out)
    # drop a comma followed only by whitespace and a closing bracket (outside strings)
    result: list[str] = []
    i, n = 0, len(joined)
    while i < n:
        ch = joined[i]
        if ch == '"':
            j = i + 1
            while j < n and joined[j] != '"':
                j += 2 if joined[j] == "\\" else 1
            result.append(joined[i : j + 1])
            i = j + 1
            continue
        if ch == ",":
            j = i + 1
            while j < n and joined[j] in " \t\r\n":
                j += 1
            if j < n and joined[j] in "}]":
                i += 1
                continue
        result.append(ch)
        i += 1
    return "".join(result)


def render_toml(original: str, data: Mapping[str, Any], path: str) -> str:
    """``original`` with its ``mcp_servers`` tables rewritten to match ``data``."""
    old = tomllib.loads(original) if original.strip() else {}
    text = original
    old_servers = old.get("mcp_servers", {}) if isinstance(old.get("mcp_servers"), dict) else {}
    new_servers = data.get("mcp_servers", {})
    for name in list(old_servers) + [n for n in new_servers if n not in old_servers]:
        if old_servers.get(name) != new_servers.get(name):
            text = _replace_toml_server(text, name, new_servers.get(name), path)
    return text


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*(?P<key>[^\[\]#]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY_PART = re.compile(
    r"\s*(?:\"(?P<basic>(?:[^\"\\]|\\.)*)\"|'(?P<literal>[^']*)'|(?P<bare>[A-Za-z0-9_-]+))\s*"
)


def _toml_key_parts(key: str) -> list[str] | None:
    parts: list[str] = []
    pos = 0
    while True:
        match = _TOML_KEY_PART.match(key, pos)
        if match is None:
            return None
        if match.group("basic") is not None:
            try:
                parts.append(json.loads(f'"{match.group("basic")}"'))
            except ValueError:
                return None
        else:
            parts.append(match.group("literal") or match.group("bare") or "")
        pos = match.end()
        if pos == len(key):
            return parts
        if key[pos] != ".":
            return None
        pos += 1


def _replace_toml_server(text: str, name: str, entry: Any, path: str) -> str:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    for i, line in enumerate(lines):
        header = _TOML_HEADER.match(line)
        if header is None:
            continue
        if start is not None:
            blocks.append((start, i))
            start = None
        parts = _toml_key_parts(header.group("key"))
        if parts is not None and parts[:2] == ["mcp_servers", name]:
            start = i
    if start is not None:
        blocks.append((start, len(lines)))
    existed = bool(blocks)
    if not existed and name in (tomllib.loads(text).get("mcp_servers") or {}):
        msg = (
            f"server {name!r} is written as an inline table or dotted keys, which this "
            f"installer does not edit; write it as a [mcp_servers.{name}] table first"
        )
        raise ConfigError(msg, path=path)
    new_block = _toml_server_block(name, entry) if entry is not None else []
    if not existed:
        prefix = "".join(lines)
        sep = "\n" if prefix.strip() else ""
        return prefix + sep + "".join(new_block)
    # Comments and blank lines just above the next header belong to it: give them back.
    # (Not between two of the server's own tables: those lines go with it.)
    starts = {a for a, _ in blocks}
    trimmed = []
    for a, b in blocks:
        while (
            b not in starts
            and b > a + 1
            and (not lines[b - 1].strip() or lines[b - 1].lstrip().startswith("#"))
        ):
            b -= 1
        trimmed.append((a, b))
    out: list[str] = []
    for i, line in enumerate(lines):
        if i == trimmed[0][0]:
            out += new_block
            following = trimmed[0][1]
            while any(a <= following < b for a, b in trimmed):
                following += 1
            if new_block and following < len(lines) and lines[following].strip():
                out.append("\n")
        if not any(a <= i < b for a, b in trimmed):
            out.append(line)
    return "".join(out)


def _toml_server_block(name: str, entry: Mapping[str, Any]) -> list[str]:
    table = f"mcp_servers.{_toml_key(name)}"
    lines = [f"[{table}]\n"]
    subtables: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in entry.items():
        if isinstance(value, dict):
            subtables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}\n")
    for key, value in subtables:
        lines.append(f"\n[{table}.{_toml_key(key)}]\n")
        lines += [f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in value.items()]
    return lines


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            msg = "cannot write a non-finite number to TOML"
            raise ConfigError(msg)
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    msg = f"cannot write a {type(value).__name__} to TOML"
    raise ConfigError(msg)
