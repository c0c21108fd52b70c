"""``zerto-rewind install host-hook HOST``: the Codex, Gemini CLI or Copilot CLI hook.

A thin client of the guard service, like ``install claude-code --service``: the
socket's owner is checked (:func:`~zerto_rewind.hostconfig.install.socket_trust.socket_identity`)
and recorded in the hook (``--service-user UID``), the matcher covers the servers
of the service's own catalog (``GET /v1/catalog``) and the host's shell and file
tools, and the host's timeout is kept above the hook's budget (each of these
hosts lets the call run when its timeout fires first). The files are planned and
written by :mod:`zerto_rewind.hostconfig.hooks`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping

from ..agent_hooks.hook import HOSTS, LAUNCH_CODE
from ..errors import ConfigError
from ..hostconfig.hooks import (
    HOOK_HOSTS,
    build_entry,
    hook_file,
    matcher_for,
    plan_hook_file,
    write_hook_file,
)
from ..hostconfig.install.catalog_client import thin_budget
from ..hostconfig.install.claude_code import reach_service
from ..hostconfig.install.matcher import covered_servers
from ..hostconfig.install.plan import InstallRefused, check_service_url
from ..hostconfig.install.report import InstallReport
from .install_options import add_json_argument

__all__ = ["TRUST_STEPS", "hook_command", "main"]

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind install host-hook",
        description="Install the zerto-rewind hook in Codex (PreToolUse), Gemini CLI "
        "(BeforeTool) or Copilot CLI (preToolUse): a thin client of the guard service for "
        "direct calls to a VM server, and a check of shell and file calls that would write "
        "the hook's own files.",
    )
    parser.add_argument("host", choices=HOOK_HOSTS, help="the agent host")
    parser.add_argument(
        "--service",
        required=True,
        metavar="URL",
        help="the guard service: unix:/path/to/socket or https://host:port",
    )
    parser.add_argument(
        "--service-user",
        metavar="NAME|UID",
        help="the user the guard service runs as (default: the socket's owner)",
    )
    parser.add_argument(
        "--agent-user",
        metavar="NAME",
        help="the user the agent runs as, when install runs as another",
    )
    parser.add_argument("--token-file", metavar="F", help="with https: the bearer token's file")
    parser.add_argument("--ca-file", metavar="F", help="with https: the CA bundle to trust")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--user", action="store_true", help="the user's hook file")
    where.add_argument("--project", metavar="DIR", help="the project's hook file")
    where.add_argument("--file", metavar="F", help="another hook file of the host's format")
    parser.add_argument(
        "--servers",
        metavar="A,B",
        help="the VM servers to guard, as the host names them (default: every "
        "server of the service's catalog)",
    )
    parser.add_argument(
        "--prompt-as",
        choices=("ask", "deny"),
        help="what a prompt becomes: Gemini asks by default (deny for unattended "
        "runs); Codex and Copilot always deny",
    )
    parser.add_argument(
        "--protect",
        action="append",
        default=[],
        metavar="PATH",
        help="another file the hook keeps shell and file calls from writing "
        "(e.g. the gateway's config); may be repeated",
    )
    parser.add_argument(
        "--python", metavar="PATH", help="the interpreter the hook runs with (default: this one)"
    )
    parser.add_argument(
        "--force", action="store_true", help="rewrite a hook file whose comments a rewrite drops"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the file, write nothing")
    add_json_argument(parser)
    return parser


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
    parts = [
        python,
        "-c",
        LAUNCH_CODE,
        "hook",
        "--host",
        host,
        "--service",
        service_opts["service"],
    ]
    for flag, key in (("--service-user", "service_user"), ("--token-file", "token_file"),
                      ("--ca-file", "ca_file")):  # fmt: skip
        if key in service_opts:
            parts += [flag, service_opts[key]]
    parts += ["--servers", ",".join(servers)]
    if prompt_as:
        parts += ["--prompt-as", prompt_as]
    for path in protect:
        parts += ["--protect", path]
    parts += ["--budget", str(budget_s)]
    return shlex.join(parts)


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    report = InstallReport("host-hook", as_json=args.json)
    try:
        _install(args, env, report)
    except (InstallRefused, ConfigError) as exc:
        sys.stderr.write(f"zerto-rewind install host-hook: {exc}\n")
        return 1
    report.finish()
    return 0


def _install(args: argparse.Namespace, env: Mapping[str, str], report: InstallReport) -> None:
    host: str = args.host
    if args.prompt_as and args.prompt_as not in HOSTS[host].PROMPT_CHOICES:
        msg = (
            f"--prompt-as {args.prompt_as}: a {host} hook cannot ask in a way that holds, so a "
            "prompt is always a deny there"
        )
        raise InstallRefused(msg)
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
    path = (
        os.path.abspath(args.file)
        if args.file
        else hook_file(
            host, project=os.path.abspath(args.project) if args.project else None, env=env
        )
    )
    protect = [path, *(os.path.abspath(p) for p in args.protect)]
    python = os.path.abspath(args.python or sys.executable)
    command = hook_command(python, host, opts, budget_s=budget, servers=servers,
                           prompt_as=args.prompt_as, protect=protect)  # fmt: skip
    matcher = matcher_for(host, servers)
    plan = plan_hook_file(host, path, build_entry(host, command=command, matcher=matcher,
                                                  timeout_s=timeout))  # fmt: skip
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
        f"kept:     {plan.kept_hooks} other hook entr{'y' if plan.kept_hooks == 1 else 'ies'}",
        f"trust:    {TRUST_STEPS[host]}",
    ]
    if args.dry_run:
        report.dry_run(path, plan.text)
        report.say(["dry run, nothing written", *summary], err=True)
        return
    if plan.text is None:
        report.outcome = "unchanged"
        report.say(["already installed, nothing to change", *summary])
        return
    backup = write_hook_file(plan)
    report.wrote(path, backup)
    lines = [f"installed the zerto-rewind {host} hook", *summary]
    if backup:
        lines.append(f"backup:   {backup}")
    if plan.drops_comments:
        lines.append("note:     the file's comments were dropped (--force)")
    report.say(lines)


def _servers(args: argparse.Namespace, catalog_servers: list[str]) -> list[str]:
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
