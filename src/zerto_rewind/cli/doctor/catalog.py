"""The doctor's checks of the catalog itself: what each entry says, and whether it can match.

* ``vm_arg`` — every mutating tool says how it is decided: ``vm_arg`` (the VM it
  changes), or, for a tool that names no VM, ``vpgs`` (the VPGs to checkpoint) or
  ``decision``. The advice names the key that fits the tool's kind, from its name:
  a tool that makes a VM needs ``decision``, a host-level one ``vpgs`` or
  ``decision``, the rest ``vm_arg``.
* ``catalog patterns`` — an entry that no tool name can match: a character no MCP
  tool name has (``(``, ``[``, a space …; only ``*`` and ``?`` are wildcards, so
  ``[power`` is taken literally), or ``**`` (the same as ``*``, so probably a typo).
* ``live: patterns`` (with a live tool list) — a pattern of that server that
  matches none of its tools.
* ``live: identity`` (with a live tool list) — a VM server without
  ``catalog.resolvers``: a failure when one of its tools can give the VM's identity
  (the scan proposes it), a warning when none can.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...config.settings import CatalogSettings, Settings
from ...core.catalog import MUTATING, classify, glob_match
from .check import Check

__all__ = ["identity_check", "live_pattern_check", "pattern_check", "vm_arg_check"]

_SHOWN = 12
# What an MCP tool name (and the host's mcp__server__tool around it) may hold, and the
# two wildcards; anything else in a pattern is matched literally and matches nothing.
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.\-/*?]*")
_HOST_WORDS = frozenset(
    {"host", "hosts", "esxi", "cluster", "datastore", "ntp", "service", "maintenance", "node",
     "network", "folder", "firewall", "storage", "pool", "dns", "syslog"}
)  # fmt: skip


def _names(items: Sequence[str]) -> str:
    more = f" … and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


def vm_arg_check(settings: Settings) -> Check:
    """Every mutating tool names its VM argument, or says what to do without one."""
    tools = settings.catalog.tools
    if not tools:
        detail = "the catalog lists no mutating tools: every call is read-only or unlisted"
        return Check("vm_arg", "warn", detail, "list the mutating tools under tools with vm_arg")
    missing = [name for name, spec in tools.items() if not spec.vm_arg]
    undecided = [n for n in missing if not tools[n].vpgs and tools[n].decision is None]
    if undecided:
        detail = (
            f"{len(undecided)} of {len(tools)} tools name no VM (no vm_arg) and say nothing "
            f"else (no vpgs, no decision), so every call is prompted: {_names(undecided)}"
        )
        return Check("vm_arg", "fail", detail, _advice(undecided))
    if not missing:
        return Check("vm_arg", "pass", f"all {len(tools)} tools name their VM argument")
    named = len(tools) - len(missing)
    detail = (
        f"{named} of {len(tools)} tools name their VM argument; "
        f"{len(missing)} name no VM and set vpgs or decision"
    )
    return Check("vm_arg", "pass", detail)


def _advice(names: Sequence[str]) -> str:
    """Per tool kind, the key that fits (a tool the scan would read as a VM's gets vm_arg)."""
    from ...scan.heuristics import CREATE_VERBS, VM_OBJECTS

    makes, host, other = [], [], []
    for name in names:
        words = [w for w in name.rsplit("__", 1)[-1].lower().replace("-", "_").split("_") if w]
        if words and words[0] in CREATE_VERBS and words[-1] in VM_OBJECTS:
            makes.append(name)
        elif _HOST_WORDS & set(words):
            host.append(name)
        else:
            other.append(name)
    parts = []
    if makes:
        parts.append(
            f'"decision": "allow" (or "prompt") for those that make a new VM: {_names(makes)}'
        )
    if host:
        parts.append(
            '"vpgs": [the VPGs of the VMs it changes] for host-level tools, or "decision": '
            f'"prompt" / "deny": {_names(host)}'
        )
    if other:
        parts.append(
            '"vm_arg": "<argument path>" when the tool changes a VM it names, else "decision": '
            f"{_names(other)}"
        )
    return "in the config's tools, add " + "; ".join(parts) + " (docs/configuration.md)"


def pattern_check(catalog: CatalogSettings) -> Check:
    """Catalog patterns that no tool name can match, or that double a wildcard."""
    dead, doubled = [], []
    for entry in (*catalog.read_only, *catalog.tools):
        if not _NAME_CHARS.fullmatch(entry):
            odd = sorted({c for c in entry if not _NAME_CHARS.fullmatch(c)})
            dead.append(f"{entry!r} (has {' '.join(odd)})")
        elif "**" in entry:
            doubled.append(repr(entry))
    if dead:
        detail = (
            "catalog entries no tool name can match (only * and ? are wildcards; any other "
            f"character is taken literally and tool names have none of these): {_names(dead)}"
        )
        fix = "rewrite them with * and ? only, e.g. mcp__vsphere__*list* (docs/configuration.md)"
        return Check("catalog patterns", "fail", detail, fix)
    if doubled:
        detail = f"patterns with ** (the same as *; a typo?): {_names(doubled)}"
        return Check("catalog patterns", "warn", detail, "write a single *")
    return Check("catalog patterns", "pass", "every catalog entry can match a tool name")


def live_pattern_check(
    catalog: CatalogSettings, server: str, tools: Sequence[Mapping[str, Any]]
) -> Check:
    """Patterns for ``server`` (``mcp__server__…``) that match none of its live tools."""
    prefix = f"mcp__{server}__"
    live = [prefix + str(t.get("name")) for t in tools]
    patterns = [
        e
        for e in (*catalog.read_only, *catalog.tools)
        if e.startswith(prefix) and ("*" in e or "?" in e)
    ]
    unused = [p for p in patterns if not any(glob_match(p, name) for name in live)]
    if unused:
        detail = f"patterns that match no tool of {server}: {_names(unused)}"
        fix = "correct them (a typo leaves the tools they meant unlisted) or remove them"
        return Check("live: patterns", "warn", detail, fix)
    return Check("live: patterns", "pass", f"every {prefix}… pattern matches a tool")


def identity_check(settings: Settings, server: str, tools: Sequence[Mapping[str, Any]]) -> Check:
    """A VM server's identity check: configured, proposable (fail), or impossible (warn)."""
    from ...scan.heuristics import catalog_from_tools

    catalog = settings.catalog
    prefix = f"mcp__{server}__"
    names_vm = [
        t
        for t in tools
        if (v := classify(prefix + str(t.get("name")), {}, catalog)).kind == MUTATING
        and v.spec is not None
        and v.spec.vm_arg
    ]
    resolver = catalog.resolvers.get(server)
    if resolver is not None:
        live = {str(t.get("name")) for t in tools}
        if resolver.tool not in live:
            detail = (
                f"catalog.resolvers.{server}.tool {resolver.tool!r} is not a tool of {server}: "
                "every checkpointed call prompts"
            )
            fix = "name one of its read-only tools that looks a VM up (catalog scan proposes one)"
            return Check("live: identity", "fail", detail, fix)
        detail = f"checkpointed calls to {server} are checked with {resolver.tool} first"
        return Check("live: identity", "pass", detail)
    if not names_vm:
        return Check("live: identity", "pass", f"no catalog tool of {server} names a VM")
    proposal = catalog_from_tools(server, tools).resolver
    risk = (
        f"a checkpoint can cover a different VM than the one {server} changes (a same-name "
        "VM in another folder, a renamed VM)"
    )
    if proposal is None:
        detail = f"{risk}; none of its tools looks one VM up by name, so nothing can confirm it"
        fix = (
            "use a VM server with a read-only lookup tool, keep VM names unique in vCenter, "
            "and see docs/gateway.md#the-identity-check"
        )
        return Check("live: identity", "warn", detail, fix)
    block = json.dumps({server: proposal.as_config()})
    detail = f"no catalog.resolvers.{server}: {risk}; its {proposal.tool} can confirm the VM"
    fix = (
        f'add "catalog": {{"resolvers": {block}}} (zerto-rewind catalog scan --merge CONFIG '
        "writes it); the check runs in the gateway"
    )
    return Check("live: identity", "fail", detail, fix)
