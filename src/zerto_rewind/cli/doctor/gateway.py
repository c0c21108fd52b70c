"""The doctor's gateway checks: does any host config still reach a VM server directly?

Reads every MCP host config :mod:`zerto_rewind.hostconfig` knows (Claude
Code, Claude Desktop, Cursor, VS Code, Codex, Gemini CLI, Copilot CLI: user
files, and the project directories given) and turns its findings into
:class:`~.config.Check` lines: one per file read (what each server entry was
found to be), one per file that exists but could not be read, one listing the
files not present. A VM server reached directly with credentials in the host
file (the agent can read them) fails, naming the entry and the keys, never a
value; one the gateway also serves fails; one that only looks like a VM server,
with no credentials in the file, warns.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence

from ...config.settings import Settings
from ...hostconfig.bypass import Finding, bypass_findings
from ...hostconfig.specs import HostFile
from .check import Check, Status

__all__ = ["doctor_bypass_checks"]

_NAME = "gateway bypass"


def doctor_bypass_checks(
    env: Mapping[str, str],
    *,
    project_dirs: Iterable[str] = (),
    settings: Settings | None = None,
    gateway_urls: Iterable[str] = (),
    files: Sequence[HostFile] | None = None,
) -> list[Check]:
    """Check every host config for MCP server entries that bypass the gateway.

    With ``settings`` (the gateway's), an entry named like one of its upstreams
    counts as a VM server, and a gateway entry asking for an upstream the
    gateway lacks is a warning. A file that exists but cannot be read is a
    warning, never a pass.
    """
    upstreams = set(settings.upstreams) if settings is not None else None
    config = settings.path if settings is not None else "CONFIG"
    findings = bypass_findings(
        env,
        project_dirs=list(project_dirs),
        upstream_names=upstreams or (),
        gateway_urls=gateway_urls,
        files=files,
    )
    checks: list[Check] = []
    by_file: dict[str, list[Finding]] = {}
    absent: list[str] = []
    for finding in findings:
        if finding.kind == "absent":
            absent.append(finding.path)
        elif finding.kind == "unreadable":
            detail = f"{finding.path}: could not read it ({finding.detail}), so cannot tell"
            fix = "make it readable by the user running doctor (the agent's), then run it again"
            checks.append(Check(_NAME, "warn", detail, fix))
        else:
            by_file.setdefault(finding.path, []).append(finding)
    for path, found in by_file.items():
        checks.append(_file_check(path, found, upstreams, config))
    if absent:
        checks.append(Check(_NAME, "pass", "not present: " + ", ".join(absent)))
    return checks


def _file_check(path: str, found: list[Finding], upstreams: set[str] | None, config: str) -> Check:
    status: Status = "pass"
    concluded: list[str] = []
    fixes: list[str] = []
    for f in found:
        label = f"{f.where[len(path) :]} {f.server}".strip() if f.scope else str(f.server)
        if f.kind == "empty":
            concluded.append(f"{f.where[len(path) :]} no MCP servers".strip())
        elif f.kind == "other":
            concluded.append(f"{label}: not a VM server")
        elif f.kind == "gateway":
            concluded.append(f"{label}: {f.detail}")
            if upstreams is not None and f.upstream and f.upstream not in upstreams:
                concluded.append(f"{label}: the gateway config has no upstream {f.upstream!r}")
                fixes.append(f"add upstream {f.upstream!r} to {config}")
                status = "fail" if status == "fail" else "warn"
        else:
            line = f"{label}: reaches a VM server directly, not through the gateway ({f.detail})"
            fixes.append(_install_fix(f, config))
            if f.credentials:
                line += (
                    f", with credentials in this file the agent can read ("
                    f"{', '.join(f.credentials)})"
                )
                status = "fail"
            elif f.detail.startswith("the gateway config serves"):
                status = "fail"
            else:
                line += ", no credentials in this file"
                status = "fail" if status == "fail" else "warn"
            concluded.append(line)
    detail = f"read {path}: " + "; ".join(concluded)
    return Check(_NAME, status, detail, "; ".join(fixes))


def _install_fix(finding: Finding, config: str) -> str:
    if finding.scope[:1] == ("projects",) and len(finding.scope) == 2:
        where = f"--project {shlex.quote(finding.scope[1])}"
    else:
        where = f"--file {shlex.quote(finding.path)}"
    server = shlex.quote(finding.server or "")
    return (
        f"zerto-rewind install mcp-host {finding.host} --server {server} {where} "
        f"--gateway-config {shlex.quote(config)}"
    )
