"""Compile the catalog into a Claude Code ``PreToolUse`` matcher.

Pure: no I/O. The host tests the matcher with JavaScript's ``RegExp.test``
against the tool name (unanchored), so the regex decides which calls start
the hook at all. The compiled matcher

* never matches a read-only tool (no process is started for it),
* matches every mutating and every *unlisted* tool of each covered MCP server,
  so a tool nobody classified still reaches the guard,
* follows the catalog's precedence exactly (see :func:`catalog.classify`):
  an exact name beats every glob; among globs the most specific (most literal
  characters) wins, and a tie between a read-only and a ``tools`` glob is
  mutating; a ``tools`` glob with ``host_paths`` beats every read-only entry
  it matches (such a call is read-only only when it names no host path, which
  the guard, not the matcher, can tell).

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

from ...config.settings import CatalogSettings
from ...core.catalog import glob_match, globs_intersect, specificity
from ...errors import ConfigError
from ...hooks.protect import SELF_TOOLS  # the host tools watched with guard.protect_self

__all__ = ["SELF_TOOLS", "compile_matcher", "covered_servers", "glob_to_regex", "js_escape"]

MCP_PREFIX = "mcp__"

# Characters with a meaning in a JS (or Python) regex outside a class; only
# these are escaped, because JS's unicode mode rejects needless escapes.
_SYNTAX = frozenset("^$\\.*+?()[]{}|")


def compile_matcher(
    catalog: CatalogSettings, *, all_tools: bool = False, self_tools: tuple[str, ...] = ()
) -> str:
    """The matcher regex for ``catalog`` (see the module docstring).

    ``self_tools`` are host tools the hook watches whatever the catalog says (with
    ``guard.protect_self``: the file and shell tools that could write the guard's files);
    they are matched exactly, read-only or not.
    """
    own = [js_escape(name) + "$" for name in self_tools]
    if all_tools:
        exclusion = _exclusion(catalog, "")
        if not exclusion:
            return ".*"
        if own:
            return "^(?:" + "|".join([*own, f"(?!{exclusion}).*"]) + ")"
        return f"^(?!{exclusion}).*"
    servers = covered_servers(catalog)
    prefixes = [f"{MCP_PREFIX}{server}__" for server in servers]
    alternatives = []
    for prefix in prefixes:
        exclusion = _exclusion(catalog, prefix)
        alternatives.append(js_escape(prefix) + (f"(?!{exclusion})" if exclusion else ""))
    for key in catalog.tools:
        if not key.startswith(tuple(prefixes)):
            alternatives.append(_tool_alternative(catalog, key))
    if alternatives:  # self tools alone never make a catalog worth installing
        alternatives += own
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
    # Names this glob matches are mutating unless the catalog reads them as read-only
    # (an exact read-only name, or a more specific read-only glob).
    exclusion = _exclusion(catalog, "", near=key)
    guard = f"(?!{exclusion})" if exclusion else ""
    return guard + glob_to_regex(key) + "$"


def _exclusion(catalog: CatalogSettings, prefix: str, *, near: str | None = None) -> str:
    """A regex for the read-only names that start with ``prefix``, read after the prefix.

    classify() says read-only exactly when the name is an exact read-only entry,
    or when it is no exact ``tools`` name and some read-only glob that matches it
    is more specific than every ``tools`` glob that matches it. Each read-only
    glob therefore becomes ``(?!<exact tools names | tools globs at least as
    specific>$)<glob>$``, written for the rest of the name. ``near`` keeps only
    the read-only entries some name of that glob could match.
    """
    cut = len(prefix)
    tool_globs = [t for t in catalog.tools if _is_glob(t)]
    host_globs = [t for t in tool_globs if catalog.tools[t].host_paths]
    # Every tools key is also an exact name (a glob's own text names itself).
    tool_exact = [t for t in catalog.tools if t.startswith(prefix)]
    parts: list[tuple[str, str]] = []  # (shadow lookahead, body)
    for entry in catalog.read_only:
        if near is not None and not globs_intersect(near, entry):
            continue
        # The entry's text as an exact name: needed for a glob only where a tools glob
        # would otherwise take that text.
        if (
            entry.startswith(prefix)
            and entry not in catalog.tools
            and (not _is_glob(entry) or any(glob_match(t, entry) for t in tool_globs))
            and not any(glob_match(t, entry) for t in host_globs)
        ):
            parts.append(("", js_escape(entry[cut:])))
        if not _is_glob(entry):
            continue
        score = specificity(entry)
        for residual in _residuals(entry, prefix):
            shadows = [js_escape(t[cut:]) for t in tool_exact if glob_match(entry, t)]
            shadows += [
                glob_to_regex(res)
                for t in tool_globs
                if specificity(t) >= score or t in host_globs
                for res in _residuals(t, prefix)
                if globs_intersect(res, residual)
            ]
            shadow = f"(?!{_alternation(shadows)}$)" if shadows else ""
            parts.append((shadow, glob_to_regex(residual)))
    if not parts:
        return ""
    if not any(shadow for shadow, _body in parts):
        return _alternation([body for _shadow, body in parts]) + "$"
    return _alternation([shadow + body + "$" for shadow, body in parts])


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


def _is_glob(text: str) -> bool:
    return "*" in text or "?" in text
