"""The thin PreToolUse hook: ask the guard service, print its decision.

It holds no ZVM credential, reads no zerto-rewind config and keeps no guard
state: the service (``zerto-rewind gateway --socket`` or ``--listen``), which
runs as another user or on another machine, classifies the call with its own
catalog and tags with its own credentials. What the agent's user can change
here is the hook command itself, which Claude Code snapshots at session start
(and which a managed install puts out of the user's reach).

Fail closed: a service that cannot be reached, answers late, or answers
nonsense is a deny with the reason. A timer answers before the budget ends
whatever the socket does.

The request goes through :mod:`zerto_rewind.service_client`, the one client of
the service (``--service unix:/path`` or ``https://host:port``; on a unix socket
nothing is sent unless the listener runs as ``--service-user``). Import-light like
the standalone hook: ``_socket`` and the C JSON scanner for a unix socket.
"""

from __future__ import annotations

import sys

from ..core.deadline import timeout_reason
from ..service_client import (
    ServiceError,
    ServiceIdentityError,
    arm_deadline,
    ask_service,
    disarm_deadline,
    parse_budget,
    request,
    request_json,
    request_timeout_s,
    undecided_reason,
)
from . import claude_code as host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "LAUNCH_CODE",
    "ServiceError",
    "ServiceIdentityError",
    "main",
    "request",
    "request_json",
    "run",
]

LAUNCH_CODE = "from zerto_rewind.claude_code.thin_hook import run; run()"
DEFAULT_BUDGET_S = 150.0

_USAGE = """usage: zerto-rewind thin hook --service URL [--service-user NAME|UID] [--token-file F]
                                [--ca-file F] [--budget S]

Claude Code PreToolUse hook that asks the zerto-rewind guard service.
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:
        args = args[1:]
    try:
        opts = _options(args)
    except ValueError as exc:
        sys.stderr.write(f"zerto-rewind thin hook: {exc}; the call is blocked.\n{_USAGE}")
        return 2
    data = sys.stdin.buffer.read()
    try:
        payload = host.parse_input(data)
    except host.HookInputError as exc:
        sys.stderr.write(f"zerto-rewind hook: {exc}. The call is blocked; check the hook wiring.\n")
        return 2
    if payload.result is not None:
        # A post event: the call ran. The service holds the log and has no endpoint for
        # results yet, so install does not register the thin hook for it; say so, block
        # nothing.
        sys.stderr.write(
            f"zerto-rewind hook: the thin hook records no results; the result of "
            f"{payload.tool_name} was not recorded.\n"
        )
        return 0
    budget = float(opts.get("budget", DEFAULT_BUDGET_S))
    arm_deadline(budget, lambda: _timed_out(payload.tool_name, opts["service"], budget))
    try:
        answer = ask_service(opts, data, timeout_s=request_timeout_s(budget))
        text = _render(answer)
    except ServiceIdentityError as exc:
        text = _deny_identity(payload.tool_name, exc)
    except ServiceError as exc:
        text = _deny(payload.tool_name, opts["service"], str(exc))
    except Exception as exc:  # the last line of defence: deny, never crash
        text = _deny(payload.tool_name, opts["service"], f"{type(exc).__name__}: {exc}")
    disarm_deadline()
    if text:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    return 0


def _options(args: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    known = {"--service": "service", "--token-file": "token_file", "--ca-file": "ca_file",
             "--budget": "budget", "--service-user": "service_user"}  # fmt: skip
    i = 0
    while i < len(args):
        key = known.get(args[i])
        if key is None or i + 1 >= len(args):
            msg = f"unexpected arguments {args[i:]!r}"
            raise ValueError(msg)
        opts[key] = args[i + 1]
        i += 2
    if "service" not in opts:
        msg = "--service URL is required"
        raise ValueError(msg)
    if "budget" in opts:
        parse_budget(opts["budget"])
    return opts


# ---------------------------------------------------------------- the answer


def _render(answer: dict[str, Any]) -> str:
    prompt_as = answer.get("prompt_as") if answer.get("prompt_as") in ("ask", "deny") else "ask"
    return host.render(
        str(answer["outcome"]),
        str(answer.get("reason") or ""),
        str(answer.get("context") or ""),
        prompt_as=str(prompt_as),
    )


def _deny(tool: str, service: str, why: str) -> str:
    return host.render("deny", undecided_reason(tool, service, why), "")


def _timed_out(tool: str, service: str, budget: float) -> str:
    waited_on = f"the guard service at {service} did not answer in time"
    return host.render("deny", timeout_reason(tool, budget, waited_on, "the service"), "")


def _deny_identity(tool: str, exc: ServiceIdentityError) -> str:
    reason = f"zerto-rewind denied {tool}: {exc}; the call was not run. {exc.advice}"
    return host.render("deny", reason, "")


def run() -> None:
    """Entry point for ``python -c LAUNCH_CODE --service URL``."""
    sys.exit(main())
