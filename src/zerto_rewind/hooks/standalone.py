"""``zerto-rewind hook``: Claude Code's PreToolUse hook.

Reads the payload on stdin, asks the guard, answers on stdout. Three promises:

* **Fast read-only path.** Until the call is known to be something other than
  read-only, only built-ins and import-free project modules are loaded; no
  network, no ``json``/``re``/``httpx``.
* **Fail closed.** Bad stdin → exit 2 with the reason on stderr. A missing or
  invalid config, or one whose bytes differ from the SHA-256 pinned at install
  (``--config-sha256``) → deny every call that reaches the hook, with a reason
  for the human. Any error on a mutating or unlisted call → deny with a reason;
  a ZVM secret the config names but the hook cannot find (an unset variable) is
  such an error, whatever token is cached. Never a silent pass.
* **A hard deadline.** A watchdog thread answers deny-with-reason just before
  ``ZERTO_HOOK_GUARD_TIMEOUT`` even if the ZVM hangs mid-request, so the host's
  own (larger) timeout never has to fire.
"""

from __future__ import annotations

import os
import sys
import time

from ..config.loader import load_settings
from ..config.settings import LEGACY_LOG_NAME, Settings, default_log_path
from ..core.catalog import READ_ONLY, UNLISTED, classify
from ..errors import ConfigError
from ..hook_flags import hook_options
from . import claude_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..core.approval_policy import Approvals
    from ..core.catalog import Classification
    from ..core.decision import Decision, ToolCall
    from .protect import SelfProtection

__all__ = ["LAUNCH_CODE", "LEGACY_LAUNCH_CODE", "main", "run"]

# What `zerto-rewind install` puts after `python -c`. Cheaper than `-m` (runpy
# costs ~7 ms, about half of bare interpreter start-up) or the console script
# (it imports `re`): see docs/performance.md.
LAUNCH_CODE = "from zerto_rewind.hooks.standalone import run; run()"
# What hooks installed before the layer folders run. That import path is gone: doctor
# tells whoever still has it to install again.
LEGACY_LAUNCH_CODE = "from zerto_rewind.hook import run; run()"

_USAGE = """usage: zerto-rewind hook [--config PATH] [--config-sha256 HEX] [--settings FILE]
                         [--mcp-server NAME] [--all-tools]

Claude Code PreToolUse hook: reads the tool call as JSON on stdin, prints the
decision as JSON on stdout. --config overrides ZERTO_REWIND_CONFIG.
--config-sha256 pins the config (set by install): a config whose bytes differ
denies every call. --settings names the host settings file that holds the hook
(protected with guard.protect_self). --all-tools: install matched every tool,
so an unlisted Bash/Write/Edit call gets the unlisted rule.
--mcp-server names zerto-rewind's MCP server as the host registered it (set by
install --with-mcp-server): the rewind hint then names its tool
mcp__NAME__zerto_recovery_plan instead of the CLI.
"""
# The options the standalone hook takes (its flags: hook_flags.FLAGS, the table
# HookCommand writes and reads every hook's command with).
_TAKES = frozenset(("config", "config_sha256", "settings", "all_tools", "mcp_server"))
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")

# Claude Code's file and shell tools, watched with guard.protect_self (protect.SELF_TOOLS;
# repeated here so that other tools never import that module).
_SELF_TOOLS = frozenset(("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit"))
_SETTINGS_NAMES = (
    "settings.json",
    "settings.local.json",
    "managed-settings.json",
    LEGACY_LOG_NAME,  # the old default log: the log again if it is created
)
# The watchdog answers this long before the budget ends: room to write and exit.
_WATCHDOG_MARGIN_S = 0.3
# Set once a decision is on stdout; there must never be a second one.
_ANSWERED: list[bool] = []


def main(
    argv: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    watchdog: bool = True,
) -> int:
    """Run one hook invocation; returns the exit code. Never raises.

    ``watchdog=False`` is for in-process callers (tests) that must outlive the
    call: the watchdog ends its process with ``os._exit``. A parameter, not an
    environment variable, so that nothing the agent can set disarms it.
    """
    _ANSWERED.clear()
    try:
        return _main(argv, env, watchdog)
    except BaseException as exc:  # the last line of defence: deny, never crash
        if isinstance(exc, SystemExit | KeyboardInterrupt):
            raise
        if _ANSWERED:
            # A second JSON document would make Claude Code read stdout as plain
            # text, i.e. no decision at all: keep the answer already given.
            return 0
        reason = (
            f"zerto-rewind hook failed unexpectedly ({type(exc).__name__}: {exc}); the call was "
            "not run. Run `zerto-rewind doctor`, and report this if it persists."
        )
        sys.stdout.write(claude_code.render("deny", reason, "") + "\n")
        return 0


def _main(argv: list[str] | None, env: Mapping[str, str] | None, watchdog: bool) -> int:
    started_wall, started_mono = time.time(), time.monotonic()
    env = os.environ if env is None else env
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:  # `python -c LAUNCH_CODE hook --config F`
        args = args[1:]
    if args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(_USAGE)
        return 0
    try:
        command = hook_options(args, _TAKES)
    except ValueError as exc:
        sys.stderr.write(f"zerto-rewind hook: {exc}; the call is blocked.\n{_USAGE}")
        return 2
    if command["config"] is not None:
        env = {**env, "ZERTO_REWIND_CONFIG": command["config"]}
    try:
        payload = claude_code.parse_input(sys.stdin.buffer.read())
    except claude_code.HookInputError as exc:
        sys.stderr.write(f"zerto-rewind hook: {exc}. The call is blocked; check the hook wiring.\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"zerto-rewind hook: cannot read stdin: {exc}. The call is blocked.\n")
        return 2
    if payload.result is not None:  # a post event: the call ran
        return _after(payload, command, env)
    try:
        settings = load_settings(env, pin=command["config_sha256"])
    except ConfigError as exc:
        return _config_denial(payload, exc, env, started_wall)
    return _route(payload, settings, command, env, watchdog=watchdog,
                  started=(started_wall, started_mono))  # fmt: skip


def _route(
    payload: claude_code.HookInput,
    settings: Settings,
    command: dict[str, Any],
    env: Mapping[str, str],
    *,
    watchdog: bool,
    started: tuple[float, float],
) -> int:
    """Classify once, leave a read-only call at once, else run the pipeline's steps."""
    started_wall, started_mono = started
    server, all_tools = command["mcp_server"] or "", command["all_tools"]
    if not set(server) <= _NAME_CHARS:
        server = ""  # only a hint: an odd name falls back to the CLI command
    own_tool = payload.tool_name in _SELF_TOOLS and settings.guard.protect_self
    watch_own = own_tool and _may_name_own_files(payload, settings, command["settings"])
    verdict: Classification | None = None
    try:  # classified once, here: the pipeline's steps read this verdict
        verdict = classify(payload.tool_name, payload.tool_input, settings.catalog)
    except ConfigError:
        verdict = None  # the table classifies and denies with the reason
    kind = verdict.kind if verdict is not None else None
    # It reached the hook only to be checked for writes to the guard's files:
    only_own = own_tool and kind == UNLISTED and not all_tools
    if (kind == READ_ONLY or only_own) and not watch_own:
        return 0
    protection = None
    if watch_own:
        from .protect import SelfProtection

        protection = SelfProtection(
            settings, settings_file=command["settings"], env=env, cwd=payload.cwd
        )
        if kind == READ_ONLY or only_own:
            return _protect_only(payload, settings, protection, verdict, started_wall)
    rewind_tool = f"mcp__{server}__zerto_recovery_plan" if server else None
    return _guarded(
        payload,
        settings,
        started_wall,
        started_mono,
        watchdog=watchdog,
        rewind_tool=rewind_tool,
        verdict=verdict,
        protection=protection,
    )


def _call(payload: claude_code.HookInput, started_wall: float) -> ToolCall:
    from ..core.call_lookup import call_key
    from ..core.decision import ToolCall

    use_id = payload.tool_use_id or call_key(
        payload.session_id, payload.tool_name, payload.tool_input
    )
    return ToolCall(
        payload.tool_name,
        payload.tool_input,
        session_id=payload.session_id,
        tool_use_id=use_id,
        started_at=started_wall,
        principal=_principal(),
    )


def _after(payload: claude_code.HookInput, command: dict[str, Any], env: Mapping[str, str]) -> int:
    """A post event: the result of a change the guard let through is recorded (:mod:`.post`);
    a read-only call costs what its PreToolUse does. Nothing here blocks: the call ran."""
    problem: ConfigError | None = None
    try:
        settings = load_settings(env, pin=command["config_sha256"])
        kind = classify(payload.tool_name, payload.tool_input, settings.catalog).kind
    except ConfigError as exc:
        settings, kind, problem = None, None, exc
    if kind == READ_ONLY or (payload.tool_name in _SELF_TOOLS and kind == UNLISTED
                             and not command["all_tools"]):  # fmt: skip
        return 0
    _full_site()
    from .post import after

    return after(settings, problem, _call(payload, time.time()), payload.result or "unknown")


def _protect_only(
    payload: claude_code.HookInput,
    settings: Settings,
    protection: SelfProtection,
    verdict: Classification | None,
    started_wall: float,
) -> int:
    """A call that reached the hook only for the self-protection check: deny a write to
    the guard's files, say nothing otherwise (the guard does not watch it)."""
    if protection.hit(payload.tool_name, payload.tool_input) is None:
        return 0  # nothing of the pipeline is loaded for a harmless call
    from ..core.pipeline import decide

    call = _call(payload, started_wall)
    decision = decide(call, [protection], verdict=verdict)
    elapsed_ms = int((time.time() - started_wall) * 1000)
    return _Answer(settings, call).give(decision.but(elapsed_ms=elapsed_ms))


def _guarded(
    payload: claude_code.HookInput,
    settings: Settings,
    started_wall: float,
    started_mono: float,
    *,
    watchdog: bool = True,
    rewind_tool: str | None = None,
    verdict: Classification | None = None,
    protection: SelfProtection | None = None,
) -> int:
    """The slow path: everything but a read-only call. Any failure here denies."""
    _full_site()
    from ..core.decision import Decision, Outcome, Row

    call = _call(payload, started_wall)
    answer = _Answer(settings, call)
    if watchdog:
        answer.arm_watchdog(started_mono + settings.guard.timeout_s - _WATCHDOG_MARGIN_S)
    try:
        decision = _decide(settings, call, verdict, protection, rewind_tool)
    except ConfigError as exc:
        from .config_denial import config_denial_reason

        reason = config_denial_reason(call.tool_name, exc)
        decision = Decision(Row.CONFIG_ERROR, Outcome.DENY, call.tool_name, reason=reason)
    except Exception as exc:  # fail closed on anything, with the reason
        reason = (
            f"zerto-rewind hit an internal error ({type(exc).__name__}: {exc}) while guarding "
            f"{call.tool_name}; the call was not run. Run `zerto-rewind doctor`; retry once fixed."
        )
        decision = Decision(Row.ERROR, Outcome.DENY, call.tool_name, reason=reason)
    return answer.give(decision)


def _decide(
    settings: Settings,
    call: ToolCall,
    verdict: Classification | None,
    protection: SelfProtection | None,
    rewind_tool: str | None,
) -> Decision:
    """The hook's steps (core.pipeline): self-protection, the table, approvals."""
    from ..config.settings import validate_patterns
    from ..core.guard import Guard
    from ..core.pipeline import Policy, Table, decide

    validate_patterns(settings)
    _require_secrets(settings)
    guard = Guard(settings, rewind_tool=rewind_tool)
    policies: list[Policy] = [Table(guard)]
    if protection is not None:
        policies.append(protection)
    if settings.guard.prompt_via == "approvals":
        policies.append(_approvals(settings, call))
    try:
        return decide(call, policies, verdict=verdict)
    finally:
        guard.close()


def _principal() -> str:
    import getpass

    return f"hook:{getpass.getuser()}"


def _approvals(settings: Settings, call: ToolCall) -> Approvals:
    """``guard.prompt_via: approvals`` for headless runs: an approval of this very call lets
    it run (once); else deny, naming the request a person approves. The queue is the
    guard's state directory, which a standalone install shares with the agent's user
    (docs/approvals.md says what that means)."""
    from ..core.approval_policy import Approvals
    from ..core.state_store import open_approvals

    return Approvals(
        lambda: open_approvals(settings.state_connection_url(), settings.state_dir),
        settings.approvals,
        settings.log_path,
        principal=call.principal or _principal(),
    )


def _require_secrets(settings: Settings) -> None:
    """Each ZVM's secret is where the config says, or ConfigError naming the key to fix.

    Checked on every guarded call, not only when a token must be fetched: a cached
    token would otherwise let calls through on a config that `status` and a fresh
    token request refuse, until the token expires.
    """
    for zvm in settings.zvms.values():
        zvm.secret()


class _Answer:
    """Exactly one answer per hook, from the guard or from the watchdog, whichever is first."""

    def __init__(self, settings: Settings, call: ToolCall) -> None:
        import threading

        self.settings = settings
        self.call = call
        self.lock = threading.Lock()
        self.given = False
        self.answered = threading.Event()

    def arm_watchdog(self, at_mono: float) -> None:
        import threading

        def fire() -> None:
            # Wait on the answer rather than sleep: once it is given the watchdog
            # has nothing left to do, and must not end a process that lives on.
            if not self.answered.wait(max(0.0, at_mono - time.monotonic())):
                self._timeout()

        threading.Thread(target=fire, name="zerto-rewind-watchdog", daemon=True).start()

    def _timeout(self) -> None:
        from ..core.deadline import timeout_reason
        from ..core.decision import Decision, Outcome, Row

        zvms = self.settings.zvms
        where = (
            f"the ZVM at {self.settings.zvm.url} did not answer in time"
            if len(zvms) == 1
            else "a ZVM of the estate did not answer in time: "
            + ", ".join(f"site {site} at {zvm.url}" for site, zvm in zvms.items())
        )
        reason = timeout_reason(
            self.call.tool_name, self.settings.guard.timeout_s, where, "the ZVM"
        )
        elapsed_ms = int((time.time() - self.call.started_at) * 1000)
        decision = Decision(
            Row.ERROR, Outcome.DENY, self.call.tool_name, reason=reason, elapsed_ms=elapsed_ms
        )
        if not self._deliver(decision):
            return  # the guard answered while this one was being prepared
        sys.stdout.flush()
        os._exit(0)  # the guard thread may be stuck in a socket read

    def give(self, decision: Decision) -> int:
        """Answer with ``decision`` unless the watchdog already did; the exit code (0)."""
        self._deliver(decision)
        return 0

    def _deliver(self, decision: Decision) -> bool:
        """Write and log the decision; False if an answer was already given."""
        with self.lock:
            if self.given:
                return False
            self.given = True
            self.answered.set()
            from .hook_log import log

            # Recorded before it is given: what the host hears is what the log holds (a
            # call whose line cannot be written does not run).
            decision = log(self.settings.log_path, decision, self.call, self.settings)
            # A prompt is read by the person asked: it may show the host paths the call
            # names; the log line keeps the reason, which names the arguments only.
            shown = decision.for_approver() if decision.outcome == "prompt" else decision.reason
            text = claude_code.render(
                decision.outcome,
                shown,
                decision.context,
                prompt_as=self.settings.guard.prompt_as,
            )
            if text:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            _ANSWERED.append(True)
            return True


def _config_denial(
    payload: claude_code.HookInput, problem: ConfigError, env: Mapping[str, str], started: float
) -> int:
    """A broken or changed config never switches the guard off: deny every call, say why, log.

    Every call that reached the hook is denied, read-only-looking ones included: the
    classification comes from the config that cannot be trusted, and the call reached
    the hook only because the matcher compiled from the installed config selected it.
    """
    from ..core.decision import Decision, Outcome, Row, ToolCall
    from .config_denial import config_denial_reason
    from .hook_log import log

    reason = config_denial_reason(payload.tool_name, problem)
    elapsed_ms = int((time.time() - started) * 1000)
    decision = Decision(
        Row.CONFIG_ERROR, Outcome.DENY, payload.tool_name, reason=reason, elapsed_ms=elapsed_ms
    )
    call = ToolCall(
        payload.tool_name, None, session_id=payload.session_id, tool_use_id=payload.tool_use_id
    )
    log(default_log_path(env), decision, call)
    sys.stdout.write(claude_code.render("deny", reason, "") + "\n")
    _ANSWERED.append(True)
    return 0


def _may_name_own_files(
    payload: claude_code.HookInput, settings: Settings, settings_file: str | None
) -> bool:
    """False for a Bash command that cannot name a guard file: no ``/`` (every path form the
    scan looks for has one) and none of the bare names it looks for. Spares the common
    ``ls``/``git status`` the scan's module and its path resolution."""
    if payload.tool_name != "Bash":
        return True
    command = payload.tool_input.get("command") if isinstance(payload.tool_input, dict) else None
    if not isinstance(command, str) or "/" in command:
        return True
    names = (settings.path, settings.log_path, settings_file or "", *_SETTINGS_NAMES)
    return any(name.rpartition("/")[2] in command for name in names if name)


def _full_site() -> None:
    """An installed hook starts with ``python -S`` (no site-packages: the read-only path
    needs none). The guard needs them (httpx, redis): process the venv's site now."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def run() -> None:
    """Entry point for ``python -c LAUNCH_CODE hook [--config PATH]``."""
    sys.exit(main())


if __name__ == "__main__":
    run()
