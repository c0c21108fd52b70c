"""The guard's entry in Claude Code's ``settings.json``: build it, find it, merge it.

Library first: :func:`build_entry` makes the ``PreToolUse`` entry and
:func:`build_post_entry` the ``PostToolUse``/``PostToolUseFailure`` one (the same
command: the hook reads the event from its stdin and records the call's result),
:func:`merge` puts an entry into a settings dict under its event (replacing an
earlier zerto-rewind entry, keeping everything else), :func:`plan_timeout` keeps
the host's timeout above the guard's budget. The commands around them are
:mod:`.install` and :mod:`.plugin`.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError
from ..files import replace_with_backup
from ..hook_command import HookCommand
from ..objectfile import read_object_file

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MANAGED_SETTINGS",
    "POST_EVENTS",
    "build_entry",
    "build_post_entry",
    "build_thin_entry",
    "find_our_hooks",
    "handler_command",
    "hook_command",
    "is_our_hook",
    "is_thin_hook",
    "managed_settings_file",
    "mcp_server_entry",
    "merge",
    "plan_timeout",
    "read_settings",
    "render",
    "required_margin",
    "settings_file",
    "thin_hook_command",
    "write_settings",
]

DEFAULT_TIMEOUT_S = 180
STATUS_MESSAGE = "zerto-rewind: checkpoint before change"
# How our own entry is recognised in a settings file, whatever the interpreter path.
HOOK_MARKERS = (
    "zerto_rewind hook",
    "zerto-rewind hook",
    "zerto_rewind.hook",
    "zerto_rewind.claude_code.hook",
    "zerto_rewind.claude_code.thin_hook",
    "zerto_rewind.hooks.standalone",
    "zerto_rewind.hooks.thin",
)
# The thin hook, as install writes it now and as it wrote it before the hooks package.
THIN_MARKERS = ("zerto_rewind.hooks.thin", "zerto_rewind.claude_code.thin_hook")
EVENT = "PreToolUse"
# The events after a call that the standalone hook records results for (the hook's
# hooks.claude_code.POST_EVENTS; repeated so install does not import the hook).
POST_EVENTS = ("PostToolUse", "PostToolUseFailure")
# A post hook only reads the log's end and appends one line.
POST_TIMEOUT_S = 30
POST_STATUS_MESSAGE = "zerto-rewind: recording the result"
# Claude Code's managed policy file on Linux: the CLI's policy directory (``/etc/claude-code``,
# read from the 2.1.328 binary) joined with ``managed-settings.json``. Users and projects
# cannot override it, and ``allowManagedHooksOnly`` there turns every other hook off.
MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"


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


def launch_code(package_dir: str | None = None) -> str:
    """The ``-c`` program of an installed hook: find the package without ``site``, run the hook."""
    import json

    from ...hooks.standalone import LAUNCH_CODE

    if package_dir is None:  # <dir>/zerto_rewind/hostconfig/install/settings_file.py
        here = os.path.abspath(__file__)
        package_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    return f"import sys; sys.path[:0] = [{json.dumps(package_dir)}]; {LAUNCH_CODE}"


def hook_command(
    python: str,
    config: str,
    mcp_server: str | None = None,
    *,
    config_sha256: str | None = None,
    settings: str | None = None,
    all_tools: bool = False,
    package_dir: str | None = None,
) -> str:
    """The shell command Claude Code runs: absolute interpreter and config, shell-quoted.

    ``python -S -c 'sys.path[:0] = [DIR]; LAUNCH_CODE' hook`` rather than
    ``python -m zerto_rewind hook``: the same hook without runpy's start-up cost, and
    without ``site`` (the venv's .pth files, about 2 ms) on every tool call; the hook
    imports nothing from site-packages on its read-only path and runs ``site`` itself
    before the slow path. ``package_dir`` is the directory that holds the
    ``zerto_rewind`` package (default: where this one is installed).
    ``config_sha256`` pins the config: the hook denies every call once the file's bytes
    differ (Claude Code snapshots the command at session start, the config it reads
    on every call). ``settings`` is the host settings file the entry is written to (the
    hook protects it with ``guard.protect_self``); ``all_tools`` tells the hook that the
    matcher sends it every tool, so Bash/Write/Edit get the unlisted rule.
    ``mcp_server`` is zerto-rewind's MCP server as the host names it, when installed:
    the rewind hint then names its tool (it changes only that text, never a decision).
    """
    return HookCommand(
        HookCommand.launcher_for(python, launch_code(package_dir), isolated=True),
        config=config,
        config_sha256=config_sha256 or None,
        settings=settings or None,
        all_tools=all_tools,
        mcp_server=mcp_server or None,
    ).render()


def _entry(matcher: str, command: str, timeout_s: int) -> dict[str, Any]:
    """One ``hooks.PreToolUse`` entry: the same shape for the standalone and the thin hook."""
    return {
        "matcher": matcher,
        "hooks": [
            {
                "type": "command",
                "command": command,
                "timeout": timeout_s,
                # A timed-out or crashed hook must block the call, not let it run.
                "onFailure": "block",
                "statusMessage": STATUS_MESSAGE,
            }
        ],
    }


def build_post_entry(matcher: str, command: str) -> dict[str, Any]:
    """The entry of the post events: the hook's own command, a short timeout, and no
    ``onFailure: block`` (the call has run; a failure to record it blocks nothing)."""
    handler = {"type": "command", "command": command, "timeout": POST_TIMEOUT_S,
               "statusMessage": POST_STATUS_MESSAGE}  # fmt: skip
    return {"matcher": matcher, "hooks": [handler]}


def build_entry(
    *,
    python: str,
    config: str,
    matcher: str,
    timeout_s: int,
    mcp_server: str | None = None,
    config_sha256: str | None = None,
    settings: str | None = None,
    all_tools: bool = False,
    package_dir: str | None = None,
) -> dict[str, Any]:
    """One ``hooks.PreToolUse`` entry that runs the guard for tools ``matcher`` selects."""
    _require_absolute(("interpreter", python), ("config", config), ("settings", settings))
    command = hook_command(
        python,
        config,
        mcp_server,
        config_sha256=config_sha256,
        settings=settings,
        all_tools=all_tools,
        package_dir=package_dir,
    )
    return _entry(matcher, command, timeout_s)


def _require_absolute(*paths: tuple[str, str | None]) -> None:
    """ValueError naming the first of the hook's ``paths`` (what, path) that is relative."""
    for what, path in paths:
        if path is not None and not os.path.isabs(path):
            msg = f"the hook's {what} path must be absolute, not {path!r}"
            raise ValueError(msg)


def thin_hook_command(
    python: str,
    service: str,
    *,
    budget_s: int,
    token_file: str | None = None,
    ca_file: str | None = None,
    service_user: str | None = None,
) -> str:
    """The thin hook's shell command: absolute interpreter, the service, its budget.

    It names no config: the service classifies and tags with its own. ``hook``
    after the launch code marks it as ours for :func:`is_our_hook`, like the
    standalone hook's command. ``service_user`` (a uid: no lookup in the hook) is
    who must serve a unix socket.
    """
    from ...hooks.thin import LAUNCH_CODE

    return HookCommand(
        HookCommand.launcher_for(python, LAUNCH_CODE),
        service=service,
        service_user=service_user or None,
        token_file=token_file or None,
        ca_file=ca_file or None,
        budget=str(budget_s),
    ).render()


def build_thin_entry(
    *,
    python: str,
    service: str,
    matcher: str,
    timeout_s: int,
    budget_s: int,
    token_file: str | None = None,
    ca_file: str | None = None,
    service_user: str | None = None,
) -> dict[str, Any]:
    """The ``hooks.PreToolUse`` entry of a thin hook (``install claude-code --service``)."""
    _require_absolute(("interpreter", python), ("token file", token_file), ("CA file", ca_file))
    command = thin_hook_command(
        python,
        service,
        budget_s=budget_s,
        token_file=token_file,
        ca_file=ca_file,
        service_user=service_user,
    )
    return _entry(matcher, command, timeout_s)


def is_thin_hook(handler: Any) -> bool:
    """True for a hook handler that runs the thin hook (it asks a guard service)."""
    if not isinstance(handler, dict):
        return False
    args = handler.get("args")
    parts = [handler.get("command"), *(args if isinstance(args, list) else [])]
    return any(isinstance(p, str) and any(m in p for m in THIN_MARKERS) for p in parts)


def handler_command(handler: Mapping[str, Any]) -> HookCommand:
    """The command a hook handler runs (shell form, or exec form: ``command`` + ``args``).

    ValueError says why it cannot be read (no command, not valid shell).
    """
    command = handler.get("command")
    if not isinstance(command, str) or not command.strip():
        msg = "the hook has no command"
        raise ValueError(msg)
    args = handler.get("args")
    if isinstance(args, list):
        return HookCommand.from_argv([command, *map(str, args)])
    return HookCommand.parse(command)


def managed_settings_file(root: str = "/") -> str:
    """Claude Code's managed settings under ``root`` (``/`` on a real machine)."""
    return os.path.join(root, MANAGED_SETTINGS.lstrip("/"))


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


def find_our_hooks(
    settings: Mapping[str, Any], event: str = EVENT
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (entry, handler) pair under ``hooks.<event>`` that runs our hook."""
    hooks = settings.get("hooks")
    entries = hooks.get(event) if isinstance(hooks, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        handlers = entry.get("hooks") if isinstance(entry, dict) else None
        for handler in handlers if isinstance(handlers, list) else []:
            if is_our_hook(handler):
                found.append((entry, handler))
    return found


def merge(
    settings: Mapping[str, Any], entry: dict[str, Any] | None, event: str = EVENT
) -> dict[str, Any]:
    """A copy of ``settings`` with ``entry`` under ``hooks.<event>`` (None: our entry removed).

    An earlier zerto-rewind handler is replaced in place (its entry keeps any
    other handlers it holds); every other key, event and entry is untouched.
    ConfigError if ``hooks`` or ``hooks.<event>`` has an unexpected shape.
    """
    result = copy.deepcopy(dict(settings))
    hooks = result.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        msg = "must be an object of event name -> list of entries; fix it by hand"
        raise ConfigError(msg, key="hooks")
    if entry is None and event not in hooks:
        return result
    entries = hooks.setdefault(event, [])
    if not isinstance(entries, list):
        msg = "must be a list of {matcher, hooks} entries; fix it by hand"
        raise ConfigError(msg, key=f"hooks.{event}")
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
    if entry is not None:
        kept.insert(len(kept) if position is None else position, copy.deepcopy(entry))
    hooks[event] = kept
    return result


def mcp_server_entry(python: str, config: str) -> dict[str, Any]:
    """zerto-rewind's own MCP server as an ``mcpServers`` entry (stdio, absolute paths)."""
    return {
        "type": "stdio",
        "command": python,
        "args": ["-m", "zerto_rewind", "serve", "--config", config],
    }


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

    ConfigError (naming the file, what is wrong, what to do) when it is unreadable,
    not JSON or not an object: such a file is never overwritten.
    """
    read = read_object_file(path)
    return read.data, read.text


def write_settings(path: str, text: str, *, original: str | None) -> str | None:
    """Back up the old file (if any), then replace it atomically; returns the backup path."""
    return replace_with_backup(path, text, original=original)
