"""The text formats of host config files: JSONC read with json5, TOML edited with tomlkit.

Library choices, both imported only when a file needs them (the doctor and the
installers pay for them, never the hook):

* **JSONC** (VS Code's ``mcp.json``: comments and trailing commas) is read with
  ``json5``. JSON5 is a strict superset of JSONC, the package is pure Python
  with no dependencies, typed, and maintained for a decade; the JSONC-only
  parsers on PyPI are young or unmaintained. Plain JSON is tried first with the
  stdlib, so ``json5`` loads only for a file that is not plain JSON. A rewrite
  edits the text in place (:func:`edit_json_servers`): only the server entries
  that changed are rewritten, every other byte (comments, layout, other keys:
  Gemini's ``security.auth``, hooks) is kept. When that cannot be done (a layout
  this editor does not know), the file is written as plain JSON and the
  installer says the comments were dropped.
* **TOML** (Codex's ``config.toml``) is read with the stdlib ``tomllib`` and
  edited with ``tomlkit``, which keeps comments, blank lines, key order and
  quoting of everything it is not asked to change; ``tomllib`` cannot write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard

from ..errors import ConfigError

if TYPE_CHECKING:
    from tomlkit.items import Table

__all__ = ["edit_json_servers", "parse_jsonc", "render_toml"]


def parse_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas; ValueError when it is not that either."""
    import json5

    return json5.loads(text)


@dataclass
class _Node:
    """A JSON value's span in the text; for an object, its members and closing brace."""

    start: int
    end: int
    members: dict[str, tuple[int, _Node]] | None = None  # key -> (key start, value)
    closing: int = -1
    last_end: int = -1  # where the last member (and its comma, if any) ends


class _Scanner:
    """Spans of a JSON-with-comments text: enough to replace one member's value in place."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self) -> NoReturn:
        msg = f"unexpected text at offset {self.pos}"
        raise ValueError(msg)

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos] in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    self.fail()
                self.pos = end + 2
            else:
                return

    def string(self) -> str:
        text, start = self.text, self.pos
        if start >= len(text) or text[start] != '"':
            self.fail()
        i = start + 1
        while i < len(text) and text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        if i >= len(text):
            self.fail()
        self.pos = i + 1
        value = json.loads(text[start : self.pos])
        if not isinstance(value, str):
            self.fail()
        return value

    def value(self) -> _Node:
        self.skip()
        start, text = self.pos, self.text
        if start >= len(text):
            self.fail()
        char = text[start]
        if char == "{":
            return self.obj()
        if char == "[":
            self.pos += 1
            self.skip()
            while self.pos < len(text) and text[self.pos] != "]":
                self.value()
                self.skip()
                if self.pos < len(text) and text[self.pos] == ",":
                    self.pos += 1
                    self.skip()
            if self.pos >= len(text):
                self.fail()
            self.pos += 1
            return _Node(start, self.pos)
        if char == '"':
            self.string()
            return _Node(start, self.pos)
        match = re.compile(r"-?[0-9.eE+-]+|true|false|null").match(text, start)
        if match is None:
            self.fail()
        self.pos = match.end()
        return _Node(start, self.pos)

    def obj(self) -> _Node:
        start, text = self.pos, self.text
        self.pos += 1
        members: dict[str, tuple[int, _Node]] = {}
        last_end = self.pos
        self.skip()
        while self.pos < len(text) and text[self.pos] != "}":
            key_start = self.pos
            key = self.string()
            self.skip()
            if self.pos >= len(text) or text[self.pos] != ":":
                self.fail()
            self.pos += 1
            node = self.value()
            members[key] = (key_start, node)
            last_end = node.end
            self.skip()
            if self.pos < len(text) and text[self.pos] == ",":
                self.pos += 1
                last_end = self.pos
                self.skip()
            elif self.pos < len(text) and text[self.pos] != "}":
                self.fail()
        if self.pos >= len(text):
            self.fail()
        closing = self.pos
        self.pos += 1
        return _Node(start, self.pos, members, closing, last_end)


def _indent_at(text: str, pos: int) -> str:
    line = text[text.rfind("\n", 0, pos) + 1 : pos]
    return line[: len(line) - len(line.lstrip())]


def _render(value: Any, indent: str) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert_member(text: str, obj: _Node, key: str, value: Any) -> tuple[int, int, str]:
    """The edit (start, end, new text) that adds ``key`` as ``obj``'s last member."""
    assert obj.members is not None
    if obj.members:
        first_key = next(iter(obj.members.values()))[0]
        indent = _indent_at(text, first_key)
        comma = "" if text[obj.last_end - 1] == "," else ","
    else:
        indent = _indent_at(text, obj.start) + "  "
        comma = ""
    member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent)}"
    return obj.last_end, obj.last_end, f"{comma}\n{indent}{member}"


def edit_json_servers(
    original: str, scope: tuple[str, ...], key: str, servers: Mapping[str, Any]
) -> str | None:
    """``original`` with the servers object at ``scope``/``key`` changed to ``servers``.

    Only the members that differ are rewritten (each at its own indent); every
    other byte, comments included, is kept. None when this cannot be done in
    place (a JSON5 layout the scanner does not read, a scope that is missing, a
    server removed): the caller writes the whole file then.
    """
    try:
        scanner = _Scanner(original)
        root = scanner.value()
        scanner.skip()
        if scanner.pos != len(original) or root.members is None:
            return None
        holder = root
        for part in scope:
            found = holder.members.get(part) if holder.members is not None else None
            if found is None or found[1].members is None:
                return None
            holder = found[1]
        edits: list[tuple[int, int, str]] = []
        current = holder.members.get(key) if holder.members is not None else None
        if current is None:
            edits.append(_insert_member(original, holder, key, dict(servers)))
        else:
            node = current[1]
            if node.members is None or any(name not in servers for name in node.members):
                return None
            indent = _indent_at(original, current[0])
            for name, value in servers.items():
                old = node.members.get(name)
                if old is None:
                    edits.append(_insert_member(original, node, name, value))
                    continue
                key_start, old_value = old
                if parse_jsonc(original[old_value.start : old_value.end]) != value:
                    inner = _indent_at(original, key_start) or indent + "  "
                    edits.append((old_value.start, old_value.end, _render(value, inner)))
    except ValueError:
        return None
    text = original
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text


def render_toml(original: str, data: Mapping[str, Any], path: str) -> str:
    """``original`` with its ``mcp_servers`` tables changed to match ``data``; the rest kept.

    A server written as an inline table or with dotted keys is refused rather than
    reshaped (ConfigError): the operator wrote it that way on purpose.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(original)
    except TOMLKitError as exc:
        msg = f"not valid TOML ({exc})"
        raise ConfigError(msg, path=path) from None
    new_servers = data.get("mcp_servers", {})
    servers = doc.get("mcp_servers")
    if servers is None:
        if not new_servers:
            return original
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    old_servers = servers.unwrap()
    for name in [*old_servers, *(n for n in new_servers if n not in old_servers)]:
        if old_servers.get(name) == new_servers.get(name):
            continue
        if name not in old_servers:
            servers[name] = tomlkit.item(new_servers[name])
            continue
        table = servers[name]
        if not _is_plain_table(table):
            msg = (
                f"server {name!r} is written as an inline table or dotted keys, which this "
                f"installer does not edit; write it as a [mcp_servers.{name}] table first"
            )
            raise ConfigError(msg, path=path)
        if name in new_servers:
            servers[name] = _rebuilt(table, new_servers[name])
        else:
            trivia = _closing_trivia(table)
            del servers[name]
            for item in trivia:
                servers.add(item)
    return tomlkit.dumps(doc)


def _is_plain_table(item: object) -> TypeGuard[Table]:
    from tomlkit.items import Table

    return isinstance(item, Table) and not item.is_super_table()


def _rebuilt(old: Table, new: Mapping[str, Any]) -> Table:
    """A table holding ``new``: lines ``old`` already had keep their comment and layout.

    New scalar keys go before sub-tables (TOML needs them under their own
    header), and the comments that closed ``old`` (tomlkit files a comment above
    the next ``[header]`` under the table before it) close the new one.
    """
    import tomlkit

    table = tomlkit.table()
    scalars = {k: v for k, v in new.items() if not isinstance(v, dict)}
    subtables = {k: v for k, v in new.items() if isinstance(v, dict)}
    for key, value in scalars.items():
        before = old.get(key)
        table.add(key, before if before is not None and _unwrap(before) == value else value)
    for key, value in subtables.items():
        before = old.get(key)
        if _is_plain_table(before):
            table.add(key, _rebuilt(before, value))
        else:
            table.add(key, tomlkit.item(value))
    for trivia in _closing_trivia(old):
        table.add(trivia)
    return table


def _closing_trivia(table: Table) -> list[Any]:
    """The comments and blank lines at the end of ``table`` (and of its last sub-table)."""
    from tomlkit.items import Comment, Whitespace

    found: list[Any] = []
    for key, item in reversed(table.value.body):
        if key is None and isinstance(item, Comment | Whitespace):
            found.insert(0, item)
            continue
        if _is_plain_table(item):
            found = _closing_trivia(item) + found
        break
    return found


def _unwrap(item: Any) -> Any:
    return item.unwrap() if hasattr(item, "unwrap") else item
