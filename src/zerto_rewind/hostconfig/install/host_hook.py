"""``install host-hook HOST``: the Codex, Gemini CLI or Copilot CLI hook.

A thin client of the guard service, like ``install claude-code --service``: the
socket's owner is checked (:func:`~.socket_trust.socket_identity`) and recorded
in the hook (``--service-user UID``), the matcher covers the servers of the
service's own catalog (``GET /v1/catalog``) and the host's shell and file tools,
and the host's timeout is kept above the hook's budget (each of these hosts lets
the call run when its timeout fires first). The files are planned and written by
:mod:`zerto_rewind.hostconfig.hooks`; the command line is
:mod:`zerto_rewind.cli.install_host_hook`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from ...hooks.thin import HOSTS, LAUNCH_CODE
from ..hook_command import HookCommand
from ..hooks import (
    POST_EVENTS,
    POST_TIMEOUT_S,
    HookPlan,
    build_entry,
    hook_file,
    matcher_for,
    plan_hook_file,
    post_matcher_for,
    write_hook_file,
)
from .catalog_client import thin_budget
from .claude_code import reach_service
from .matcher import covered_servers
from .plan import InstallRefused, InstallTarget, ServiceTrust, check_service_url
from .report import InstallReport

__all__ = ["TRUST_STEPS", "HostHookOptions", "hook_command", "install_host_hook"]

# How far above the hook's budget the host's own timeout is set.
HOST_MARGIN_S = 5

TRUST_STEPS = {
    "codex": (
        "Codex's docs say a new or changed hook runs only once it is trusted: review it with "
        "/hooks in an interactive session, or run `codex exec --dangerously-bypass-hook-trust` "
        "in automation (codex exec 0.169.0 ran this user hook without it). A project's .codex/ "
        "hooks load only in a trusted project."
    ),
    "gemini": (
        "Gemini CLI fingerprints project hooks: a new or changed hook in a project's "
        ".gemini/settings.json is untrusted until accepted (Gemini warns); user hooks run as "
        "written. For unattended runs (-p), install with --prompt-as deny: an ask there waits "
        "for a confirmation nobody can give, and the run hangs."
    ),
    "copilot": (
        "Copilot CLI reads ~/.copilot/hooks/*.json (and a project's .github/hooks/) when it "
        "starts; there is no trust step. A Copilot hook that times out lets the call run: "
        "timeoutSec is kept above the hook's budget."
    ),
}


@dataclass(frozen=True, kw_only=True)
class HostHookOptions(InstallTarget, ServiceTrust):
    """What ``install host-hook`` was asked to do (the command line's options)."""

    host: str
    service: str
    file: str | None = None
    servers: str | None = None
    prompt_as: str | None = None
    protect: tuple[str, ...] = ()
    python: str | None = None
    force: bool = False
    dry_run: bool = False


def hook_command(
    python: str,
    host: str,
    service_opts: dict[str, str],
    *,
    budget_s: int,
    servers: list[str],
    prompt_as: str | None,
    protect: list[str],
) -> str:
    """The hook's shell command: absolute interpreter, the service and who serves it, the rest."""
    return HookCommand(
        HookCommand.launcher_for(python, LAUNCH_CODE),
        host=host,
        service=service_opts["service"],
        service_user=service_opts.get("service_user"),
        token_file=service_opts.get("token_file"),
        ca_file=service_opts.get("ca_file"),
        servers=tuple(servers),
        prompt_as=prompt_as or None,
        protect=tuple(protect),
        budget=str(budget_s),
    ).render()


def install_host_hook(args: HostHookOptions, env: Mapping[str, str], report: InstallReport) -> None:
    """Plan, then write (or with ``dry_run`` show) the hook in the host's hook file."""
    host: str = args.host
    _check_prompt_as(args)
    check_service_url(args.service)
    opts, remote, _uid, _identity = reach_service(
        args.service,
        service_user=args.service_user,
        agent_user=args.agent_user,
        token_file=args.token_file,
        ca_file=args.ca_file,
    )
    servers = _servers(args, covered_servers(remote.catalog))
    budget = thin_budget(remote.guard_timeout_s)
    timeout = budget + HOST_MARGIN_S
    path = _hook_path(args, env)
    protect = [path, *(os.path.abspath(p) for p in args.protect)]
    python = os.path.abspath(args.python or sys.executable)
    command = hook_command(python, host, opts, budget_s=budget, servers=servers,
                           prompt_as=args.prompt_as, protect=protect)  # fmt: skip
    matcher = matcher_for(host, servers)
    post = build_entry(host, command=command, matcher=post_matcher_for(host, servers),
                       timeout_s=POST_TIMEOUT_S)  # fmt: skip
    plan = plan_hook_file(host, path, build_entry(host, command=command, matcher=matcher,
                                                  timeout_s=timeout), post)  # fmt: skip
    if plan.drops_comments and not args.force:
        msg = (
            f"{path} has comments, which a rewrite would drop; nothing was written. Add the "
            "hook by hand (zerto-rewind install host-hook … --dry-run prints it), or run again "
            "with --force to rewrite it without them"
        )
        raise InstallRefused(msg)
    summary = [
        f"file:     {path}",
        f"service:  {opts['service']} (its catalog compiled into the matcher; no config, no "
        "credential and no guard state on this side)",
        f"servers:  {', '.join(servers)}",
        f"matcher:  {matcher}",
        f"command:  {command}",
        f"timeout:  {timeout} s (hook budget {budget} s, service guard budget "
        f"{remote.guard_timeout_s:g} s)",
        f"results:  {', '.join(POST_EVENTS[host])} post each change's result to the service",
        f"kept:     {plan.kept_hooks} other hook entr{'y' if plan.kept_hooks == 1 else 'ies'}",
        f"trust:    {TRUST_STEPS[host]}",
    ]
    _apply(args, plan, summary, report)


def _check_prompt_as(args: HostHookOptions) -> None:
    if args.prompt_as and args.prompt_as not in HOSTS[args.host].PROTOCOL.prompt_choices:
        msg = (
            f"--prompt-as {args.prompt_as}: a {args.host} hook cannot ask in a way that holds, "
            "so a prompt is always a deny there"
        )
        raise InstallRefused(msg)


def _hook_path(args: HostHookOptions, env: Mapping[str, str]) -> str:
    if args.file:
        return os.path.abspath(args.file)
    project = os.path.abspath(args.project) if args.project else None
    return hook_file(args.host, project=project, env=env)


def _apply(
    args: HostHookOptions, plan: HookPlan, summary: list[str], report: InstallReport
) -> None:
    """Write the plan (or show it, with ``dry_run``) and say what was done."""
    if args.dry_run:
        report.dry_run(plan.path, plan.text)
        report.say(["dry run, nothing written", *summary], err=True)
        return
    if plan.text is None:
        report.outcome = "unchanged"
        report.say(["already installed, nothing to change", *summary])
        return
    backup = write_hook_file(plan)
    report.wrote(plan.path, backup)
    lines = [f"installed the zerto-rewind {args.host} hook", *summary]
    if backup:
        lines.append(f"backup:   {backup}")
    if plan.drops_comments:
        lines.append("note:     the file's comments were dropped (--force)")
    report.say(lines)


def _servers(args: HostHookOptions, catalog_servers: list[str]) -> list[str]:
    if not args.servers:
        if not catalog_servers:
            msg = (
                "the service's catalog names no MCP server (mcp__<server>__…), so the hook "
                "would guard nothing; give --servers"
            )
            raise InstallRefused(msg)
        return catalog_servers
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = [s for s in servers if s not in catalog_servers]
    if unknown:
        msg = (
            f"--servers {', '.join(unknown)}: not in the service's catalog (it names "
            f"{', '.join(catalog_servers) or 'no server'}); its calls would all be unlisted"
        )
        raise InstallRefused(msg)
    return servers
