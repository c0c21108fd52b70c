"""Propose the identity check (``catalog.resolvers.<server>``) from a server's own tools.

The guard finds a VM's VPG by its name in Zerto; the VM server finds the VM by the
same name on its own. A same-name VM in another folder can be the one the server
changes while the checkpoint covers Zerto's VM. The gateway closes that by asking a
read-only lookup tool which VM the name means (gateway/identity.py), but only when
the config names that tool. This module finds it in ``tools/list``:

* a read-only tool (annotated, or a reading verb) that looks **one** VM up: its verb
  reads (``get``, ``describe``, ``show``, ``inspect``, ``lookup``, ``info``), its
  name or description is about a VM, and the words after the verb say nothing but
  "VM" and "details" (``get_vm_info``, ``describe_vm``; not ``get_vm_stats`` or
  ``get_vm_screenshot``);
* with exactly one required argument, the VM's name (``name``, ``vm_name``, …);
* the identity in its answer: an ``outputSchema`` property (``instance_uuid`` or
  ``instanceUuid``, compared with Zerto's ``instance_identifier``; ``moref``,
  ``moid``, … compared with the moref in Zerto's ``VmIdentifier``), else the
  description's words, else ``instance_uuid`` *guessed*: what vSphere calls the
  VM's ``config.instanceUuid`` and what mcvsphere's ``get_vm_info`` returns
  (checked against its source; its ``tools/list`` has no ``outputSchema``).

A wrong guess fails closed: the gateway's check then finds no identity, and every
checkpointed call of that server asks a person. :func:`propose_resolver` is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .hostpaths import find_host_paths, schema_types, snake_case

__all__ = ["ResolverProposal", "merge_resolvers", "propose_resolver"]

LOOKUP_VERBS = frozenset({"get", "describe", "show", "inspect", "lookup", "info", "read", "find"})
VM_WORDS = frozenset({"vm", "virtual", "machine", "guest", "instance"})
# The only other words a one-VM lookup's name may have ("get_vm_info", "describe_vm_details").
DETAIL_WORDS = frozenset(
    {"info", "information", "details", "detail", "summary", "properties", "config", "by", "name"}
)
NAME_ARGS = ("name", "vm_name", "vmName", "vm", "machine_name", "virtual_machine_name")
# Answer fields, strongest first: (field names, Zerto field, Zerto pattern or None = default).
_INSTANCE = ("instance_identifier", r"^(?P<id>.+)$")
_MOREF = ("vm_identifier", None)
ID_FIELDS: tuple[tuple[tuple[str, ...], tuple[str, str | None]], ...] = (
    (("instance_uuid", "instanceUuid", "instance_id", "instanceId"), _INSTANCE),
    (("moref", "moid", "mo_ref", "vm_moref", "managed_object_id", "moRef", "moId"), _MOREF),
)
_VM_TEXT = re.compile(r"\b(virtual machines?|vms?)\b", re.IGNORECASE)
_MANY_TEXT = re.compile(r"\b(all|every|list)\b", re.IGNORECASE)
_INSTANCE_TEXT = re.compile(r"instance[ _-]?uuid", re.IGNORECASE)
_MOREF_TEXT = re.compile(r"\b(moref|moid|managed object)", re.IGNORECASE)


@dataclass
class ResolverProposal:
    """The identity check the scan proposes for one server, and why."""

    tool: str
    arg: str
    id_path: str
    zerto_field: str
    zerto_pattern: str | None
    evidence: list[str] = field(default_factory=list)
    guessed: bool = False  # the answer's identity field is not in the schema or description

    def as_config(self) -> dict[str, Any]:
        """The ``catalog.resolvers.<server>`` block, as the config writes it."""
        spec: dict[str, Any] = {"tool": self.tool, "arg": self.arg, "id_path": self.id_path}
        if self.zerto_field != "vm_identifier":
            spec["zerto_field"] = self.zerto_field
        if self.zerto_pattern is not None:
            spec["zerto_pattern"] = self.zerto_pattern
        return spec


def propose_resolver(
    tools: Sequence[Mapping[str, Any]], read_only: set[str]
) -> ResolverProposal | None:
    """The best one-VM lookup among ``tools`` whose names are in ``read_only``, or None."""
    best: tuple[int, ResolverProposal] | None = None
    for tool in tools:
        name = str(tool.get("name", ""))
        if name not in read_only or find_host_paths(tool).touches_host:
            continue
        proposal = _as_resolver(tool)
        if proposal is None:
            continue
        rank = 1 if proposal.guessed else 0
        if best is None or rank < best[0]:
            best = (rank, proposal)
    return best[1] if best else None


def _as_resolver(tool: Mapping[str, Any]) -> ResolverProposal | None:
    name = str(tool.get("name", ""))
    words = [w for w in snake_case(name).split("_") if w]
    description = str(tool.get("description") or "")
    if not words or words[0] not in LOOKUP_VERBS or _MANY_TEXT.search(description):
        return None
    rest = set(words[1:])
    about_vm = bool(rest & VM_WORDS) or bool(_VM_TEXT.search(description))
    if not about_vm or rest - VM_WORDS - DETAIL_WORDS:
        return None
    arg = _name_argument(tool.get("inputSchema"))
    if arg is None:
        return None
    found = _identity_field(tool, description)
    if found is None:
        evidence = [f"{name}: a read-only lookup of one VM by {arg!r}"]
        evidence.append("instance_uuid guessed (vSphere's instance UUID; not in its schema)")
        return ResolverProposal(name, arg, "instance_uuid", *_INSTANCE, evidence, guessed=True)
    id_path, (zerto_field, pattern), why = found
    evidence = [f"{name}: a read-only lookup of one VM by {arg!r}", why]
    return ResolverProposal(name, arg, id_path, zerto_field, pattern, evidence)


def _name_argument(schema: Any) -> str | None:
    """The single required string argument that names the VM, or None."""
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    required = schema.get("required") or []
    if not isinstance(properties, Mapping) or not isinstance(required, list) or len(required) != 1:
        return None
    [arg] = required
    prop = properties.get(arg)
    if arg not in NAME_ARGS or not isinstance(prop, Mapping):
        return None
    return str(arg) if "string" in schema_types(prop) | {"string"} else None


def _identity_field(
    tool: Mapping[str, Any], description: str
) -> tuple[str, tuple[str, str | None], str] | None:
    """(id_path, (zerto_field, zerto_pattern), evidence) from the outputSchema or the text."""
    output = tool.get("outputSchema")
    for node, prefix in _object_nodes(output):
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            continue
        for names, zerto in ID_FIELDS:
            for key in names:
                if key in properties:
                    return f"{prefix}{key}", zerto, f"outputSchema has {prefix}{key}"
    if _INSTANCE_TEXT.search(description):
        return "instance_uuid", _INSTANCE, "its description names the instance UUID"
    if _MOREF_TEXT.search(description):
        return "moref", _MOREF, "its description names the moref"
    return None


def _object_nodes(schema: Any) -> list[tuple[Mapping[str, Any], str]]:
    """The output schema and its ``result`` wrapper (FastMCP wraps non-object returns)."""
    if not isinstance(schema, Mapping):
        return []
    nodes: list[tuple[Mapping[str, Any], str]] = [(schema, "")]
    properties = schema.get("properties")
    inner = properties.get("result") if isinstance(properties, Mapping) else None
    if isinstance(inner, Mapping):
        nodes.append((inner, "result."))
    return nodes


def _proposed(proposal: Mapping[str, Any]) -> dict[str, Any]:
    options = proposal.get("catalog")
    resolvers = options.get("resolvers") if isinstance(options, Mapping) else None
    return dict(resolvers) if isinstance(resolvers, Mapping) else {}


def merge_resolvers(options: Any, proposal: Mapping[str, Any]) -> dict[str, Any] | None:
    """A config's ``catalog`` object with the proposal's identity check added for a server
    that has none (one a person wrote always stays); None when nothing is added."""
    current = dict(options) if isinstance(options, Mapping) else {}
    resolvers = current.get("resolvers")
    resolvers = dict(resolvers) if isinstance(resolvers, Mapping) else {}
    proposed = _proposed(proposal)
    if all(server in resolvers for server in proposed):
        return None
    current["resolvers"] = {**proposed, **resolvers}
    return current
