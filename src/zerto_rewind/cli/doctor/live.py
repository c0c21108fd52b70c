"""The doctor's comparison of the catalog with a live server's ``tools/list`` (issue 12).

:func:`live_checks` is pure: given the settings, the name the host gives the server
and its tools (read by :mod:`zerto_rewind.scan.client`, or a saved dump), it reports

* ``live: unlisted`` — server tools the catalog does not list (each call prompts as
  unlisted);
* ``live: read-only`` — catalog read-only tools the server marks destructive or not
  read-only (a failure: the guard would let them change a VM unguarded);
* ``live: vm_arg`` — ``vm_arg`` paths that are not in the tool's input schema (each
  call would prompt "no VM");
* ``live: stale`` — catalog entries for tools the server no longer has;
* ``live: patterns`` and ``live: identity`` — :mod:`.catalog`;
* ``live: pins`` — the live tools against ``catalog.pins``: a changed digest
  fails; a new tool fails when a catalog pattern classifies it (the hook, which
  sees no tools/list, would trust the pattern) and warns when it is unlisted
  anyway (it prompts everywhere); removed tools and a server with no pins warn.

:func:`tie_check` reports read-only / mutating pattern ties (they fall to mutating).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...config.catalog_settings import CatalogSettings
from ...config.settings import Settings
from ...core.catalog import MUTATING, READ_ONLY, UNLISTED, classify, pattern_ties
from .catalog import identity_check, live_pattern_check
from .check import Check

__all__ = ["live_checks", "tie_check"]

_SHOWN = 12


def _names(items: Sequence[str]) -> str:
    more = f" … and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


def live_checks(
    settings: Settings, server: str, tools: Sequence[Mapping[str, Any]], source: str
) -> list[Check]:
    """Compare the catalog with ``tools`` (``tools/list`` entries) of ``server``."""
    catalog = settings.catalog
    prefix = f"mcp__{server}__"
    live = {str(t.get("name")): t for t in tools if isinstance(t.get("name"), str)}
    unlisted, unsafe, no_vm = _sort_live(catalog, prefix, live)
    stale = [
        entry
        for entry in (*catalog.read_only, *catalog.tools)
        if entry.startswith(prefix)
        and "*" not in entry
        and "?" not in entry
        and entry.removeprefix(prefix) not in live
    ]
    where = f"{server} ({source}, {len(live)} tools)"
    checks = [Check("live: tools read", "pass", f"read the tools/list of {where}")]
    if unlisted:
        detail = (
            f"{len(unlisted)} tools of {server} are not in the catalog, so each call prompts "
            f"as unlisted: {_names(unlisted)}"
        )
        fix = f"zerto-rewind catalog scan --server {server} --merge CONFIG … adds them for review"
        checks.append(Check("live: unlisted", "warn", detail, fix))
    else:
        checks.append(Check("live: unlisted", "pass", f"the catalog lists every tool of {where}"))
    checks += _schema_checks(unsafe, no_vm)
    if stale:
        detail = f"catalog entries for tools {server} no longer has: {_names(stale)}"
        fix = f"remove them, or check that {server!r} is the server they were written for"
        checks.append(Check("live: stale", "warn", detail, fix))
    else:
        checks.append(Check("live: stale", "pass", f"every exact {prefix}… entry exists"))
    checks.append(pin_check(settings, server, tools))
    checks.append(live_pattern_check(catalog, server, tools))
    checks.append(identity_check(settings, server, tools))
    return checks


def _sort_live(
    catalog: CatalogSettings, prefix: str, live: Mapping[str, Mapping[str, Any]]
) -> tuple[list[str], list[str], list[str]]:
    """The live tools the catalog leaves unlisted, calls read-only against the server's word,
    and whose ``vm_arg`` is not in the tool's input schema."""
    unlisted, unsafe, no_vm = [], [], []
    for name, tool in live.items():
        verdict = classify(prefix + name, {}, catalog)
        if verdict.kind == UNLISTED:
            unlisted.append(prefix + name)
        annotations = tool.get("annotations") or {}
        if verdict.kind == READ_ONLY and (
            annotations.get("destructiveHint") is True or annotations.get("readOnlyHint") is False
        ):
            marks = "destructive" if annotations.get("destructiveHint") else "not read-only"
            unsafe.append(f"{prefix}{name} (the server marks it {marks})")
        if verdict.kind == MUTATING and verdict.spec is not None and verdict.spec.vm_arg:
            properties = (tool.get("inputSchema") or {}).get("properties") or {}
            paths = [p.path for p in verdict.spec.vm_arg]
            heads = [p.parts[0].removesuffix("[]") for p in verdict.spec.vm_arg]
            if not any(head in properties for head in heads):
                known = ", ".join(sorted(properties)) or "none"
                no_vm.append(f"{prefix}{name}: vm_arg {paths} (its arguments: {known})")
    return unlisted, unsafe, no_vm


def _schema_checks(unsafe: Sequence[str], no_vm: Sequence[str]) -> list[Check]:
    """The catalog's read-only tools and ``vm_arg`` paths against what the server says."""
    checks = []
    if unsafe:
        detail = (
            f"catalog read-only tools the server says change things (never guarded): "
            f"{_names(unsafe)}"
        )
        fix = "move them from read_only_tools to tools (with vm_arg, vpgs or decision)"
        checks.append(Check("live: read-only", "fail", detail, fix))
    else:
        checks.append(Check("live: read-only", "pass", "no catalog read-only tool is destructive"))
    if no_vm:
        detail = (
            f"vm_arg not in the tool's input schema, so each call prompts 'no VM': {_names(no_vm)}"
        )
        fix = "set vm_arg to the argument that names the VM (see the schema shown)"
        checks.append(Check("live: vm_arg", "warn", detail, fix))
    else:
        checks.append(Check("live: vm_arg", "pass", "every vm_arg is in its tool's schema"))
    return checks


def pin_check(settings: Settings, server: str, tools: Sequence[Mapping[str, Any]]) -> Check:
    """The live tools of ``server`` against the reviewed pins (``catalog.pins``)."""
    from ...scan.pins import compare_pins

    diff = compare_pins(server, tools, settings.catalog.pins)
    fix = f"review with zerto-rewind catalog scan --server {server} --merge CONFIG (--repin)"
    if not diff.pinned:
        detail = (
            f"the tools of {server} are not pinned (catalog.pins), so a tool that changes or "
            "appears after review is classified by the catalog's patterns"
        )
        return Check("live: pins", "warn", detail, fix)
    if diff.clean:
        return Check("live: pins", "pass", f"every tool of {server} matches its pin")
    by_pattern = [n for n in diff.new if classify(n, {}, settings.catalog).kind != UNLISTED]
    parts = []
    if diff.changed:
        parts.append(f"changed since review (the gateway treats them as unlisted): "
                     f"{_names(diff.changed)}")  # fmt: skip
    if by_pattern:
        parts.append(f"new, yet a catalog pattern classifies them (the gateway prompts; "
                     f"the hook would trust the pattern): {_names(by_pattern)}")  # fmt: skip
    unlisted_new = [n for n in diff.new if n not in by_pattern]
    if unlisted_new:
        parts.append(f"new and unlisted (they prompt): {_names(unlisted_new)}")
    if diff.removed:
        parts.append(f"pinned but no longer listed: {_names(diff.removed)}")
    if diff.changed or by_pattern:
        return Check("live: pins", "fail", "; ".join(parts), fix)
    return Check("live: pins", "warn", "; ".join(parts), fix)


def tie_check(settings: Settings) -> Check:
    """Read-only and ``tools`` patterns of equal specificity that some name matches both."""
    ties = pattern_ties(settings.catalog)
    if not ties:
        return Check("catalog ties", "pass", "no read-only / mutating pattern ties")
    pairs = [f"{ro} vs {tool}" for ro, tool in ties]
    detail = (
        f"patterns of equal specificity in read_only_tools and tools: a name both match is "
        f"mutating (every call checkpointed): {_names(pairs)}"
    )
    fix = "add an exact name, or make the intended pattern more specific"
    return Check("catalog ties", "warn", detail, fix)
