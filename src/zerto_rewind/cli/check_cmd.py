"""``zerto-rewind check TOOL '{"arg": ...}'``: what the guard would decide, without tagging.

Shows the classification and the catalog entry that matched (with its
specificity), each extracted VM with the path or regex match it came from, and
the VPGs with the row the call would reach (the guard's preview: it reads the
ZVM, never tags). ``--json`` prints the same as one JSON object.

Exit codes: 0 when the call would run, 1 when the guard would stop it (deny,
prompt, defer, approval), 2 when it cannot tell (bad arguments, a broken
config, an unreachable ZVM).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..errors import ConfigError, UsageError, ZertoRewindError
from . import report_error

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Print the decision for one call; exit 0 when it would run, 1 otherwise, 2 on error."""
    args = _parser().parse_args(argv)
    try:
        tool_input = json.loads(args.input)
    except ValueError as exc:
        msg = f"the arguments are not JSON ({exc}); give them as one JSON object"
        return _cannot_tell(UsageError(msg))
    env = dict(os.environ, ZERTO_REWIND_CONFIG=args.config) if args.config else dict(os.environ)
    try:
        report = check(args.tool, tool_input, env)
    except ConfigError as exc:
        return _cannot_tell(exc)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    if report.get("error"):
        return 2
    return 0 if report["outcome"] in ("none", "context") else 1


def _cannot_tell(error: ZertoRewindError) -> int:
    # In the edge's one format, but exit 2: this command's 1 means "the guard would stop it".
    report_error("check", error)
    return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zerto-rewind check", description=__doc__)
    parser.add_argument("tool", help="the tool name as the host reports it, e.g. mcp__vsphere__x")
    parser.add_argument("input", nargs="?", default="{}", help="the call's arguments as JSON")
    parser.add_argument("--config", help="config file (default: $ZERTO_REWIND_CONFIG)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    return parser


def check(tool: str, tool_input: Any, env: dict[str, str]) -> dict[str, Any]:
    """The report: classification, specificity, VM origins, and the guard's preview."""
    from ..config.loader import load_config
    from ..core.catalog import EXACT, classify

    settings = load_config(env)
    verdict = classify(tool, tool_input, settings.catalog)
    if verdict.entry is None:
        specificity = None
    elif verdict.specificity == EXACT:
        specificity = "exact name"
    else:
        specificity = f"pattern, {verdict.specificity} literal characters"
        if verdict.tie:
            specificity += f" (tie with read-only {verdict.tie!r}: mutating wins)"
    report: dict[str, Any] = {
        "tool": tool,
        "classification": verdict.kind,
        "catalog_entry": verdict.entry,
        "specificity": specificity,
        "vms": [{"vm": vm, "from": verdict.origins.get(vm, "")} for vm in verdict.vms],
        "fixed_vpgs": list(verdict.spec.vpgs) if verdict.spec is not None else [],
        "problem": verdict.problem,
    }
    try:
        preview = _preview(settings, tool, tool_input, verdict)
    except ZertoRewindError as exc:
        report.update(row="error", outcome="deny", vpgs=[], error=f"{type(exc).__name__}: {exc}")
        report["summary"] = "the ZVM could not be asked, so the guard would deny a mutating call"
        return report
    report.update(
        row=preview.row,
        outcome=preview.outcome,
        vpgs=[v.model_dump(mode="json") for v in preview.vpgs],
        unknown_vms=preview.unknown_vms,
        summary=preview.summary,
    )
    return report


def _preview(settings: Any, tool: str, tool_input: Any, verdict: Any) -> Any:
    """The guard's preview over the estate: every ZVM of ``zvms``, each VPG on its tag site
    (with the classification the report shows: the call is classified once)."""
    from ..core.guard import Guard
    from ..core.state import GuardState
    from ..recovery.preview import preview_call

    state = GuardState(settings.state_dir)
    guard = Guard(settings, state=state)
    try:
        return preview_call(settings, guard, state, tool, tool_input, verdict=verdict)
    finally:
        guard.close()


def _print(report: dict[str, Any]) -> None:
    lines = [
        f"tool            {report['tool']}",
        f"classification  {report['classification']}",
        f"catalog entry   {report['catalog_entry'] or '(none: unlisted)'}"
        + (f"  [{report['specificity']}]" if report["specificity"] else ""),
    ]
    for item in report["vms"]:
        lines.append(f"VM              {item['vm']}  (from {item['from']})")
    if report["fixed_vpgs"]:
        lines.append(f"fixed VPGs      {', '.join(report['fixed_vpgs'])}")
    if report["problem"]:
        lines.append(f"no VM           {report['problem']}")
    for vpg in report.get("vpgs", []):
        at = f" on site {vpg['zvm_site']}" if vpg.get("zvm_site") else ""
        lines.append(
            f"VPG             {vpg['vpg']} ({vpg['site_kind']}){at}: "
            f"{vpg['action']} -> {vpg['row']}"
        )
    lines.append(f"decision        {report['row']} / {report['outcome']}")
    if report.get("error"):
        lines.append(f"error           {report['error']}")
    lines.append(f"                {report['summary']}")
    print("\n".join(lines))
