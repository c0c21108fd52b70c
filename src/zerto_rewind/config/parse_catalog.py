"""The catalog's keys: ``read_only_tools``, ``tools``, ``vm_map``, ``unknown_tools``,
``catalog``."""

from __future__ import annotations

from ..errors import ConfigError
from .parse_base import ParserBase, _kind
from .schema import CATALOG, RESOLVER, TOOL, VM_MAP, VM_PATH
from .settings import (
    TOOL_DECISIONS,
    UNKNOWN_CHOICES,
    CatalogSettings,
    ResolverSpec,
    ToolSpec,
    VmMap,
    VmPath,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["CatalogParser"]


class CatalogParser(ParserBase):
    """The catalog: which tools are read-only, which mutate, and where their VMs are."""

    def catalog(self, top: dict[str, Any], env: Mapping[str, str]) -> CatalogSettings:
        read_only = self.name_list(top.get("read_only_tools", []), "read_only_tools")
        tools_raw = top.get("tools", {})
        if not isinstance(tools_raw, dict):
            self.fail(
                "tools", f"must be a JSON object of tool name -> spec, not {_kind(tools_raw)}"
            )
        tools = {name: self.tool(name, spec) for name, spec in tools_raw.items()}
        both = sorted(set(read_only) & set(tools))
        if both and tools[both[0]].host_paths:
            msg = (
                f"{both[0]!r} names a path on the VM server's host (host_paths), so it is never "
                "read-only; take it out of read_only_tools"
            )
            self.fail("read_only_tools", msg)
        if both:
            self.fail(
                "tools", f"{both[0]!r} is also in read_only_tools; a tool is one or the other"
            )
        vm_map = self.vm_map(top["vm_map"], "vm_map") if "vm_map" in top else None
        unknown, source = self.unknown(top, env)
        options, values = CATALOG.read(self, top.get("catalog", {}), "catalog")
        resolvers = self.resolvers(options.get("resolvers", {}), tools)
        return CatalogSettings(
            tuple(read_only),
            tools,
            vm_map,
            unknown,
            source,
            resolvers=resolvers,
            **values,
        )

    # ---- catalog.resolvers: the gateway's identity check, one block per VM server
    def resolvers(self, raw: Any, tools: dict[str, ToolSpec]) -> dict[str, ResolverSpec]:
        if not isinstance(raw, dict):
            self.fail(
                "catalog.resolvers",
                f"must be a JSON object of server -> resolver, not {_kind(raw)}",
            )
        return {
            self.string(server, "catalog.resolvers"): self.resolver(server, spec, tools)
            for server, spec in raw.items()
        }

    def resolver(self, server: str, raw: Any, tools: dict[str, ToolSpec]) -> ResolverSpec:
        key = f"catalog.resolvers.{server}"
        spec, values = RESOLVER.read(self, raw, key)
        for required in ("tool", "arg", "id_path"):
            if required not in spec:
                self.fail(f"{key}.{required}", "is required")
        tool = self.string(spec["tool"], f"{key}.tool")
        if f"mcp__{server}__{tool}" in tools:
            msg = (
                f"names {tool!r}, which the catalog lists as a mutating tool; the resolver is "
                "called before every checkpointed call, so it must be a read-only tool"
            )
            self.fail(f"{key}.tool", msg)
        arg = self.string(spec["arg"], f"{key}.arg")
        id_path = self.one_value_path(spec["id_path"], f"{key}.id_path")
        pattern = self.id_pattern(spec.get("zerto_pattern"), f"{key}.zerto_pattern")
        if pattern is not None:
            values["zerto_pattern"] = pattern
        if "vcenter_path" in spec:
            values["vcenter_path"] = self.one_value_path(
                spec["vcenter_path"], f"{key}.vcenter_path"
            )
        return ResolverSpec(server=server, tool=tool, arg=arg, id_path=id_path, **values)

    def one_value_path(self, value: Any, key: str) -> str:
        """A dotted path to one value of a resolver's answer (no fan-out)."""
        path = self.arg_path(value, key)
        if "[]" in path:
            self.fail(key, "must name one value (no '[]' fan-out)")
        return path

    def id_pattern(self, value: Any, key: str) -> str | None:
        if value is None:
            return None
        import re  # only a config with resolvers pays for it

        pattern = self.string(value, key)
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            self.fail(key, f"is not a valid regular expression: {exc}")
        if "id" not in compiled.groupindex:
            self.fail(key, "needs a named group (?P<id>...) that captures the vCenter identity")
        return pattern

    def unknown(self, top: dict[str, Any], env: Mapping[str, str]) -> tuple[str, str]:
        named = env.get("ZERTO_HOOK_UNKNOWN", "").strip().lower()
        if named:
            if named not in UNKNOWN_CHOICES:
                msg = (
                    f"ZERTO_HOOK_UNKNOWN must be one of {', '.join(UNKNOWN_CHOICES)}, not {named!r}"
                )
                raise ConfigError(msg)
            return named, "ZERTO_HOOK_UNKNOWN"
        if "unknown_tools" in top:
            return self.string(
                top["unknown_tools"], "unknown_tools", choices=UNKNOWN_CHOICES
            ), "config"
        return "prompt", "default"

    def name_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            self.fail(key, f"must be a list of tool names or glob patterns, not {_kind(value)}")
        names = [self.string(item, f"{key}[{i}]") for i, item in enumerate(value)]
        if len(set(names)) != len(names):
            dupe = next(n for n in names if names.count(n) > 1)
            self.fail(key, f"lists {dupe!r} twice")
        return names

    def tool(self, name: str, spec: Any) -> ToolSpec:
        key = f"tools.{name}"
        if not name.strip():
            self.fail("tools", "a tool name is empty")
        spec = self.obj(spec, key, TOOL.names)
        vm_arg = self.vm_arg(spec["vm_arg"], f"{key}.vm_arg") if "vm_arg" in spec else ()
        vm_map = self.vm_map(spec["vm_map"], f"{key}.vm_map") if "vm_map" in spec else None
        vpgs: tuple[str, ...] = ()
        if "vpgs" in spec:
            raw_vpgs = spec["vpgs"]
            if not isinstance(raw_vpgs, list) or not raw_vpgs:
                self.fail(f"{key}.vpgs", "must be a non-empty list of VPG names")
            vpgs = tuple(
                dict.fromkeys(self.string(v, f"{key}.vpgs[{i}]") for i, v in enumerate(raw_vpgs))
            )
        decision = None
        if "decision" in spec:
            decision = self.string(spec["decision"], f"{key}.decision", choices=TOOL_DECISIONS)
            if decision == "allow" and vm_arg:
                msg = (
                    "is 'allow', but the tool names an existing VM (vm_arg): a change to an "
                    "existing VM is never allowed without a checkpoint; use prompt or deny"
                )
                self.fail(f"{key}.decision", msg)
            if vpgs:
                msg = (
                    "applies only when nothing can be checkpointed, and this tool's vpgs are "
                    "checkpointed on every call; remove one of the two"
                )
                self.fail(f"{key}.decision", msg)
        host_paths = self.host_paths(spec["host_paths"], key) if "host_paths" in spec else ()
        return ToolSpec(name, vm_arg, vm_map, vpgs=vpgs, decision=decision, host_paths=host_paths)

    def host_paths(self, value: Any, key: str) -> tuple[str, ...]:
        """``tools.NAME.host_paths``: the arguments that name a file on the VM server's host."""
        if not isinstance(value, list) or not value:
            msg = (
                "must be a non-empty list of argument paths (like 'save_to') that name a file "
                "or directory on the machine where the VM server runs"
            )
            self.fail(f"{key}.host_paths", msg)
        paths = [self.arg_path(v, f"{key}.host_paths[{i}]") for i, v in enumerate(value)]
        return tuple(dict.fromkeys(paths))

    def vm_arg(self, value: Any, key: str) -> tuple[VmPath, ...]:
        items = value if isinstance(value, list) else [value]
        if not items:
            self.fail(key, "is an empty list; name at least one argument path")
        return tuple(
            self.vm_path(item, f"{key}[{i}]" if isinstance(value, list) else key)
            for i, item in enumerate(items)
        )

    def vm_path(self, value: Any, key: str) -> VmPath:
        if isinstance(value, dict):
            spec = self.obj(value, key, VM_PATH.names)
            pattern = (
                self.string(spec.get("pattern"), f"{key}.pattern") if "pattern" in spec else None
            )
            return VmPath(self.arg_path(spec.get("path"), f"{key}.path"), pattern)
        return VmPath(self.arg_path(value, key))

    def arg_path(self, value: Any, key: str) -> str:
        path = self.string(value, key)
        for part in path.split("."):
            bare = part[:-2] if part.endswith("[]") else part
            if not bare or "[" in bare or "]" in bare:
                self.fail(key, f"{path!r} is not a dotted path like 'name', 'vm.name' or 'vms[]'")
        return path

    def vm_map(self, value: Any, key: str) -> VmMap:
        spec = self.obj(value, key, VM_MAP.names)
        aliases_raw = spec.get("aliases", {})
        if not isinstance(aliases_raw, dict):
            self.fail(f"{key}.aliases", "must be an object of alias -> VM name")
        # Exact, as the VM server matches names: an alias never folds case or whitespace.
        aliases = {
            self.string(k, f"{key}.aliases"): self.string(v, f"{key}.aliases.{k}")
            for k, v in aliases_raw.items()
        }
        strip = spec.get("strip_domain", False)
        if isinstance(strip, list):
            domains = tuple(self.string(d, f"{key}.strip_domain").lstrip(".") for d in strip)
            return VmMap(aliases, domains)
        return VmMap(aliases, self.boolean(strip, f"{key}.strip_domain"))
