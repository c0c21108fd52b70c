"""The catalog's settings types: which tools mutate, where their VMs are, how to resolve them.

Plain classes with ``__slots__``: the hook builds them on every call, one per tool, and a
:class:`~.record.Record`'s ``__init__`` is slower. ``ResolverSpec`` (the gateway's, a few
per config) is a Record: each field declared once.
"""

from __future__ import annotations

from .record import Record

__all__ = [
    "DEFAULT_ZERTO_ID_PATTERN",
    "TOOL_DECISIONS",
    "ZERTO_ID_FIELDS",
    "CatalogSettings",
    "ResolverSpec",
    "ToolSpec",
    "VmMap",
    "VmPath",
]


class VmPath:
    """One place to look for the VM name in ``tool_input``: a dotted path, maybe a regex."""

    __slots__ = ("parts", "path", "pattern")

    def __init__(self, path: str, pattern: str | None = None) -> None:
        self.path = path
        self.parts = tuple(path.split("."))
        self.pattern = pattern


class VmMap:
    """Turns what a tool calls a VM into what Zerto calls it."""

    __slots__ = ("aliases", "strip_domain")

    def __init__(self, aliases: dict[str, str], strip_domain: bool | tuple[str, ...]) -> None:
        self.aliases = aliases  # keys exactly as configured: matching never folds case
        self.strip_domain = strip_domain


TOOL_DECISIONS = ("prompt", "deny", "allow")


class ToolSpec:
    """A mutating tool: where its VM names are, how to map them, what else it touches.

    ``vpgs`` are VPG names tagged before every call (a host-level tool changes
    many VMs and names none); ``decision`` is the per-tool policy when nothing
    can be checkpointed (no ``vm_arg`` and no ``vpgs``, or no VM in the call).
    ``host_paths`` are argument paths that name a file or directory on the machine
    where the VM server runs: a call that gives one needs a person, checkpoint or not.
    """

    __slots__ = ("decision", "host_paths", "name", "vm_arg", "vm_map", "vpgs")

    def __init__(
        self,
        name: str,
        vm_arg: tuple[VmPath, ...],
        vm_map: VmMap | None,
        *,
        vpgs: tuple[str, ...] = (),
        decision: str | None = None,
        host_paths: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.vm_arg = vm_arg
        self.vm_map = vm_map
        self.vpgs = vpgs
        self.decision = decision
        self.host_paths = host_paths


# A Zerto VM identifier (``<server id>.vm-42``, documented as ``serverid.moref``): the
# vCenter and the moref, compared whole, since a moref is unique only within one vCenter.
# UNCONFIRMED on real ZVMs, so ``catalog.resolvers.*.zerto_pattern`` can replace it.
DEFAULT_ZERTO_ID_PATTERN = r"^(?P<vcenter>.+)\.(?P<id>vm-[0-9]+)$"
ZERTO_ID_FIELDS = ("vm_identifier", "instance_identifier")


class ResolverSpec(Record):
    """How the gateway asks one VM server which VM a name means (the identity check).

    ``tool`` (read-only) is called with ``{arg: <the call's VM argument>}``; the
    value at ``id_path`` of its JSON result must equal group ``id`` of
    ``zerto_pattern`` applied to Zerto's ``zerto_field`` for that VM. For a
    ``vm_identifier`` the vCenter is compared too: group ``vcenter`` of the pattern
    against the value at ``vcenter_path`` of the answer, else the fixed ``vcenter``.
    """

    server: str
    tool: str
    arg: str
    id_path: str
    zerto_field: str = "vm_identifier"
    zerto_pattern: str = DEFAULT_ZERTO_ID_PATTERN
    timeout_s: float = 10.0
    vcenter: str | None = None
    vcenter_path: str | None = None


class CatalogSettings:
    """The seed's catalog: read-only tools, mutating tools, and the unlisted rule."""

    __slots__ = (
        "from_annotations",
        "pins",
        "read_only",
        "resolvers",
        "tools",
        "unknown",
        "unknown_source",
        "vm_map",
    )

    def __init__(
        self,
        read_only: tuple[str, ...],
        tools: dict[str, ToolSpec],
        vm_map: VmMap | None,
        unknown: str,
        unknown_source: str,
        *,
        from_annotations: bool = False,
        resolvers: dict[str, ResolverSpec] | None = None,
        pins: dict[str, str] | None = None,
    ) -> None:
        self.read_only = read_only
        self.tools = tools
        self.vm_map = vm_map
        self.unknown = unknown
        self.unknown_source = unknown_source
        # catalog.from_annotations: a door that sees the live tools/list (the gateway) may
        # classify tools the catalog does not list with the scan's rules; explicit entries win.
        self.from_annotations = from_annotations
        # catalog.resolvers: server name -> the identity check the gateway runs before it
        # forwards a checkpointed call to that server (docs/gateway.md).
        self.resolvers = resolvers or {}
        # catalog.pins: host tool name -> "sha256:..." of the tool as reviewed (catalog scan);
        # the gateway treats a live tool of a pinned server that is new or changed as unlisted.
        self.pins: dict[str, str] = pins or {}
