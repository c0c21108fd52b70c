"""``zerto-rewind install claude-code``: merge the guard hook into Claude Code's settings.

Library first: :func:`build_entry` makes the ``PreToolUse`` entry, :func:`merge`
puts it into a settings dict (replacing an earlier zerto-rewind entry, keeping
everything else), :func:`plan_timeout` keeps the host's timeout above the
guard's budget. :func:`main` is the thin command around them: it refuses a
config that does not load and a settings file that is not JSON, backs up what
it changes and writes atomically.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Mapping
from typing import Any

from .config import Settings, config_path, load_settings, validate_patterns
from .errors import ConfigError, StateError, ZertoRewindError
from .fsutil import atomic_write_text
from .matcher import compile_matcher

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "build_entry",
    "find_our_hooks",
    "hook_command",
    "is_our_hook",
    "main",
    "merge",
    "plan_timeout",
    "required_margin",
    "settings_file",
]

DEFAULT_TIMEOUT_S = 180
STATUS_MESSAGE = "zerto-rewind: checkpoint before change"
# How our own entry is recognised in a settings file, whatever the interpreter path.
HOOK_MARKERS = ("zerto_rewind hook", "zerto-rewind hook", "zerto_rewind.hook")
EVENT = "PreToolUse"


# ------------------------------------------------------------------ pure parts


def required_margin(budget_s: float) -> float:
    """How far the host timeout must exceed the guard budget: 10 s or 10 %, whichever is more.

    The guard answers (deny, with a reason) just before its budget; the host
    needs room to read that answer before its own timeout cancels the hook.
    """
    return max(10.0, 0.1 * budget_s)


def plan_timeout(requested_s: float, budget_s: float) -> tuple[int, str | None]:
    """The host timeout to write, and a note when ``requested_s`` had to be raised."""
    requested = math.ceil(requested_s)
    if requested >= budget_s + required_margin(budget_s):
        return requested, None
    raised = math.ceil(budget_s + max(30.0, required_margin(budget_s)))
    note = (
        f"timeout raised from {requested} s to {raised} s: it must exceed the guard budget "
        f"({budget_s:g} s, guard.timeout_s / ZERTO_HOOK_GUARD_TIMEOUT) by at least "
        f"{required_margin(budget_s):g} s, or the host would cancel the hook before it answers"
    )
    return raised, note


def hook_command(python: str, config: str) -> str:
    """The shell command Claude Code runs: absolute interpreter and config, shell-quoted.

    ``python -c LAUNCH_CODE hook`` rather than ``python -m zerto_rewind hook``:
    the same hook, without runpy's start-up cost on every tool call.
    """
    from .hook import LAUNCH_CODE

    code = shlex.quote(LAUNCH_CODE)
    return f"{shlex.quote(python)} -c {code} hook --config {shlex.quote(config)}"


def build_entry(*, python: str, config: str, matcher: str, timeout_s: int) -> dict[str, Any]:
    """One ``hooks.PreToolUse`` entry that runs the guard for tools ``matcher`` selects."""
    for what, path in (("interpreter", python), ("config", config)):
        if not os.path.isabs(path):
            msg = f"the hook's {what} path must be absolute, not {path!r}"
            raise ValueError(msg)
    return {
        "matcher": matcher,
        "hooks": [
            {
                "type": "command",
                "command": hook_command(python, config),
                "timeout": timeout_s,
                # A timed-out or crashed hook must block the call, not let it run.
                "onFailure": "block",
                "statusMessage": STATUS_MESSAGE,
            }
        ],
    }


def is_our_hook(handler: Any) -> bool:
    """True for a hook handler that runs ``zerto-rewind hook`` (shell or exec form)."""
    if not isinstance(handler, dict):
        return False
    parts = [handler.get("command")]
    args = handler.get("args")
    if isinstance(args, list):
        parts += args
    text = " ".join(str(p) for p in parts if isinstance(p, str))
    return any(marker in text for marker in HOOK_MARKERS)


def find_our_hooks(settings: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (entry, handler) pair under ``hooks.PreToolUse`` that runs our hook."""
    hooks = settings.get("hooks")
    entries = hooks.get(EVENT) if isinstance(hooks, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        handlers = entry.get("hooks") if isinstance(entry, dict) else None
        for handler in handlers if isinstance(handlers, list) else []:
            if is_our_hook(handler):
                found.append((entry, handler))
    return found


def merge(settings: Mapping[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` with ``entry`` under ``hooks.PreToolUse``.

    An earlier zerto-rewind handler is replaced in place (its entry keeps any
    other handlers it holds); every other key, event and entry is untouched.
    ConfigError if ``hooks`` or ``hooks.PreToolUse`` has an unexpected shape.
    """
    result = copy.deepcopy(dict(settings))
    hooks = result.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        msg = "must be an object of event name -> list of entries; fix it by hand"
        raise ConfigError(msg, key="hooks")
    entries = hooks.setdefault(EVENT, [])
    if not isinstance(entries, list):
        msg = "must be a list of {matcher, hooks} entries; fix it by hand"
        raise ConfigError(msg, key=f"hooks.{EVENT}")
    kept: list[Any] = []
    position: int | None = None
    for item in entries:
        handlers = item.get("hooks") if isinstance(item, dict) else None
        if not isinstance(handlers, list) or not any(is_our_hook(h) for h in handlers):
            kept.append(item)
            continue
        position = len(kept) if position is None else position
        others = [h for h in handlers if not is_our_hook(h)]
        if others:  # someone put other handlers next to ours: keep them
            kept.append({**item, "hooks": others})
    kept.insert(len(kept) if position is None else position, copy.deepcopy(entry))
    hooks[EVENT] = kept
    return result


def render(settings: Mapping[str, Any]) -> str:
    """Settings as Claude Code's files usually look: indent 2, UTF-8, final newline."""
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def settings_file(*, project: str | None, user: bool, home: str) -> str:
    """``DIR/.claude/settings.json`` for a project, ``~/.claude/settings.json`` for the user."""
    base = home if user else os.path.abspath(os.path.expanduser(project or "."))
    return os.path.join(base, ".claude", "settings.json")


# ------------------------------------------------------------------ files


def read_settings(path: str) -> tuple[dict[str, Any], str | None]:
    """The settings in ``path`` (``{}`` if absent) and the original text, if any.

    ConfigError (naming the file) when it is unreadable, not JSON or not an
    object: such a file is never overwritten.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read it ({exc}); nothing was written"
        raise ConfigError(msg, path=path) from None
    if not text.strip():
        return {}, text
    try:
        data = json.loads(text)
    except ValueError as exc:
        msg = f"not valid JSON ({exc}); fix or move the file, nothing was written"
        raise ConfigError(msg, path=path) from None
    if not isinstance(data, dict):
        msg = "must hold a JSON object; fix or move the file, nothing was written"
        raise ConfigError(msg, path=path)
    return data, text


def write_settings(path: str, text: str, *, original: str | None) -> str | None:
    """Back up the old file (if any), then replace it atomically; returns the backup path."""
    backup = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mode = 0o644
        if original is not None:
            mode = os.stat(path).st_mode & 0o777
            backup = _free_name(f"{path}.bak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
            atomic_write_text(backup, original, mode=mode)
        atomic_write_text(path, text, mode=mode)
    except OSError as exc:
        msg = f"cannot write it: {exc.strerror or exc}"
        raise ConfigError(msg, path=path) from None
    except StateError as exc:
        raise ConfigError(str(exc)) from None
    return backup


def _free_name(path: str) -> str:
    candidate, n = path, 1
    while os.path.exists(candidate):
        candidate, n = f"{path}-{n}", n + 1
    return candidate


# ------------------------------------------------------------------ command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind install",
        description="Install the zerto-rewind PreToolUse hook into an agent host's settings.",
        epilog="`zerto-rewind install claude-plugin --out DIR` builds a Claude Code plugin.",
    )
    parser.add_argument("host", choices=["claude-code"], help="the agent host")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--project", metavar="DIR", help="write DIR/.claude/settings.json")
    where.add_argument("--user", action="store_true", help="write ~/.claude/settings.json")
    parser.add_argument(
        "--config", metavar="PATH", help="the zerto-rewind config (default: ZERTO_REWIND_CONFIG)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resulting settings, write nothing"
    )
    parser.add_argument(
        "--all-tools",
        action="store_true",
        help="run the hook for every tool that is not read-only, not just the catalog's servers",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"the host's hook timeout in seconds (default {DEFAULT_TIMEOUT_S})",
    )
    return parser


def load_config(env: Mapping[str, str]) -> Settings:
    """Load and fully validate the config the hook will use; ConfigError if it is broken."""
    settings = load_settings(env)
    validate_patterns(settings)
    return settings


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``zerto-rewind install``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["claude-plugin"]:
        from .plugin import main as plugin_main

        return plugin_main(argv[1:], env)
    args = _parser().parse_args(argv)
    env = dict(os.environ if env is None else env)
    if args.config:
        env["ZERTO_REWIND_CONFIG"] = args.config
    try:
        return _install(args, env)
    except ZertoRewindError as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1


def _install(args: argparse.Namespace, env: dict[str, str]) -> int:
    config = config_path(env)  # absolute, from --config or ZERTO_REWIND_CONFIG
    try:
        settings = load_config(env)
    except ConfigError as exc:
        return _refuse(
            f"{exc}\nNot installed: fix the config first (a broken one denies every call)."
        )
    if args.project is not None and not os.path.isdir(os.path.expanduser(args.project)):
        return _refuse(f"--project {args.project}: no such directory")
    if not sys.executable:
        return _refuse("cannot tell which Python runs zerto-rewind (sys.executable is empty)")
    # abspath, not realpath: a venv's bin/python is a symlink, and only the venv
    # path makes the interpreter find the venv's site-packages.
    python = os.path.abspath(sys.executable)
    timeout, note = plan_timeout(args.timeout, settings.guard.timeout_s)
    try:
        matcher = compile_matcher(settings.catalog, all_tools=args.all_tools)
    except ConfigError as exc:
        return _refuse(f"{config}: {exc.detail}")
    entry = build_entry(python=python, config=config, matcher=matcher, timeout_s=timeout)
    home = env.get("HOME") or os.path.expanduser("~")
    path = settings_file(project=args.project, user=args.user, home=home)
    current, original = read_settings(path)
    try:
        text = render(merge(current, entry))
    except ConfigError as exc:
        raise ConfigError(exc.detail, path=path, key=exc.key) from None
    summary = [
        f"settings: {path}",
        f"matcher:  {matcher}",
        f"command:  {entry['hooks'][0]['command']}",
        f"timeout:  {timeout} s (guard budget {settings.guard.timeout_s:g} s), onFailure: block",
    ]
    if note:
        summary.append(f"note:     {note}")
    if args.dry_run:
        sys.stdout.write(text)
        sys.stderr.write("\n".join(["dry run, nothing written", *summary]) + "\n")
        return 0
    if text == original:
        print("\n".join(["already installed, nothing to change", *summary]))
        return 0
    backup = write_settings(path, text, original=original)
    lines = ["installed the zerto-rewind hook", *summary]
    if backup:
        lines.append(f"backup:   {backup}")
    lines.append("check it with: zerto-rewind doctor " + _doctor_args(args, config))
    print("\n".join(lines))
    return 0


def _refuse(message: str) -> int:
    sys.stderr.write(f"zerto-rewind install: {message}\n")
    return 1


def _doctor_args(args: argparse.Namespace, config: str) -> str:
    project = os.path.abspath(os.path.expanduser(args.project or "."))
    where = "--user" if args.user else f"--project {shlex.quote(project)}"
    return f"--config {shlex.quote(config)} {where}"


if __name__ == "__main__":
    sys.exit(main())
