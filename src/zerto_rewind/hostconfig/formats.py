"""The text formats of host config files: JSONC read with json5, TOML edited with tomlkit.

Library choices, both imported only when a file needs them (the doctor and the
installers pay for them, never the hook):

* **JSONC** (VS Code's ``mcp.json``: comments and trailing commas) is read with
  ``json5``. JSON5 is a strict superset of JSONC, the package is pure Python
  with no dependencies, typed, and maintained for a decade; the JSONC-only
  parsers on PyPI are young or unmaintained. Plain JSON is tried first with the
  stdlib, so ``json5`` loads only for a file that is not plain JSON. A rewrite is
  plain JSON: the comments are dropped, and the installer says so.
* **TOML** (Codex's ``config.toml``) is read with the stdlib ``tomllib`` and
  edited with ``tomlkit``, which keeps comments, blank lines, key order and
  quoting of everything it is not asked to change; ``tomllib`` cannot write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import ConfigError

if TYPE_CHECKING:
    from tomlkit.items import Table

__all__ = ["parse_jsonc", "render_toml"]


def parse_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas; ValueError when it is not that either."""
    import json5

    return json5.loads(text)


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
