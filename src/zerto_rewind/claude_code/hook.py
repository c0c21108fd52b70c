"""``zerto-rewind hook``: Claude Code's PreToolUse hook.

Reads the payload on stdin, asks the guard, answers on stdout. Three promises:

* **Fast read-only path.** Until the call is known to be something other than
  read-only, only built-ins and import-free project modules are loaded; no
  network, no ``json``/``re``/``httpx``.
* **Fail closed.** Bad stdin → exit 2 with the reason on stderr. A missing or
  invalid config → deny every call with "fix the config: …". Any error on a
  mutating or unlisted call → deny with a reason. Never a silent pass.
* **A hard deadline.** A watchdog thread answers deny-with-reason just before
  ``ZERTO_HOOK_GUARD_TIMEOUT`` even if the ZVM hangs mid-request, so the host's
  own (larger) timeout never has to fire.
"""

from __future__ import annotations

import os
import sys
import time

from ..config.loader import load_settings
from ..config.settings import Settings, default_log_path
from ..core.catalog import READ_ONLY, classify
from ..errors import ConfigError
from . import host as claude_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..core.decision import Decision, ToolCall

__all__ = ["LAUNCH_CODE", "LEGACY_LAUNCH_CODE", "main", "run"]

# What `zerto-rewind install` puts after `python -c`. Cheaper than `-m` (runpy
# costs ~7 ms, about half of bare interpreter start-up) or the console script
# (it imports `re`): see docs/performance.md.
LAUNCH_CODE = "from zerto_rewind.claude_code.hook import run; run()"
# What hooks installed before the layer folders run; zerto_rewind.hook still serves it.
LEGACY_LAUNCH_CODE = "from zerto_rewind.hook import run; run()"

_USAGE = """usage: zerto-rewind hook [--config PATH] [--mcp-server NAME]

Claude Code PreToolUse hook: reads the tool call as JSON on stdin, prints the
decision as JSON on stdout. --config overrides ZERTO_REWIND_CONFIG.
--mcp-server names zerto-rewind's MCP server as the host registered it (set by
install --with-mcp-server): the rewind hint then names its tool
mcp__NAME__zerto_recovery_plan instead of the CLI.
"""
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")

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
        text, code = claude_code.render("deny", reason, "")
        sys.stdout.write(text + "\n")
        return code


def _main(argv: list[str] | None, env: Mapping[str, str] | None, watchdog: bool) -> int:
    started_wall, started_mono = time.time(), time.monotonic()
    env = os.environ if env is None else env
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:  # `python -c LAUNCH_CODE hook --config F`
        args = args[1:]
    if args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(_USAGE)
        return 0
    options = dict(zip(args[::2], args[1::2], strict=False))
    if len(args) % 2 or not set(options) <= {"--config", "--mcp-server"}:
        sys.stderr.write(
            f"zerto-rewind hook: unexpected arguments {args!r}; the call is blocked.\n{_USAGE}"
        )
        return 2
    if "--config" in options:
        env = {**env, "ZERTO_REWIND_CONFIG": options["--config"]}
    server = options.get("--mcp-server", "")
    if not set(server) <= _NAME_CHARS:
        server = ""  # only a hint: an odd name falls back to the CLI command
    try:
        payload = claude_code.parse_input(sys.stdin.buffer.read())
    except claude_code.HookInputError as exc:
        sys.stderr.write(f"zerto-rewind hook: {exc}. The call is blocked; check the hook wiring.\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"zerto-rewind hook: cannot read stdin: {exc}. The call is blocked.\n")
        return 2
    try:
        settings = load_settings(env)
    except ConfigError as exc:
        return _config_denial(payload, str(exc), env, started_wall)
    try:
        read_only = (
            classify(payload.tool_name, payload.tool_input, settings.catalog).kind == READ_ONLY
        )
    except ConfigError:
        read_only = False  # the guarded path validates again and denies with the reason
    if read_only:
        return 0
    rewind_tool = f"mcp__{server}__zerto_recovery_plan" if server else None
    return _guarded(
        payload, settings, started_wall, started_mono, watchdog=watchdog, rewind_tool=rewind_tool
    )


def _guarded(
    payload: claude_code.HookInput,
    settings: Settings,
    started_wall: float,
    started_mono: float,
    *,
    watchdog: bool = True,
    rewind_tool: str | None = None,
) -> int:
    """The slow path: everything but a read-only call. Any failure here denies."""
    from ..core.decision import Decision, Outcome, Row, ToolCall

    call = ToolCall(
        payload.tool_name,
        payload.tool_input,
        session_id=payload.session_id,
        tool_use_id=payload.tool_use_id,
        started_at=started_wall,
    )
    answer = _Answer(settings, call)
    if watchdog:
        answer.arm_watchdog(started_mono + settings.guard.timeout_s - _WATCHDOG_MARGIN_S)
    try:
        from ..config.settings import validate_patterns
        from ..core.guard import Guard

        validate_patterns(settings)
        guard = Guard(settings, rewind_tool=rewind_tool)
        try:
            decision = guard.decide(call)
        finally:
            guard.close()
    except ConfigError as exc:
        decision = Decision(
            Row.CONFIG_ERROR, Outcome.DENY, call.tool_name, reason=f"fix the config: {exc}"
        )
    except Exception as exc:  # fail closed on anything, with the reason
        reason = (
            f"zerto-rewind hit an internal error ({type(exc).__name__}: {exc}) while guarding "
            f"{call.tool_name}; the call was not run. Run `zerto-rewind doctor`; retry once fixed."
        )
        decision = Decision(Row.ERROR, Outcome.DENY, call.tool_name, reason=reason)
    return answer.give(decision)


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
        from ..core.decision import Decision, Outcome, Row

        budget = self.settings.guard.timeout_s
        reason = (
            f"zerto-rewind could not confirm a checkpoint for {self.call.tool_name} within its "
            f"{budget:g} s budget (the ZVM at {self.settings.zvm.url} did not answer in time); "
            "the call was not run. Check the ZVM with `zerto-rewind doctor`, then retry."
        )
        decision = Decision(Row.ERROR, Outcome.DENY, self.call.tool_name, reason=reason)
        decision.elapsed_ms = int((time.time() - self.call.started_at) * 1000)
        code = self._deliver(decision)
        if code is None:
            return  # the guard answered while this one was being prepared
        sys.stdout.flush()
        os._exit(code)  # the guard thread may be stuck in a socket read

    def give(self, decision: Decision) -> int:
        code = self._deliver(decision)
        return 0 if code is None else code

    def _deliver(self, decision: Decision) -> int | None:
        """Write and log the decision; None if an answer was already given."""
        with self.lock:
            if self.given:
                return None
            self.given = True
            self.answered.set()
            text, code = claude_code.render(
                decision.outcome,
                decision.reason,
                decision.context,
                prompt_as=self.settings.guard.prompt_as,
            )
            if text:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            _ANSWERED.append(True)
            _log(self.settings.log_path, decision, self.call)
            return code


def _config_denial(
    payload: claude_code.HookInput, problem: str, env: Mapping[str, str], started: float
) -> int:
    """A broken config never switches the guard off: deny, say what to fix, log it."""
    from ..core.decision import Decision, Outcome, Row, ToolCall

    reason = f"zerto-rewind denied {payload.tool_name}: fix the config: {problem}"
    text, code = claude_code.render("deny", reason, "")
    sys.stdout.write(text + "\n")
    _ANSWERED.append(True)
    decision = Decision(Row.CONFIG_ERROR, Outcome.DENY, payload.tool_name, reason=reason)
    call = ToolCall(
        payload.tool_name, None, session_id=payload.session_id, tool_use_id=payload.tool_use_id
    )
    decision.elapsed_ms = int((time.time() - started) * 1000)
    _log(default_log_path(env), decision, call)
    return code


def _log(path: str, decision: Decision, call: ToolCall) -> None:
    from ..core.decisions_log import write_record
    from ..errors import StateError

    record: dict[str, Any] = decision.log_record(call)
    try:
        write_record(path, record)
    except (StateError, OSError) as exc:
        sys.stderr.write(f"zerto-rewind hook: decision not logged: {exc}\n")


def run() -> None:
    """Entry point for ``python -c LAUNCH_CODE hook [--config PATH]``."""
    sys.exit(main())


if __name__ == "__main__":
    run()
