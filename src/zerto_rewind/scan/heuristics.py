"""Classify a server's tools from its own ``tools/list``: the scan's rules, pure.

For each tool, strongest evidence first:

1. ``destructiveHint: true`` → mutating, whatever the name or ``readOnlyHint`` say;
2. ``readOnlyHint: true`` → read-only; ``readOnlyHint: false`` → mutating;
3. a server that marks some tools read-only but not this one → mutating;
4. no annotations: the verb of the name (``list_``, ``get_``, ``describe_`` …) →
   read-only, *guessed*; any other verb → mutating (guessed, lower confidence
   when the verb is not a known changing one).

For a mutating tool the ``vm_arg`` comes from the input schema: properties that
denote an existing VM (``vm``, ``vm_name``, ``vmName``, ``vm_id``, ``vmid``,
``vms[]``, nested objects; ``name``/``id`` when the tool is about a VM). A
property naming a *new* VM (``new_name``, ``new_vm_name``, ``newid``, or any VM
name in a create / clone / deploy tool) is not the VM being changed, and the
review row says so. Tools with no VM argument are mutating with no ``vm_arg``.

Whatever the class, a tool whose arguments name a file on the machine where the
VM server runs (scan/hostpaths.py) needs a person: it goes to ``tools`` with
``host_paths``, never to ``read_only_tools``. One that was read-only apart from
that gets ``decision: allow``, so its calls that name no host path still run.

:func:`catalog_from_tools` is what ``zerto-rewind catalog scan`` prints and what
a door that sees the live tool list uses for ``catalog.from_annotations``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config.settings import CatalogSettings, ToolSpec, VmPath
from ..core.catalog import READ_ONLY as CATALOG_READ_ONLY
from ..core.catalog import UNLISTED, classify, glob_match, specificity
from .hostpaths import MAX_DEPTH, find_host_paths, schema_types, snake_case
from .identity import ResolverProposal, merge_resolvers, propose_resolver

__all__ = [
    "MUTATING",
    "READ_ONLY",
    "ReviewRow",
    "ScanResult",
    "catalog_from_tools",
    "classify_tool",
    "extend_catalog",
    "host_tool_name",
    "merge_into_config",
]

READ_ONLY = "read_only"
MUTATING = "mutating"
HIGH, MEDIUM, LOW = "high", "medium", "low"

READ_VERBS = frozenset(
    {"list", "get", "describe", "show", "read", "query", "search", "find", "browse", "fetch",
     "view", "inspect", "check", "count", "lookup", "status", "info", "stat", "stats", "wait",
     "watch", "download", "ping", "locate", "print", "display"}
)  # fmt: skip
CHANGE_VERBS = frozenset(
    {"create", "delete", "remove", "destroy", "update", "set", "start", "stop", "reboot", "reset",
     "shutdown", "suspend", "resume", "power", "clone", "deploy", "convert", "move", "migrate",
     "rename", "revert", "rollback", "add", "attach", "detach", "extend", "resize", "connect",
     "disconnect", "enter", "exit", "configure", "run", "exec", "execute", "write", "upload",
     "copy", "apply", "change", "join", "register", "unregister", "enable", "disable", "send",
     "restore", "snapshot", "install", "uninstall", "mount", "unmount", "kill", "terminate",
     "modify", "patch", "put", "post", "relocate", "allocate", "standby", "sync", "bulk", "clear",
     "import", "export", "provision", "upgrade", "mark", "assign", "unassign", "evacuate",
     "startall", "stopall", "wakeonlan", "order", "vmotion"}
)  # fmt: skip
CREATE_VERBS = frozenset({"create", "clone", "deploy", "provision", "import", "new"})
# Objects that are a VM: a create / clone / deploy tool about one of these makes a new VM.
VM_OBJECTS = frozenset({"vm", "vms", "ovf", "ova", "template", "machine", "instance", "guest"})
# Name tokens that say a tool acts on a VM (so its ``name`` / ``id`` is the VM's).
VM_CONTEXT = frozenset(
    {"vm", "vms", "guest", "guests", "snapshot", "snapshots", "serial", "machine", "template",
     "power", "reboot", "reset", "shutdown", "suspend", "standby", "console", "screenshot",
     "instance", "container", "reconfigure", "ovf", "nic", "nics", "disk", "disks", "iso"}
)  # fmt: skip
# Property names (snake_case, lower) that denote an existing VM.
VM_KEYS = frozenset(
    {"vm", "vm_name", "vmname", "vm_id", "vmid", "vm_uuid", "virtual_machine",
     "virtual_machine_name", "machine", "machine_name", "instance_name", "guest_name",
     "template_name", "template", "vm_identifier"}
)  # fmt: skip
VM_LIST_KEYS = frozenset({"vms", "vm_names", "vm_ids", "vmids", "virtual_machines", "machines"})
NEW_KEYS = frozenset(
    {"new_name", "new_vm_name", "newname", "newid", "new_id", "clone_name", "target_name",
     "new_vm", "dest_name", "destination_name"}
)  # fmt: skip
GENERIC_KEYS = frozenset({"name", "id", "uuid"})
_VM_TEXT = re.compile(r"\b(virtual machines?|vms?|guests?)\b", re.IGNORECASE)


@dataclass
class ReviewRow:
    """One tool as the scan sees it, for a person to check."""

    tool: str  # the host name: mcp__<server>__<tool>
    kind: str  # read_only | mutating
    vm_arg: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    confidence: str = MEDIUM
    guessed: bool = False  # classified from the name alone
    notes: list[str] = field(default_factory=list)
    # Arguments that name a file on the VM server's host: every call giving one prompts.
    host_paths: list[str] = field(default_factory=list)
    reads_otherwise: bool = False  # read-only but for its host paths: decision allow
    makes_vm: bool = False  # creates, clones or deploys a VM: changes no existing one

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "class": self.kind,
            "vm_arg": self.vm_arg,
            "evidence": self.evidence,
            "confidence": self.confidence,
            "guessed": self.guessed,
            "notes": self.notes,
            "host_paths": self.host_paths,
        }


@dataclass
class ScanResult:
    """The proposed catalog (config keys) and the review rows, in the server's order.

    ``catalog`` holds ``catalog.resolvers.<server>`` when ``resolver`` was found."""

    catalog: dict[str, Any]
    rows: list[ReviewRow]
    resolver: ResolverProposal | None = None


def host_tool_name(server_name: str, tool_name: str) -> str:
    """The name Claude Code gives an MCP tool: ``mcp__<server>__<tool>``."""
    return f"mcp__{server_name}__{tool_name}"


def catalog_from_tools(server_name: str, tools: Sequence[Mapping[str, Any]]) -> ScanResult:
    """The proposed catalog for ``tools`` (a ``tools/list`` result's ``tools``), and why.

    ``tools`` are plain dicts in the wire shape (``name``, ``description``,
    ``inputSchema``, ``annotations``). Names are written as the host sees them.
    """
    annotates = any(_annotations(t).get("readOnlyHint") is True for t in tools)
    rows = [classify_tool(server_name, tool, server_annotates=annotates) for tool in tools]
    read_only = [r.tool for r in rows if r.kind == READ_ONLY]
    specs: dict[str, Any] = {}
    for row in rows:
        if row.kind == MUTATING:
            specs[row.tool] = _spec(row)
    catalog: dict[str, Any] = {"read_only_tools": read_only, "tools": specs}
    prefix = host_tool_name(server_name, "")
    resolver = propose_resolver(tools, {n.removeprefix(prefix) for n in read_only})
    if resolver is not None:
        catalog["catalog"] = {"resolvers": {server_name: resolver.as_config()}}
    return ScanResult(catalog, rows, resolver)


def _spec(row: ReviewRow) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if row.vm_arg:
        spec["vm_arg"] = row.vm_arg[0] if len(row.vm_arg) == 1 else list(row.vm_arg)
    if row.host_paths:
        spec["host_paths"] = list(row.host_paths)
        if row.reads_otherwise:
            spec["decision"] = "allow"
    if not row.vm_arg and "decision" not in spec:
        # Nothing to checkpoint, and the scan cannot know which VPGs a host-level tool
        # touches (vpgs is the operator's to write): a new VM changes no existing one;
        # everything else waits for a person.
        creates = row.makes_vm and "destructiveHint" not in row.evidence
        spec["decision"] = "allow" if creates else "prompt"
    return spec


def classify_tool(
    server_name: str, tool: Mapping[str, Any], *, server_annotates: bool = False
) -> ReviewRow:
    """One tool's class, ``vm_arg``, evidence and confidence."""
    name = str(tool.get("name", ""))
    row = ReviewRow(host_tool_name(server_name, name), MUTATING)
    annotations = _annotations(tool)
    tokens = _tokens(name)
    verb = _verb(tokens)
    read_verb = verb in READ_VERBS
    if annotations.get("destructiveHint") is True:
        row.evidence.append("destructiveHint")
        if annotations.get("readOnlyHint") is True:
            row.notes.append("readOnlyHint is also set; destructive wins")
        elif read_verb:
            row.notes.append(f"the verb {verb!r} reads, but the server marks it destructive")
        row.confidence = HIGH
    elif annotations.get("readOnlyHint") is True:
        row.kind = READ_ONLY
        row.evidence.append("readOnlyHint")
        row.confidence = HIGH
    elif annotations.get("readOnlyHint") is False:
        row.evidence.append("readOnlyHint: false")
        row.confidence = HIGH
    elif server_annotates:
        row.evidence.append("not marked read-only (server marks others)")
        row.confidence = MEDIUM if read_verb else HIGH
        if read_verb:
            row.notes.append(f"the verb {verb!r} reads; check whether it changes anything")
    else:
        row.guessed = True
        if read_verb:
            row.kind = READ_ONLY
            row.evidence.append(f"verb {verb!r}")
            row.confidence = MEDIUM
        elif verb in CHANGE_VERBS:
            row.evidence.append(f"verb {verb!r}")
            row.confidence = MEDIUM
        else:
            row.evidence.append(f"unknown verb {verb or name!r}")
            row.confidence = LOW
    if row.kind == MUTATING:
        _find_vm_arg(row, tool, tokens, verb)
    _mark_host_paths(row, tool)
    return row


def _mark_host_paths(row: ReviewRow, tool: Mapping[str, Any]) -> None:
    """A tool that touches the VM server's host needs a person, whatever its class said."""
    found = find_host_paths(tool)
    if not found.touches_host:
        return
    row.evidence.extend(found.evidence)
    row.host_paths = list(found.paths)
    was_read_only = row.kind == READ_ONLY
    row.kind = MUTATING
    if found.paths:
        names = ", ".join(found.paths)
        row.notes.append(
            f"{names}: a file on the VM server's host, which it reads or writes with the "
            "guard's rights; every call that gives one prompts"
        )
        if was_read_only:
            row.reads_otherwise = True
            row.notes.append("read-only otherwise: calls without it run (decision allow)")
    else:
        row.notes.append(
            "it says it uses files on the VM server's host, and no argument names them: "
            "every call prompts"
        )


def _find_vm_arg(row: ReviewRow, tool: Mapping[str, Any], tokens: list[str], verb: str) -> None:
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        properties = {}
    description = str(tool.get("description") or "")
    about_vm = bool(VM_CONTEXT & set(tokens)) or bool(_VM_TEXT.search(description))
    creates_vm = verb in CREATE_VERBS and bool(tokens) and tokens[-1] in VM_OBJECTS
    found: list[tuple[int, str, str]] = []  # (rank, path, evidence)
    new_vm: list[str] = []
    _walk(properties, "", 0, about_vm=about_vm, found=found, new_vm=new_vm)
    if creates_vm:
        row.makes_vm = True
        named = [path for _rank, path, _e in found] + new_vm
        if named:
            row.notes.append(f"makes a new VM ({', '.join(named)}: new VM or source, not changed)")
        else:
            row.notes.append("makes a new VM; no existing VM is changed")
        destructive = "destructiveHint" in row.evidence
        row.notes.append(
            "nothing to checkpoint: decision prompt (the server marks it destructive)"
            if destructive
            else "nothing to checkpoint: decision allow"
        )
        return
    for path in new_vm:
        row.notes.append(f"{path} is a new name, not the VM changed")
    found.sort(key=lambda item: item[0])
    for _rank, path, evidence in found:
        if path not in row.vm_arg:
            row.vm_arg.append(path)
            row.evidence.append(evidence)
    if not row.vm_arg:
        row.notes.append(
            "no VM argument (host-level?): decision prompt; set vpgs to checkpoint the VPGs "
            "it changes"
        )
        if row.confidence == HIGH:
            row.confidence = MEDIUM
    elif any(p.endswith(("vmid", "vm_id", ".id")) or p == "id" for p in row.vm_arg):
        row.notes.append("VM given by ID: map IDs to VM names with vm_map aliases")


def _walk(
    properties: Mapping[str, Any],
    prefix: str,
    depth: int,
    *,
    about_vm: bool,
    found: list[tuple[int, str, str]],
    new_vm: list[str],
) -> None:
    for key, prop in properties.items():
        if not isinstance(prop, Mapping):
            continue
        norm = snake_case(str(key))
        path = f"{prefix}{key}"
        text = str(prop.get("description") or "")
        types = schema_types(prop)
        if norm in NEW_KEYS or (norm.startswith("new_") and norm.endswith(("name", "id"))):
            if about_vm or "vm" in norm:
                new_vm.append(path)
            continue
        if norm in VM_KEYS and "string" in types | {"string"} and "object" not in types:
            found.append((0, path, f"schema {path!r}"))
        elif norm in VM_LIST_KEYS and "array" in types:
            items = prop.get("items")
            if isinstance(items, Mapping) and "object" in schema_types(items):
                inner = items.get("properties")
                if isinstance(inner, Mapping):
                    _walk(inner, f"{path}[].", depth + 1, about_vm=True, found=found,
                          new_vm=new_vm)  # fmt: skip
            else:
                found.append((0, f"{path}[]", f"schema {path!r} (list of VMs)"))
        elif norm in VM_LIST_KEYS and not types - {"string", "null"}:
            found.append((2, path, f"schema {path!r} (VMs in one string?)"))
        elif norm in GENERIC_KEYS and about_vm and "object" not in types:
            found.append((1, path, f"schema {path!r} (VM tool)"))
        elif text and _VM_TEXT.search(text) and "name" in norm and "object" not in types:
            found.append((1, path, f"schema {path!r} (described as VM)"))
        elif "object" in types and depth < MAX_DEPTH:
            inner = prop.get("properties")
            if isinstance(inner, Mapping):
                nested_vm = about_vm or norm in VM_KEYS
                _walk(inner, f"{path}.", depth + 1, about_vm=nested_vm, found=found,
                      new_vm=new_vm)  # fmt: skip


def _annotations(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = tool.get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _tokens(name: str) -> list[str]:
    return [t for t in snake_case(name).split("_") if t]


def _verb(tokens: list[str]) -> str:
    """The name's verb: the first token, or the second after a prefix such as ``vsphere_``."""
    if not tokens:
        return ""
    if tokens[0] in READ_VERBS or tokens[0] in CHANGE_VERBS or len(tokens) == 1:
        return tokens[0]
    second = tokens[1]
    return second if second in READ_VERBS or second in CHANGE_VERBS else tokens[0]


# ---------------------------------------------------------------------- using a scan


def merge_into_config(
    config: Mapping[str, Any], proposal: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Add the proposal's tools that ``config`` does not classify yet; touch nothing else,
    except host paths.

    A tool counts as classified when an entry of ``read_only_tools`` or
    ``tools`` names it exactly or matches it as a glob. A proposed tool with
    ``host_paths`` is the exception: a tool that touches the VM server's host is
    never read-only, so its host paths are added to what ``config`` says
    (:func:`_with_host_paths`). Returns the new config, the names added, and the
    names whose host paths were added, in the proposal's order.
    """
    merged = dict(config)
    read_only = list(config.get("read_only_tools") or [])
    tools = dict(config.get("tools") or {})
    entries = [*read_only, *tools]
    added: list[str] = []
    hardened: list[str] = []
    for name in proposal.get("read_only_tools", []):
        if not _covered(name, entries):
            read_only.append(name)
            added.append(name)
    for name, spec in dict(proposal.get("tools", {})).items():
        if not _covered(name, entries):
            tools[name] = spec
            added.append(name)
        elif spec.get("host_paths") and _with_host_paths(name, spec, read_only, tools):
            hardened.append(name)
    merged["read_only_tools"] = read_only
    merged["tools"] = tools
    options = merge_resolvers(config.get("catalog"), proposal)
    if options is not None:
        merged["catalog"] = options
    return merged, added, hardened


def _with_host_paths(
    name: str, proposed: Mapping[str, Any], read_only: list[str], tools: dict[str, Any]
) -> bool:
    """Give ``name`` the proposal's host paths in a config that classifies it already.

    Its own ``tools`` entry gains them. A read-only tool (listed, or matched by a
    read-only pattern more specific than any ``tools`` one) becomes a ``tools``
    entry that allows the calls naming no host path, as read-only did; a tool
    matched by a ``tools`` pattern gets an exact entry with that pattern's spec.
    False when its entry already names every host path.
    """
    if name in tools:
        entry = dict(tools[name]) if isinstance(tools[name], Mapping) else {}
    elif name in read_only:
        read_only.remove(name)
        entry = {"decision": "allow"}
    else:
        tool_patterns = [p for p in tools if glob_match(p, name)]
        best = max(tool_patterns, key=specificity, default=None)
        ro_score = max((specificity(p) for p in read_only if glob_match(p, name)), default=-1)
        if best is not None and specificity(best) > ro_score and isinstance(tools[best], Mapping):
            entry = dict(tools[best])
        else:
            entry = {"decision": "allow"}
    known = list(entry.get("host_paths") or [])
    missing = [p for p in proposed["host_paths"] if p not in known]
    if not missing and name in tools:
        return False
    entry["host_paths"] = known + missing
    if entry.get("decision") == "allow" and entry.get("vm_arg"):
        del entry["decision"]  # allow never stands with a VM to checkpoint
    tools[name] = entry
    return True


def _covered(name: str, entries: Iterable[str]) -> bool:
    return any(entry == name or glob_match(entry, name) for entry in entries)


def extend_catalog(catalog: CatalogSettings, proposal: Mapping[str, Any]) -> CatalogSettings:
    """``catalog.from_annotations``: add a scan's classifications for tools ``catalog`` leaves
    unlisted; every explicit entry (exact or glob) wins, except that host paths the live
    schema shows are always added (a tool that touches the VM server's host is never
    read-only)."""
    read_only = list(catalog.read_only)
    tools = dict(catalog.tools)
    for name in proposal.get("read_only_tools", []):
        if classify(name, {}, catalog).kind == UNLISTED:
            read_only.append(name)
    for name, spec in dict(proposal.get("tools", {})).items():
        verdict = classify(name, {}, catalog)
        host_paths = tuple(spec.get("host_paths", ()))
        if verdict.kind == UNLISTED:
            raw = spec.get("vm_arg", [])
            paths = [raw] if isinstance(raw, str) else list(raw)
            decision = spec.get("decision")
            tools[name] = ToolSpec(
                name,
                tuple(VmPath(p) for p in paths),
                None,
                decision=decision,
                host_paths=host_paths,
            )
        elif host_paths:
            tools[name] = _hardened(name, verdict.spec, host_paths, verdict.kind)
    return CatalogSettings(
        tuple(read_only),
        tools,
        catalog.vm_map,
        catalog.unknown,
        catalog.unknown_source,
        from_annotations=catalog.from_annotations,
        resolvers=catalog.resolvers,  # the identity checks stay as reviewed, never dropped
        pins=catalog.pins,
    )


def _hardened(name: str, spec: ToolSpec | None, host_paths: tuple[str, ...], kind: str) -> ToolSpec:
    """An explicit entry, plus the live schema's host paths (read-only: allow without one)."""
    if kind == CATALOG_READ_ONLY or spec is None:
        return ToolSpec(name, (), None, decision="allow", host_paths=host_paths)
    merged = tuple(dict.fromkeys((*spec.host_paths, *host_paths)))
    return ToolSpec(
        name, spec.vm_arg, spec.vm_map, vpgs=spec.vpgs, decision=spec.decision, host_paths=merged
    )
