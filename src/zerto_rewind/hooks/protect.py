"""Self-protection (``guard.protect_self``): deny a host file or shell call that would write
the guard's own files.

On a single-user install the hook, its config, its state and its venv belong to the
agent's own user, so the agent's tools can write them. With ``protect_self`` on,
``install`` adds Claude Code's file and shell tools (:data:`SELF_TOOLS`) to the matcher
and the hook checks each such call here, before anything else:

* **File tools** (``Write``, ``Edit``, ``MultiEdit``, ``NotebookEdit``): an exact check
  of the target path — made absolute against the session's directory, symlinks
  resolved (the path itself, and its parent), and compared by device and inode too, so
  a hard link, a bind mount or another spelling of the name on a case-insensitive disk
  is the same file.
* **Bash**: a best-effort scan of the command string for the protected paths (absolute,
  resolved, ``~``/``$HOME`` forms, ``.claude/settings*.json``) next to something that
  can write (a redirection, ``sed``, ``cp``, ``python``…), and for the config's and
  settings' bare names as the target of a redirection or of ``tee``/``sed``/``mv``/…
  A command can always hide a path (variables, encodings, a script file); the pin on
  the config catches what gets through to it, and README's security section says so.

Protected: the config, the host settings files that can hold the hook (the one install
wrote, the project's ``.claude/settings.json`` and ``settings.local.json``, the user's
``~/.claude/settings.json``, the managed settings file), the state directory, the
decision log, the Python environment the hook runs from (``sys.prefix``) and the
zerto_rewind package itself when it lives outside it (an editable install).

The check itself is :mod:`.selfprotect` (shared with the other hosts'
hooks); this module says what the standalone hook protects. Import-light: ``os``
and ``sys`` only.
"""

from __future__ import annotations

import os
import sys

from ..config.settings import legacy_log_path
from .selfprotect import FILE_TOOLS, Protected, check

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..config.settings import Settings
    from ..core.decision import Decision, ToolCall

__all__ = ["FILE_TOOLS", "SELF_TOOLS", "Protected", "SelfProtection", "check", "protected_paths"]

SELF_TOOLS = ("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit")

MANAGED_SETTINGS = {
    "linux": "/etc/claude-code/managed-settings.json",
    "darwin": "/Library/Application Support/ClaudeCode/managed-settings.json",
}


def protected_paths(
    settings: Settings, *, settings_file: str | None, env: Mapping[str, str]
) -> list[Protected]:
    """The guard's own files for this hook: from the settings, the hook command, the env."""
    items = [
        Protected("the guard's config", settings.path),
        Protected("the guard's decision log", settings.log_path),
        Protected("the guard's state directory", settings.state_dir, is_dir=True),
        Protected("the Python environment the hook runs from", sys.prefix, is_dir=True),
    ]
    legacy = legacy_log_path(env) if env.get("HOME") else None
    if legacy is not None and legacy != settings.log_path:
        # Were it created, the hook would log there (the old default stays the log while
        # it exists): the agent must not move the log by making that file.
        items.append(Protected("the guard's decision log (its old default path)", legacy))
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not items[-1].contains(package):  # an editable install: the code lives elsewhere
        items.append(Protected("the guard's code", package, is_dir=True))
    hosts: list[str] = []
    if settings_file:
        hosts.append(settings_file)
        folder = os.path.dirname(os.path.abspath(settings_file))
        if os.path.basename(folder) == ".claude":
            hosts += [os.path.join(folder, n) for n in ("settings.json", "settings.local.json")]
    project = env.get("CLAUDE_PROJECT_DIR", "")
    if project:
        hosts += [
            os.path.join(project, ".claude", n) for n in ("settings.json", "settings.local.json")
        ]
    home = env.get("HOME", "")
    if home:
        hosts.append(os.path.join(home, ".claude", "settings.json"))
    managed = MANAGED_SETTINGS.get(sys.platform)
    if managed:
        hosts.append(managed)
    for path in dict.fromkeys(hosts):
        items.append(Protected("the host settings that hold the guard's hook", path))
    return items


class SelfProtection:
    """The pipeline's ``self_protection`` step (core.pipeline): a file or shell call that
    would write the guard's own files is denied, before the table is asked."""

    name = "self_protection"

    def __init__(
        self,
        settings: Settings,
        *,
        settings_file: str | None,
        env: Mapping[str, str],
        cwd: str | None,
    ) -> None:
        """``cwd``: the session's directory, as the host reported it."""
        self.settings = settings
        self.settings_file = settings_file
        self.env = env
        self.cwd = cwd or env.get("CLAUDE_PROJECT_DIR") or None

    def hit(self, tool_name: str, tool_input: object) -> tuple[Protected, str] | None:
        """The guard's file the call would write, and how it names it; None if none.
        Import-light: the hook asks it before it loads the rest of the pipeline."""
        if tool_name not in SELF_TOOLS:
            return None
        items = protected_paths(self.settings, settings_file=self.settings_file, env=self.env)
        home = self.env.get("HOME", "")
        return check(tool_name, tool_input, items, cwd=self.cwd, home=home)

    def apply(self, call: ToolCall, so_far: Decision) -> Decision | None:
        from ..core.decision import Decision, Outcome, Row

        if so_far.row != Row.UNDECIDED:
            return None
        hit = self.hit(call.tool_name, call.tool_input)
        if hit is None:
            return None
        item, named = hit
        how = (
            f"the command names {item.what} ({named}) next to something that can write files"
            if call.tool_name == "Bash"
            else f"it would write {item.what} ({named})"
        )
        reason = (
            f"zerto-rewind denied {call.tool_name}: {how}. The guard does not let the agent "
            "session it watches change the guard's own files, so the call was not run. If the "
            "change is wanted, a person makes it outside the agent session."
        )
        return Decision(Row.PROTECTED, Outcome.DENY, call.tool_name, reason=reason)
