"""Compile the catalog into a Claude Code ``PreToolUse`` matcher.

Pure: no I/O. The host tests the matcher with JavaScript's ``RegExp.test``
against the tool name (unanchored), so the regex decides which calls start
the hook at all. The compiled matcher

* never matches a read-only tool (no process is started for it),
* matches every mutating and every *unlisted* tool of each covered MCP server,
  so a tool nobody classified still reaches the guard,
* follows the catalog's precedence exactly (see :func:`catalog.classify`):
  an exact name in ``tools`` beats ``read_only_tools``; an exact read-only name
  beats a ``tools`` glob; a ``tools`` glob beats a read-only glob.

Covered means: a name under ``mcp__<server>__`` for every server any catalog
entry names literally, or a name that a ``tools`` entry matches (``Bash``,
``mcp__*__delete_vm``). With ``all_tools=True`` every tool is covered.

Only constructs JavaScript and Python's :mod:`re` read identically are used:
``^ $ . * | (?:) (?!)`` and backslash escapes of syntax characters. Tool names
are assumed to hold no line terminators (``.`` differs on ``\\r`` between the
two); MCP tool names never do.

Example: tools ``{mcp__vsphere__power_off_vm}``, read-only
``[mcp__vsphere__list_vms, mcp__vsphere__get_*]`` compile to
``^mcp__vsphere__(?!(?:list_vms|get_.*)$)``.
"""

from __future__ import annotations

from ..config.settings import CatalogSettings
from ..core.catalog import glob_match
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["compile_matcher", "covered_servers", "glob_to_regex", "js_escape"]

MCP_PREFIX = "mcp__"
# Characters with a meaning in a JS (or Python) regex outside a class; only
# these are escaped, because JS's unicode mode rejects needless escapes.
_SYNTAX = frozenset("^$\\.*+?()[]{}|")


def compile_matcher(catalog: CatalogSettings, *, all_tools: bool = False) -> str:
    """The matcher regex for ``catalog`` (see the module docstring)."""
    if all_tools:
        exclusion = _exclusion(catalog, "")
        return f"^(?!{exclusion}).*" if exclusion else ".*"
    servers = covered_servers(catalog)
    prefixes = [f"{MCP_PREFIX}{server}__" for server in servers]
    alternatives = []
    for prefix in prefixes:
        exclusion = _exclusion(catalog, prefix)
        alternatives.append(js_escape(prefix) + (f"(?!{exclusion})" if exclusion else ""))
    for key in catalog.tools:
        if not key.startswith(tuple(prefixes)):
            alternatives.append(_tool_alternative(catalog, key))
    alternatives = list(dict.fromkeys(alternatives))
    if not alternatives:
        msg = (
            "the catalog names no MCP server and no tool, so the hook would never run; "
            "add tools / read_only_tools, or install with --all-tools"
        )
        raise ConfigError(msg, key="tools")
    if len(alternatives) == 1:
        return "^" + alternatives[0]
    return "^(?:" + "|".join(alternatives) + ")"


def covered_servers(catalog: CatalogSettings) -> list[str]:
    """MCP servers named literally by a catalog entry (``mcp__<server>__...``), in order."""
    servers: dict[str, None] = {}
    for entry in (*catalog.read_only, *catalog.tools):
        server = _server_of(entry)
        if server is not None:
            servers.setdefault(server, None)
    return list(servers)


def _server_of(entry: str) -> str | None:
    if not entry.startswith(MCP_PREFIX):
        return None
    end = entry.find("__", len(MCP_PREFIX))
    server = entry[len(MCP_PREFIX) : end] if end > len(MCP_PREFIX) else ""
    if not server or _is_glob(server):
        return None
    return server


def js_escape(text: str) -> str:
    """Escape regex syntax characters (JS and Python agree on these escapes)."""
    return "".join("\\" + ch if ch in _SYNTAX else ch for ch in text)


def glob_to_regex(pattern: str) -> str:
    """A catalog glob as a regex body: ``*`` → ``.*``, ``?`` → ``.``, the rest literal."""
    return "".join({"*": ".*", "?": "."}.get(ch) or js_escape(ch) for ch in pattern)


def _tool_alternative(catalog: CatalogSettings, key: str) -> str:
    """A ``tools`` entry outside every covered server: ``Bash``, ``mcp__*__delete_vm``."""
    if not _is_glob(key):
        return js_escape(key) + "$"  # an exact tools name is never read-only
    # Names this glob matches are mutating unless listed exactly as read-only.
    read_only = [r for r in catalog.read_only if glob_match(key, r) and r not in catalog.tools]
    guard = f"(?!{_alternation([js_escape(r) for r in read_only])}$)" if read_only else ""
    return guard + glob_to_regex(key) + "$"


def _exclusion(catalog: CatalogSettings, prefix: str) -> str:
    """A regex for the read-only names that start with ``prefix``, read after the prefix.

    classify() says read-only exactly when: not an exact ``tools`` name, and
    (an exact read-only name, or matched by a read-only glob but by no
    ``tools`` glob). Each part is written for the rest of the name.
    """
    tool_globs = [k for k in catalog.tools if _is_glob(k)]
    ro_globs = [r for r in catalog.read_only if _is_glob(r)]
    # Read-only entries as literal names: plain ones always; a glob's own text only
    # where a tools glob would otherwise take it (the exact name wins).
    ro_literals = [
        r
        for r in catalog.read_only
        if r.startswith(prefix) and (not _is_glob(r) or any(glob_match(t, r) for t in tool_globs))
    ]
    ro_residuals = _unique(res for r in ro_globs for res in _residuals(r, prefix))
    # Exact tools names a read-only entry would otherwise take (a tools glob's own
    # text is already kept out of the read-only globs by that glob itself).
    tool_literals = [
        t
        for t in catalog.tools
        if t.startswith(prefix)
        and (
            t in catalog.read_only or (not _is_glob(t) and any(glob_match(r, t) for r in ro_globs))
        )
    ]
    tool_residuals = _unique(
        res
        for t in tool_globs
        for res in _residuals(t, prefix)
        if any(not _disjoint(res, ro) for ro in ro_residuals)
    )
    cut = len(prefix)
    literal_alts = [js_escape(r[cut:]) for r in ro_literals]
    glob_alts = [glob_to_regex(r) for r in ro_residuals]
    if not literal_alts and not glob_alts:
        return ""
    if not tool_residuals:
        read_only = _alternation(literal_alts + glob_alts) + "$"
    else:
        shadow = _alternation([glob_to_regex(t) for t in tool_residuals])
        parts = [_alternation(literal_alts) + "$"] if literal_alts else []
        if glob_alts:
            parts.append(f"(?!{shadow}$){_alternation(glob_alts)}$")
        read_only = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    if tool_literals:
        exact = _alternation([js_escape(t[cut:]) for t in tool_literals])
        return f"(?!{exact}$){read_only}"
    return read_only


def _alternation(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    return unique[0] if len(unique) == 1 else "(?:" + "|".join(unique) + ")"


def _residuals(pattern: str, prefix: str) -> list[str]:
    """The globs that the rest of a name must match for ``prefix + rest`` to match ``pattern``.

    A glob derivative: run the pattern over the prefix, keeping every position
    it can be at; each position's tail is a glob for the rest.
    """
    states = _closure(pattern, {0})
    for ch in prefix:
        stepped = set()
        for i in states:
            if i < len(pattern):
                if pattern[i] == "*":
                    stepped.add(i)
                elif pattern[i] in ("?", ch):
                    stepped.add(i + 1)
        states = _closure(pattern, stepped)
        if not states:
            return []
    # A tail right after a star the prefix may still be inside is covered by that star.
    kept = sorted(i for i in states if not (i > 0 and pattern[i - 1] == "*" and i - 1 in states))
    return [pattern[i:] for i in kept]


def _closure(pattern: str, states: set[int]) -> set[int]:
    """Add the positions reachable by letting stars match nothing."""
    result = set(states)
    for i in sorted(states):
        while i < len(pattern) and pattern[i] == "*":
            i += 1
            result.add(i)
    return result


def _disjoint(a: str, b: str) -> bool:
    """True when no name can match both globs (proved by their fixed heads or tails)."""
    head_a, head_b = _fixed_head(a), _fixed_head(b)
    if not (head_a.startswith(head_b) or head_b.startswith(head_a)):
        return True
    tail_a, tail_b = _fixed_head(a[::-1]), _fixed_head(b[::-1])
    return not (tail_a.startswith(tail_b) or tail_b.startswith(tail_a))


def _fixed_head(pattern: str) -> str:
    for i, ch in enumerate(pattern):
        if ch in "*?":
            return pattern[:i]
    return pattern


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _is_glob(text: str) -> bool:
    return "*" in text or "?" in text
