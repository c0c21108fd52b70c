"""Find the arguments of a tool that name a file on the machine where the VM server runs.

The guard classifies a tool by what it does to a VM; a tool that reads or writes
the VM server's own host (``download_from_datastore(save_to=…)``) crosses the
trust boundary whatever it does to a VM, because the server runs with the guard
service's rights. The rules, strongest first (docs/catalog.md, "Host paths"):

1. a property whose name says "a file here" by itself: ``save_to``, ``local_path``,
   ``output_file`` …, any ``local_*`` path/file/dir name (also as a ``title``);
2. a generic path name (``path``, ``file``, ``filepath``, ``dest`` …) whose own
   text (``description``, ``title``, or its line in the tool's ``Args:`` block)
   says local: "local file", "local path", "on disk", "save to", ``file://``;
3. a schema hint on the property: ``format: path`` (or ``file-path``,
   ``directory``), or a ``uri``/``uri-reference`` whose text or examples use the
   ``file:`` scheme;
4. the tool's own description says local ("local file", "local path", "save to",
   "on disk"): its generic path properties are host paths, unless rules 1–3
   already found one; with none at all, the tool is flagged without an argument.

A property whose name or text says it is elsewhere (a datastore, a guest, a
remote or storage path, ``[datastore1] folder/x.vmdk``) is never a host path,
whatever its name: datastore paths are the VM side's files, not the host's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_DEPTH", "HostPathFinding", "find_host_paths", "schema_types", "snake_case"]

# Names that mean "a file on this machine" by themselves (snake_case, lower).
HOST_PATH_KEYS = frozenset(
    {"save_to", "save_as", "save_path", "save_file", "save_dir", "output_path", "output_file",
     "output_dir", "output_directory", "output_filename", "out_file", "out_path", "outfile",
     "download_to", "download_path", "download_dir", "upload_from", "localpath", "localfile"}
)  # fmt: skip
_FILE_TOKENS = frozenset({"path", "file", "filename", "filepath", "dir", "directory", "folder"})
# Generic path names: a host path only when their text or the tool says local.
GENERIC_PATH_KEYS = frozenset(
    {"path", "file", "filepath", "file_path", "filename", "file_name", "dest", "destination",
     "dest_path", "destination_path", "dest_file", "target", "target_path", "target_file",
     "source", "source_path", "source_file", "src", "output", "out", "dir", "directory",
     "folder", "input_file", "input_path"}
)  # fmt: skip
# Name tokens of a path that lives elsewhere: the VM side's files, not the host's.
_ELSEWHERE_TOKENS = frozenset(
    {"guest", "datastore", "ds", "remote", "vm", "iso", "ovf", "vmdk", "storage", "volume"}
)
_ELSEWHERE_TEXT = re.compile(
    r"\bdatastores?\b|\bguest\b|\binside the (?:vm|guest|container)\b|\bremote\b"
    r"|\bon the (?:esxi|vcenter|node)\b|\bstorage\b"
    # the datastore notation: [datastore1] folder/x.vmdk
    r"|\[[\w .-]+\]\s*[\w.-]+(?:/|\.(?:vmdk|vmx|iso|ovf|ova|nvram|log)\b)",
    re.IGNORECASE,
)
# "local" alone is not enough: Proxmox names a storage "local" ("to local storage").
_LOCAL_TEXT = re.compile(
    r"\blocal (?:file|path|dir|directory|folder|filesystem|file system|machine)s?\b"
    r"|\bon (?:the )?disk\b|\bsave[sd]? (?:it |them |the \w+ )?to\b|\bthis machine\b"
    r"|\bwhere the (?:mcp )?server runs\b|file://",
    re.IGNORECASE,
)
_PATH_FORMATS = frozenset({"path", "file-path", "filepath", "file", "directory", "dir-path"})
_URI_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
MAX_DEPTH = 3  # how deep the scan follows nested objects of an input schema


@dataclass
class HostPathFinding:
    """What the scan found: argument paths, the evidence for each, and a tool-level hint."""

    paths: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    described: str | None = None  # the tool's own words, when they say local

    @property
    def touches_host(self) -> bool:
        return bool(self.paths) or self.described is not None


def find_host_paths(tool: Mapping[str, Any]) -> HostPathFinding:
    """The arguments of ``tool`` (wire shape) that name a file on the VM server's host."""
    description = str(tool.get("description") or "")
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    candidates: list[tuple[str, Mapping[str, Any], str]] = []
    if isinstance(properties, Mapping):
        _collect(properties, "", 0, description, candidates)
    finding = HostPathFinding()
    generic: list[str] = []
    for path, prop, text in candidates:
        why = _why(path, prop, text)
        if why is not None:
            finding.paths.append(path)
            finding.evidence.append(f"host path: {path}{why}")
        elif snake_case(path.rsplit(".", 1)[-1].removesuffix("[]")) in GENERIC_PATH_KEYS:
            generic.append(path)
    said = _LOCAL_TEXT.search(description)
    if said is not None and not finding.paths:
        finding.described = said.group(0)
        for path in generic:
            finding.paths.append(path)
            finding.evidence.append(f"host path: {path} (the tool says {said.group(0)!r})")
        if not generic:
            finding.evidence.append(f"host files: the tool says {said.group(0)!r}")
    return finding


def _collect(
    properties: Mapping[str, Any],
    prefix: str,
    depth: int,
    description: str,
    out: list[tuple[str, Mapping[str, Any], str]],
) -> None:
    """Every string-ish property (nested objects too), with its text, minus the elsewhere ones."""
    for key, prop in properties.items():
        if not isinstance(prop, Mapping):
            continue
        name = str(key)
        path = f"{prefix}{name}"
        text = " ".join(
            t for t in (str(prop.get("description") or ""), _arg_doc(description, name)) if t
        )
        if _elsewhere(name, f"{text} {prop.get('title') or ''}"):
            continue
        types = schema_types(prop)
        inner = prop.get("properties")
        if "object" in types and isinstance(inner, Mapping) and depth < MAX_DEPTH:
            _collect(inner, f"{path}.", depth + 1, description, out)
        elif "array" in types and isinstance(prop.get("items"), Mapping):
            if "string" in schema_types(prop["items"]):
                out.append((f"{path}[]", prop, text))
        elif not types or types & {"string"}:
            out.append((path, prop, text))


def _why(path: str, prop: Mapping[str, Any], text: str) -> str | None:
    """Why this property is a host path (the evidence's tail), or None."""
    key = snake_case(path.rsplit(".", 1)[-1].removesuffix("[]"))
    title = snake_case(str(prop.get("title") or "").replace(" ", "_"))
    for name, where in ((key, ""), (title, " (title)")):
        tokens = set(name.split("_"))
        if name in HOST_PATH_KEYS or ("local" in tokens and tokens & _FILE_TOKENS):
            return where
    formats = {str(prop.get("format") or "")} | {
        str(o.get("format") or "") for o in _options(prop) if isinstance(o, Mapping)
    }
    if formats & _PATH_FORMATS:
        return f" (format: {sorted(formats & _PATH_FORMATS)[0]})"
    if formats & _URI_FORMATS and _file_scheme(prop, text):
        return " (a file: URI)"
    said = _LOCAL_TEXT.search(f"{text} {prop.get('title') or ''}")
    if key in GENERIC_PATH_KEYS and said is not None:
        return f" (described as {said.group(0)!r})"
    return None


def _file_scheme(prop: Mapping[str, Any], text: str) -> bool:
    samples = [text, str(prop.get("default") or ""), str(prop.get("pattern") or "")]
    samples += [str(e) for e in prop.get("examples") or () if isinstance(e, str)]
    return any("file:" in sample.lower() for sample in samples)


def _elsewhere(name: str, text: str) -> bool:
    return bool(set(snake_case(name).split("_")) & _ELSEWHERE_TOKENS) or bool(
        _ELSEWHERE_TEXT.search(text)
    )


def _arg_doc(description: str, name: str) -> str:
    """The property's line in a docstring-style ``Args:`` block (FastMCP servers put it there)."""
    found = re.search(rf"^\s*{re.escape(name)}\s*(?:\([^)]*\))?\s*:\s*(.+)$", description, re.M)
    return found.group(1).strip() if found else ""


def _options(prop: Mapping[str, Any]) -> list[Any]:
    return list(prop.get("anyOf") or prop.get("oneOf") or ())


def schema_types(prop: Mapping[str, Any]) -> set[str]:
    """The JSON types a schema property admits (through anyOf/oneOf; bare properties: object)."""
    kind = prop.get("type")
    types: set[str] = set()
    if isinstance(kind, str):
        types.add(kind)
    elif isinstance(kind, list):
        types.update(str(k) for k in kind)
    for option in _options(prop):
        if isinstance(option, Mapping):
            types |= schema_types(option)
    if not types and isinstance(prop.get("properties"), Mapping):
        types.add("object")
    return types


def snake_case(name: str) -> str:
    """``saveTo``, ``save-to`` and ``Save_To`` as ``save_to``: how the scan compares names."""
    return _CAMEL.sub("_", name).replace("-", "_").lower()
