"""Classify a tool call: read-only, mutating (and on which VMs), or unlisted.

Pure: no I/O, no clock. It runs on every hook call, so it avoids ``re`` and
``fnmatch`` (several milliseconds to import) and matches globs itself; ``re``
is imported only to apply a ``vm_arg`` pattern, i.e. on the mutating path.

Precedence: an exact name beats a pattern; when only patterns match and one of
them is in ``tools``, the call is mutating (the restrictive reading wins).
"""

from __future__ import annotations

from ..config.settings import CatalogSettings, ToolSpec, VmMap, VmPath
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Classification", "classify", "glob_match", "map_vm_name"]

READ_ONLY = "read_only"
MUTATING = "mutating"
UNLISTED = "unlisted"


class Classification:
    """What the catalog says about one call."""

    __slots__ = ("entry", "kind", "problem", "tool_name", "vms")

    def __init__(
        self,
        kind: str,
        tool_name: str,
        *,
        entry: str | None = None,
        vms: tuple[str, ...] = (),
        problem: str | None = None,
    ) -> None:
        self.kind = kind
        self.tool_name = tool_name
        self.entry = entry  # the catalog key (name or pattern) that matched
        self.vms = vms
        self.problem = problem  # why no VM was found, for the prompt's reason

    def __repr__(self) -> str:
        return f"Classification({self.kind!r}, {self.tool_name!r}, vms={self.vms!r})"


def classify(tool_name: str, tool_input: Any, catalog: CatalogSettings) -> Classification:
    """Classify one call against the catalog."""
    spec = catalog.tools.get(tool_name)
    if spec is not None:
        return _mutating(tool_name, tool_input, spec, catalog.vm_map)
    if tool_name in catalog.read_only:
        return Classification(READ_ONLY, tool_name, entry=tool_name)
    for pattern, spec in catalog.tools.items():
        if _is_glob(pattern) and glob_match(pattern, tool_name):
            return _mutating(tool_name, tool_input, spec, catalog.vm_map)
    for pattern in catalog.read_only:
        if _is_glob(pattern) and glob_match(pattern, tool_name):
            return Classification(READ_ONLY, tool_name, entry=pattern)
    return Classification(UNLISTED, tool_name)


def _mutating(
    tool_name: str, tool_input: Any, spec: ToolSpec, global_map: VmMap | None
) -> Classification:
    if not spec.vm_arg:
        problem = f"the catalog entry {spec.name!r} has no vm_arg, so the VM cannot be known"
        return Classification(MUTATING, tool_name, entry=spec.name, problem=problem)
    vm_map = spec.vm_map or global_map
    for vm_path in spec.vm_arg:
        raw = _extract(tool_input, vm_path, spec.name)
        if raw:
            names = _unique(map_vm_name(name, vm_map) for name in raw)
            return Classification(MUTATING, tool_name, entry=spec.name, vms=names)
    tried = ", ".join(p.path + (" (pattern)" if p.pattern else "") for p in spec.vm_arg)
    problem = f"no VM name found in the arguments at {tried}"
    return Classification(MUTATING, tool_name, entry=spec.name, problem=problem)


def _extract(tool_input: Any, vm_path: VmPath, tool: str) -> list[str]:
    values = _walk(tool_input, vm_path.parts)
    names: list[str] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, str | int):
            continue
        text = str(value).strip()
        if vm_path.pattern is None:
            if text:
                names.append(text)
        else:
            names.extend(_pattern_names(vm_path.pattern, text, tool))
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


def _pattern_names(pattern: str, text: str, tool: str) -> list[str]:
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
    return [m.group("vm") for m in compiled.finditer(text) if m.group("vm")]


def map_vm_name(name: str, vm_map: VmMap | None) -> str:
    """Apply aliases and domain stripping (aliases are looked up before and after)."""
    name = name.strip()
    if vm_map is None:
        return name
    alias = vm_map.aliases.get(name.lower())
    if alias is not None:
        return alias
    stripped = _strip_domain(name, vm_map.strip_domain)
    return vm_map.aliases.get(stripped.lower(), stripped)


def _strip_domain(name: str, rule: bool | tuple[str, ...]) -> str:
    if rule is True:
        return name.split(".", 1)[0]
    if rule is False:
        return name
    lowered = name.lower()
    for domain in rule:
        if lowered.endswith("." + domain):
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
