"""The thin hook of every host: stdin → guard service → stdout.

``python [-S] -c LAUNCH_CODE hook [--host claude-code|codex|gemini|copilot] --service URL
--service-user UID [--servers a,b] [--prompt-as ask|deny] [--budget S]
[--token-file F] [--ca-file F] [--protect PATH]…`` (``install claude-code --service``
and ``install host-hook`` write it; without ``--host`` it is Claude Code's). The
options are read with :class:`~zerto_rewind.hostconfig.hook_command.HookCommand`,
the one table install and doctor use too.

* An MCP call is asked of the guard service (``POST /v1/decide``, through
  :mod:`zerto_rewind.service_client`), in the catalog's names; its answer is
  rendered in the host's own format (the host's protocol module:
  :mod:`.claude_code`, :mod:`.codex`, :mod:`.gemini`, :mod:`.copilot`), prompt
  mapped as that host enforces it. Claude Code's payload already is one in the
  catalog's names: it is sent as read, so nothing but the C JSON scanner loads.
* A shell or file call of Codex, Gemini CLI or Copilot CLI is checked here,
  against the host's own hook and MCP files, the Python environment the hook
  runs from, and every ``--protect`` path: a write to one of them is denied.
  Nothing else about it is asked: the service's catalog does not list host tools.
* After the call (Claude Code's ``PostToolUse``/``PostToolUseFailure``, Codex's
  ``PostToolUse``, Gemini's ``AfterTool``, Copilot's ``postToolUse``/
  ``postToolUseFailure``) an MCP call's result is posted to the service
  (``POST /v1/result``), which writes it only for a change it let through for
  this same caller. A shell or file call posts nothing (the service decided
  none). Nothing after the call blocks it (it ran): a result not recorded is said
  on stderr, with the exit code the host reads as non-blocking.

It holds no ZVM credential, reads no zerto-rewind config and keeps no guard
state: the service, which runs as another user or on another machine,
classifies the call with its own catalog and tags with its own credentials.

Fail closed, in the host's blocking form: bad stdin or options are the host's
blocking error; a service that cannot be reached, answers late or answers
nonsense is a deny with the reason; a timer answers deny before the budget
whatever the socket does (Codex, Gemini and Copilot all let the call run when the
*host's* timeout fires first, so install keeps it above the budget).
"""

from __future__ import annotations

import os
import sys

from ..core.deadline import timeout_reason
from ..hook_flags import HOST_NAMES
from ..hostconfig.hook_command import HookCommand
from ..service_client import (
    ServiceError,
    ServiceIdentityError,
    arm_deadline,
    ask_service,
    disarm_deadline,
    parse_budget,
    post_result,
    request_timeout_s,
    undecided_reason,
)
from . import claude_code, codex, copilot, gemini, selfprotect
from .calls import FILES, SHELL, HookInputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType
    from typing import Any

    from .calls import Call

__all__ = ["DEFAULT_BUDGET_S", "HOSTS", "LAUNCH_CODE", "main", "protected_items", "run"]

LAUNCH_CODE = "from zerto_rewind.hooks.thin import run; run()"
# --host NAME -> its protocol module, in the order of the one table of hosts.
HOSTS: dict[str, ModuleType] = dict(
    zip(HOST_NAMES, (claude_code, codex, gemini, copilot), strict=True)
)
DEFAULT_HOST = HOST_NAMES[0]  # the thin hook `install claude-code --service` writes has no --host
DEFAULT_BUDGET_S = codex.PROTOCOL.budget_s  # the other hosts' (Codex, Gemini, Copilot)
# How long the post event waits for the service to record a result.
RESULT_TIMEOUT_S = 10.0
# The service's refusals for a call that is no change: no decision line (read-only calls
# write none), or a decision that let nothing through.
_NOT_A_CHANGE = ("the service answered HTTP 404", "the service answered HTTP 409")
# The fields of HookCommand a thin hook takes.
_TAKES = frozenset(
    ("host", "service", "service_user", "token_file", "ca_file", "budget", "servers",
     "prompt_as", "protect")
)  # fmt: skip

_USAGE = """usage: python -c LAUNCH_CODE hook [--host claude-code|codex|gemini|copilot]
         --service URL [--service-user NAME|UID] [--servers a,b] [--prompt-as ask|deny]
         [--budget S] [--token-file F] [--ca-file F] [--protect PATH]...
"""


class Options:
    """The hook's command line, checked."""

    def __init__(self, command: HookCommand) -> None:
        name = command.host or DEFAULT_HOST
        self.host: ModuleType = HOSTS[name]
        self.service = command.service or ""
        self.budget = command.budget_s(self.host.PROTOCOL.budget_s)
        self.servers = command.servers or ()
        self.prompt_as = command.prompt_as or self.host.PROTOCOL.default_prompt
        self.protect = list(command.protect)
        self.client: dict[str, str] = command.service_options()
        self.client["installer"] = "claude-code" if name == DEFAULT_HOST else f"host-hook {name}"


def parse_options(args: list[str]) -> Options:
    """The options; ValueError says what is wrong (the hook then blocks the call)."""
    command = HookCommand.for_hook(args, _TAKES)
    host = command.host or DEFAULT_HOST
    if host not in HOSTS:
        msg = f"--host must be one of {', '.join(HOSTS)}, not {host!r}"
        raise ValueError(msg)
    if command.service is None:
        msg = "--service URL is required"
        raise ValueError(msg)
    choices = HOSTS[host].PROTOCOL.prompt_choices
    if (command.prompt_as or choices[0]) not in choices:
        msg = f"--prompt-as for {host} must be one of {', '.join(choices)}"
        raise ValueError(msg)
    if command.budget is not None:
        parse_budget(command.budget)
    return Options(command)


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    env = os.environ if env is None else env
    if args[:1] == ["hook"]:
        args = args[1:]
    host = HOSTS.get(_host_arg(args) or DEFAULT_HOST, codex)  # a blocking error in its form
    try:
        opts = parse_options(args)
    except ValueError as exc:
        return _block(host, f"zerto-rewind hook: {exc}; the call is blocked.\n{_USAGE}")
    data = sys.stdin.buffer.read()
    try:
        call = opts.host.parse(data, opts.servers)
    except HookInputError as exc:
        return _block(opts.host, f"zerto-rewind hook: {exc}. The call is blocked; check the hook.")
    if call.result is not None:  # after the call: its result is recorded, nothing blocked
        return _after(opts, call)
    text = _answer(opts, call, data, env)
    if text:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    return 0


def _answer(opts: Options, call: Call, data: bytes, env: Mapping[str, str]) -> str:
    """The host's text for the call: the service's decision, or a deny saying why none came."""
    host, service = opts.host, opts.service
    arm_deadline(opts.budget, lambda: _timed_out(host, call.host_tool, service, opts.budget))
    try:
        if call.kind in (SHELL, FILES):
            text = _check_own_files(opts, call, env)
        else:
            body = data if host.PROTOCOL.sends_stdin else call.payload()
            answer = ask_service(opts.client, body, timeout_s=request_timeout_s(opts.budget))
            text = _render(opts, answer)
    except ServiceIdentityError as exc:
        text = _deny_identity(host, call.host_tool, exc)
    except ServiceError as exc:
        text = _deny(host, call.host_tool, service, str(exc))
    except Exception as exc:  # the last line of defence: deny, never crash
        text = _deny(host, call.host_tool, service, f"{type(exc).__name__}: {exc}")
    disarm_deadline()
    return text


def _after(opts: Options, call: Call) -> int:
    """Post the result of an MCP call; a shell or file call posts nothing (the service
    decided none). A result not recorded is said on stderr; the call has run."""
    if call.kind in (SHELL, FILES):
        return 0
    body = call.payload(result=call.result or "unknown", host=opts.host.PROTOCOL.name)
    try:
        post_result(opts.client, body, timeout_s=min(RESULT_TIMEOUT_S, opts.budget))
    except Exception as exc:  # never block a call that already ran; say why
        why = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
        sys.stderr.write(
            f"zerto-rewind hook: the result of {call.host_tool} was not recorded by the guard "
            f"service ({opts.service}): {why}. The call itself ran.\n"
        )
        # 404 / 409: a call the service let through as no change (a read-only one) is
        # not an error of the guard.
        quiet = isinstance(exc, ServiceError) and str(exc).startswith(_NOT_A_CHANGE)
        return 0 if quiet else int(opts.host.POST_FAILURE_EXIT)
    return 0


def _host_arg(args: list[str]) -> str:
    for i, arg in enumerate(args[:-1]):
        if arg == "--host":
            return args[i + 1]
    return ""


def _block(host: ModuleType, reason: str) -> int:
    out, err, code = host.blocking(reason)
    if out:
        sys.stdout.write(out + "\n")
    sys.stderr.write(err + "\n")
    return int(code)


def _render(opts: Options, answer: dict[str, Any]) -> str:
    prompt_as = "deny" if answer.get("prompt_as") == "deny" else opts.prompt_as
    return str(
        opts.host.render(
            str(answer["outcome"]),
            str(answer.get("reason") or ""),
            str(answer.get("context") or ""),
            prompt_as=prompt_as,
        )
    )


def _timed_out(host: ModuleType, tool: str, service: str, budget: float) -> str:
    waited_on = f"the guard service at {service} did not answer in time"
    reason = timeout_reason(tool, budget, waited_on, "the service")
    return str(host.render("deny", reason, ""))


def _deny(host: ModuleType, tool: str, service: str, why: str) -> str:
    return str(host.render("deny", undecided_reason(tool, service, why), ""))


def _deny_identity(host: ModuleType, tool: str, exc: ServiceIdentityError) -> str:
    reason = f"zerto-rewind denied {tool}: {exc}; the call was not run. {exc.advice}"
    return str(host.render("deny", reason, ""))


# ------------------------------------------------------------------ own files


def protected_items(
    host: str, env: Mapping[str, str], cwd: str | None, extra: list[str]
) -> list[selfprotect.Protected]:
    """What a shell or file call must not write: the host's files that hold this hook (and
    its MCP servers, the gateway's entry among them), the hook's Python environment, and
    every ``--protect`` path (the hook file install wrote, the gateway's config)."""
    home = env.get("HOME", "") or os.path.expanduser("~")
    project = cwd or os.getcwd()
    hosts: list[str] = []
    dirs: list[str] = []
    if host == "codex":
        codex_home = env.get("CODEX_HOME") or os.path.join(home, ".codex")
        for base in (codex_home, os.path.join(project, ".codex")):
            hosts += [os.path.join(base, n) for n in ("hooks.json", "config.toml")]
    elif host == "gemini":
        for base in (home, env.get("GEMINI_PROJECT_DIR") or project):
            hosts.append(os.path.join(base, ".gemini", "settings.json"))
    else:
        copilot_home = env.get("COPILOT_HOME") or os.path.join(home, ".copilot")
        dirs += [os.path.join(copilot_home, "hooks"), os.path.join(project, ".github", "hooks")]
        hosts += [os.path.join(copilot_home, n) for n in ("settings.json", "config.json",
                                                         "mcp-config.json")]  # fmt: skip
        hosts += [os.path.join(project, ".github", "copilot", n)
                  for n in ("settings.json", "settings.local.json")]  # fmt: skip
        # Copilot also runs the hooks in Claude Code's settings files.
        hosts += [os.path.join(project, ".claude", n)
                  for n in ("settings.json", "settings.local.json")]  # fmt: skip
        hosts.append(os.path.join(home, ".claude", "settings.json"))
    what = "the host settings that hold the guard's hook"
    items = [selfprotect.Protected(what, path) for path in dict.fromkeys(hosts)]
    items += [selfprotect.Protected(what, path, is_dir=True) for path in dirs]
    items.append(
        selfprotect.Protected("the Python environment the hook runs from", sys.prefix, is_dir=True)
    )
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not items[-1].contains(package):  # an editable install: the code lives elsewhere
        items.append(selfprotect.Protected("the guard's code", package, is_dir=True))
    for path in extra:
        items.append(selfprotect.Protected("a file the guard's install protects", path,
                                           is_dir=os.path.isdir(path)))  # fmt: skip
    return items


def _check_own_files(opts: Options, call: Call, env: Mapping[str, str]) -> str:
    """A deny when the call would write one of the guard's files; else nothing."""
    items = protected_items(opts.host.PROTOCOL.name, env, call.cwd, opts.protect)
    home = env.get("HOME", "")
    hits = []
    if call.kind == SHELL:
        hits.append(selfprotect.check("Bash", {"command": call.command}, items, home=home))
    for path in call.paths:
        hits.append(selfprotect.check("Write", {"file_path": path}, items, cwd=call.cwd, home=home))
    for hit in hits:
        if hit is not None:
            item, named = hit
            reason = (
                f"zerto-rewind denied {call.host_tool}: it would write {item.what} ({named}). "
                "The guard's own files are not changed from an agent session; the call was not "
                "run. A wanted change is made by a person, outside the agent."
            )
            return str(opts.host.render("deny", reason, ""))
    return ""


def run() -> None:
    """Entry point for ``python [-S] -c LAUNCH_CODE hook [--host NAME] --service URL``."""
    sys.exit(main())
