"""Classify a tool call: read-only, mutating (and on which VMs), or unlisted.

Pure: no I/O, no clock. It runs on every hook call, so it avoids ``re`` and
``fnmatch`` (several milliseconds to import) and matches globs itself; ``re``
is imported only to apply a ``vm_arg`` pattern, i.e. on the mutating path.

VM names are taken exactly as the call gives them, as the VM server matches
them: no case folding, no stripping of whitespace; only an operator's explicit
``vm_map`` (aliases, ``strip_domain``) changes a name, and it too matches exactly.

Precedence, specific beats general: an exact name beats every pattern; among
patterns, the one with the most literal characters (everything but ``*`` and
``?``) wins. Only a true tie between a read-only and a mutating pattern falls
to mutating (the restrictive reading); between two ``tools`` patterns of equal
specificity the first listed wins. ``doctor`` reports read-only/mutating ties.

Host paths: a ``tools`` entry's ``host_paths`` name arguments that are files on
the machine where the VM server runs. A call that gives one carries them in
:attr:`Classification.host_paths`, and the guard asks a person. Such an entry
also beats a ``read_only_tools`` match for a call that gives a host path: a
tool that touches the VM server's host is never read-only.
"""

from __future__ import annotations

from ..config.settings import CatalogSettings, ToolSpec, VmMap, VmPath
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "EXACT",
    "Classification",
    "classify",
    "glob_match",
    "globs_intersect",
    "host_path_values",
    "map_vm_name",
    "pattern_ties",
    "specificity",
]

READ_ONLY = "read_only"
MUTATING = "mutating"
UNLISTED = "unlisted"
# The specificity of an exact name: above every pattern's.
EXACT = 1_000_000
# A host path longer than this is shown cut (the approver sees where it starts).
_SHOWN_MAX = 500


class Classification:
    """What the catalog says about one call."""

    __slots__ = (
        "args",
        "entry",
        "host_paths",
        "kind",
        "origins",
        "problem",
        "spec",
        "specificity",
        "tie",
        "tool_name",
        "vms",
    )

    def __init__(
        self,
        kind: str,
        tool_name: str,
        *,
        entry: str | None = None,
        vms: tuple[str, ...] = (),
        problem: str | None = None,
        spec: ToolSpec | None = None,
        origins: dict[str, str] | None = None,
        args: dict[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.tool_name = tool_name
        self.entry = entry  # the catalog key (name or pattern) that matched
        self.vms = vms
        self.problem = problem  # why no VM was found, for the prompt's reason
        self.spec = spec  # the tools entry of a mutating call
        self.origins = origins or {}  # VM name -> where it came from (path, pattern + text)
        # VM name -> the name as the call gives it (before vm_map): what the VM server will
        # look up, so the gateway's identity check asks the server with exactly that.
        self.args = args or {}
        self.specificity = 0  # EXACT, or the literal characters of the pattern that matched
        self.tie: str | None = None  # a read-only pattern this mutating one tied with
        # host_paths argument -> its value, as given: for the person who approves, never a log
        self.host_paths: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Classification({self.kind!r}, {self.tool_name!r}, vms={self.vms!r})"


def classify(tool_name: str, tool_input: Any, catalog: CatalogSettings) -> Classification:
    """Classify one call against the catalog (specific beats general, see the module doc)."""
    spec = catalog.tools.get(tool_name)
    if spec is not None:
        return _scored(_mutating(tool_name, tool_input, spec, catalog.vm_map), EXACT)
    if tool_name in catalog.read_only:
        return _read_only(tool_name, tool_input, catalog, tool_name, EXACT)
    best_tool: ToolSpec | None = None
    tool_score = -1
    for pattern, candidate in catalog.tools.items():
        if _is_glob(pattern) and glob_match(pattern, tool_name):
            score = specificity(pattern)
            if score > tool_score:
                best_tool, tool_score = candidate, score
    best_read_only: str | None = None
    read_only_score = -1
    for pattern in catalog.read_only:
        if _is_glob(pattern) and glob_match(pattern, tool_name):
            score = specificity(pattern)
            if score > read_only_score:
                best_read_only, read_only_score = pattern, score
    if best_read_only is not None and read_only_score > tool_score:
        return _read_only(tool_name, tool_input, catalog, best_read_only, read_only_score)
    if best_tool is not None:
        verdict = _scored(_mutating(tool_name, tool_input, best_tool, catalog.vm_map), tool_score)
        if read_only_score == tool_score:
            verdict.tie = best_read_only
        return verdict
    return Classification(UNLISTED, tool_name)


def _read_only(
    tool_name: str, tool_input: Any, catalog: CatalogSettings, entry: str, score: int
) -> Classification:
    """Read-only, unless a ``tools`` pattern with ``host_paths`` matches and the call gives one."""
    best: ToolSpec | None = None
    best_score = -1
    for pattern, candidate in catalog.tools.items():
        score_here = specificity(pattern) if candidate.host_paths else -1
        if score_here > best_score and glob_match(pattern, tool_name):
            best, best_score = candidate, score_here
    if best is not None and host_path_values(tool_input, best.host_paths):
        return _scored(_mutating(tool_name, tool_input, best, catalog.vm_map), best_score)
    return _scored(Classification(READ_ONLY, tool_name, entry=entry), score)


def host_path_values(tool_input: Any, paths: tuple[str, ...]) -> dict[str, str]:
    """Each of ``paths`` the call gives (any value but null), with its value as text.

    An empty string counts: a server may read it as the current directory.
    """
    found: dict[str, str] = {}
    for path in paths:
        values = [v for v in _walk(tool_input, tuple(path.split("."))) if v is not None]
        if values:
            text = ", ".join(v if isinstance(v, str) else repr(v) for v in values)
            found[path] = text if len(text) <= _SHOWN_MAX else text[:_SHOWN_MAX] + "…"
    return found


def specificity(entry: str) -> int:
    """How specific a catalog entry is: EXACT for a name, else its literal characters."""
    if not _is_glob(entry):
        return EXACT
    return len(entry) - entry.count("*") - entry.count("?")


def _scored(verdict: Classification, score: int) -> Classification:
    verdict.specificity = score
    return verdict


def pattern_ties(catalog: CatalogSettings) -> list[tuple[str, str]]:
    """(read-only pattern, tools pattern) pairs of equal specificity that some name matches both.

    Such a name falls to mutating unless a more specific entry decides it: a
    tie the operator probably did not mean.
    """
    ties = []
    for read_only in catalog.read_only:
        if not _is_glob(read_only):
            continue
        for tool in catalog.tools:
            if (
                _is_glob(tool)
                and specificity(tool) == specificity(read_only)
                and globs_intersect(read_only, tool)
            ):
                ties.append((read_only, tool))
    return ties


def globs_intersect(a: str, b: str) -> bool:
    """True when some name matches both globs (``*`` any run, ``?`` one character)."""
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        ca = a[i] if i < len(a) else None
        cb = b[j] if j < len(b) else None
        if ca == "*":
            todo.append((i + 1, j))  # the star matches nothing more
            if cb is not None and cb != "*":
                todo.append((i, j + 1))  # the star eats b's character
        if cb == "*":
            todo.append((i, j + 1))
            if ca is not None and ca != "*":
                todo.append((i + 1, j))
        steppable = ca is not None and cb is not None and "*" not in (ca, cb)
        if steppable and (ca == "?" or cb == "?" or ca == cb):
            todo.append((i + 1, j + 1))
    return False


def _mutating(
    tool_name: str, tool_input: Any, spec: ToolSpec, global_map: VmMap | None
) -> Classification:
    verdict = _mutating_vms(tool_name, tool_input, spec, global_map)
    if spec.host_paths:
        verdict.host_paths = host_path_values(tool_input, spec.host_paths)
    return verdict


def _mutating_vms(
    tool_name: str, tool_input: Any, spec: ToolSpec, global_map: VmMap | None
) -> Classification:
    if not spec.vm_arg:
        if spec.vpgs:  # a host-level tool: its fixed VPGs are tagged, no VM is looked for
            return Classification(MUTATING, tool_name, entry=spec.name, spec=spec)
        problem = (
            f"the catalog entry {spec.name!r} names no VM argument for this tool "
            "(it may change several VMs or none)"
        )
        return Classification(MUTATING, tool_name, entry=spec.name, problem=problem, spec=spec)
    vm_map = spec.vm_map or global_map
    for vm_path in spec.vm_arg:
        raw = _extract(tool_input, vm_path, spec.name)
        if raw:
            origins: dict[str, str] = {}
            args: dict[str, str] = {}
            for name, origin in raw:
                mapped = map_vm_name(name, vm_map)
                origins.setdefault(mapped, origin)
                args.setdefault(mapped, name)
            names = _unique(origins)
            return Classification(
                MUTATING,
                tool_name,
                entry=spec.name,
                vms=names,
                spec=spec,
                origins=origins,
                args=args,
            )
    tried = ", ".join(p.path + (" (pattern)" if p.pattern else "") for p in spec.vm_arg)
    problem = f"no VM name found in the arguments at {tried}"
    return Classification(MUTATING, tool_name, entry=spec.name, problem=problem, spec=spec)


def _extract(tool_input: Any, vm_path: VmPath, tool: str) -> list[tuple[str, str]]:
    """(name, where it came from) for each VM name at ``vm_path``."""
    values = _walk(tool_input, vm_path.parts)
    names: list[tuple[str, str]] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, str | int):
            continue
        text = str(value)  # never stripped: " web-01" is another VM to the server
        if vm_path.pattern is None:
            if text:
                names.append((text, f"argument {vm_path.path}"))
        else:
            for name, matched in _pattern_names(vm_path.pattern, text, tool):
                origin = (
                    f"pattern {vm_path.pattern!r} on argument {vm_path.path}, "
                    f"group vm of the match {matched!r}"
                )
                names.append((name, origin))
    return names


def _walk(node: Any, parts: tuple[str, ...]) -> list[Any]:
    """Follow a dotted path; ``key[]`` fans out over a list."""
    current = [node]
    for part in parts:
        fan_out = part.endswith("[]")
        key = part[:-2] if fan_out else part
        following: list[Any] = []
        for item in current:
            if not isinstance(item, dict) or key not in item:
                continue
            value = item[key]
            if fan_out and isinstance(value, list):
                following.extend(value)
            elif not fan_out:
                following.append(value)
        current = following
    return current


def _pattern_names(pattern: str, text: str, tool: str) -> list[tuple[str, str]]:
    import re  # only mutating calls with a pattern pay for it

    key = f"tools.{tool}.vm_arg.pattern"
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        msg = f"not a valid regular expression: {exc}"
        raise ConfigError(msg, key=key) from None
    if "vm" not in compiled.groupindex:
        msg = "the pattern needs a named group (?P<vm>...) that captures the VM name"
        raise ConfigError(msg, key=key)
    return [(m.group("vm"), m.group(0)) for m in compiled.finditer(text) if m.group("vm")]


def map_vm_name(name: str, vm_map: VmMap | None) -> str:
    """Apply aliases and domain stripping (aliases are looked up before and after).

    Exact: an alias or a domain matches only as written, case and whitespace included.
    """
    if vm_map is None:
        return name
    alias = vm_map.aliases.get(name)
    if alias is not None:
        return alias
    stripped = _strip_domain(name, vm_map.strip_domain)
    return vm_map.aliases.get(stripped, stripped)


def _strip_domain(name: str, rule: bool | tuple[str, ...]) -> str:
    if rule is True:
        return name.split(".", 1)[0]
    if rule is False:
        return name
    for domain in rule:
        if name.endswith("." + domain):
            return name[: -len(domain) - 1]
    return name


def _unique(names: Any) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for name in names:
        if name:
            seen.setdefault(name, None)
    return tuple(seen)


def _is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def glob_match(pattern: str, name: str) -> bool:
    """Shell-style match of the whole name: ``*`` any run, ``?`` one character."""
    p = n = 0
    star_p, star_n = -1, 0
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]) and pattern[p] != "*":
            p += 1
            n += 1
        elif p < len(pattern) and pattern[p] == "*":
            star_p, star_n = p, n
            p += 1
        elif star_p != -1:
            # backtrack: let the last star swallow one more character
            p = star_p + 1
            star_n += 1
            n = star_n
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)
