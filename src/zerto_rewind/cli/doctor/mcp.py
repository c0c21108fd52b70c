"""The doctor's check of Claude Code's MCP server configs: is every VM server guarded?

The catalog and the compiled matcher guard tools by name (``mcp__<server>__<tool>``),
so a VM server registered under another name (``mcvsphere`` where the catalog says
``vsphere``) runs unguarded while every other check passes. This check reads every
MCP config Claude Code would read (:mod:`zerto_rewind.hostconfig.claude`), says
for each server what it concluded, and fails when a server that looks like a VM
server is not covered by both the catalog and the installed matcher. A file that
exists but cannot be read is a warning, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...config.settings import Settings
from ...hostconfig.claude import McpSource
from ...hostconfig.entries import looks_like_vm_server, zerto_rewind_role
from ...hostconfig.install.matcher import covered_servers
from .check import Check, Status

__all__ = ["NAME", "mcp_server_checks"]

NAME = "mcp servers"
_PROBE = "zerto_rewind_probe"
_RANK = {"pass": 0, "warn": 1, "fail": 2}


def mcp_server_checks(
    sources: Sequence[McpSource],
    settings: Settings | None,
    matchers: Sequence[Callable[[str], bool]] | None,
) -> list[Check]:
    """One check over every MCP config read; ``matchers`` are the installed hooks' tests.

    ``matchers=None`` means no hook was found (the ``hook installed`` check fails
    then): only the catalog is compared.
    """
    if settings is None:
        return [Check(NAME, "warn", "not checked: the config did not load")]
    catalog_servers = covered_servers(settings.catalog)
    status: Status = "pass"
    lines: list[str] = []
    fixes: list[str] = []
    absent: list[str] = []
    found: set[str] = set()

    def worse(new: Status) -> None:
        nonlocal status
        if _RANK[new] > _RANK[status]:
            status = new

    for source in sources:
        if source.state == "absent":
            absent.append(source.where)
            continue
        verdict, line, source_fixes = _source_report(source, catalog_servers, matchers, found)
        worse(verdict)
        lines.append(line)
        fixes += source_fixes
    missing = [s for s in catalog_servers if s not in found]
    if missing:
        worse("warn")
        lines.append(
            f"the catalog names server(s) {', '.join(missing)}, which no MCP config read here "
            "defines: their tools are guarded only if the host registers them under that name"
        )
        fixes.append(
            "register the server under the catalog's name, or rename the catalog's entries to "
            "the name the host uses (then re-run install); ignore if the host gets it from "
            "elsewhere (claude --mcp-config: pass doctor --mcp-config FILE)"
        )
    if absent:
        lines.append("not present: " + ", ".join(absent))
    return [Check(NAME, status, " | ".join(lines), " ; ".join(dict.fromkeys(fixes)))]


def _source_report(
    source: McpSource,
    catalog_servers: list[str],
    matchers: Sequence[Callable[[str], bool]] | None,
    found: set[str],
) -> tuple[Status, str, list[str]]:
    """One MCP config's status, line and fixes; adds the servers it defines to ``found``."""
    if source.state == "unreadable":
        line = f"{source.where}: could not read it ({source.problem}), so cannot tell"
        return "warn", line, [f"fix or make {source.path} readable, then run doctor again"]
    if not source.servers:
        return "pass", f"{source.where}: no MCP servers", []
    status: Status = "pass"
    concluded, fixes = [], []
    for name, entry in source.servers.items():
        found.add(name)
        verdict, fix = _conclude(name, entry, catalog_servers, matchers)
        if fix:
            status = "fail"
            fixes.append(fix)
        concluded.append(f"{name}: {verdict}")
    return status, f"{source.where}: " + "; ".join(concluded), fixes


def _conclude(
    name: str,
    entry: object,
    catalog_servers: list[str],
    matchers: Sequence[Callable[[str], bool]] | None,
) -> tuple[str, str]:
    """(what was concluded, the fix when it is a failure)."""
    role = zerto_rewind_role(entry, name)
    if role == "gateway":
        return "reaches its VM server through the zerto-rewind gateway (guarded there)", ""
    if role == "serve":
        return "zerto-rewind's own MCP server", ""
    reasons = looks_like_vm_server(entry, name, catalog_servers)
    if not reasons:
        return "not a VM server", ""
    why = "; ".join(reasons)
    probe = f"mcp__{name}__{_PROBE}"
    hooked = matchers is None or any(test(probe) for test in matchers)
    if name in catalog_servers:
        if matchers is None:
            # No hook to compare with ("hook installed" says so): claim only the catalog.
            return f"a VM server ({why}); the catalog covers mcp__{name}__* (no hook found)", ""
        if hooked:
            return f"a VM server ({why}); the catalog and the matcher cover mcp__{name}__*", ""
        verdict = (
            f"a VM server ({why}), but the installed matcher does not start the hook for its "
            "unlisted tools: FAIL"
        )
        return verdict, "re-run zerto-rewind install claude-code (the matcher is stale)"
    named = ", ".join(catalog_servers) or "none"
    effect = (
        "every call prompts as unlisted" if hooked else "the hook never starts: calls run unguarded"
    )
    verdict = (
        f"looks like a VM server ({why}), but the catalog does not cover mcp__{name}__* "
        f"(it names servers: {named}), so {effect}: FAIL"
    )
    target = catalog_servers[0] if len(catalog_servers) == 1 else "<catalog server>"
    fix = (
        f"rename the server {name!r} to {target!r} in its MCP config, or rename the catalog's "
        f"mcp__{target}__ entries to mcp__{name}__ (zerto-rewind catalog scan --server {name}), "
        "then re-run zerto-rewind install claude-code"
    )
    return verdict, fix
