"""The hook files of Codex, Gemini CLI and Copilot CLI: where each lives, our entry, the merge.

``install host-hook HOST`` plans here, without touching a file, then writes:

=========  ======================================  ==================================
host       file (``--user`` / ``--project DIR``)   our entry
=========  ======================================  ==================================
codex      ``~/.codex/hooks.json`` /               ``hooks.PreToolUse[]``: matcher,
           ``DIR/.codex/hooks.json``               ``command``, ``timeout`` (s)
gemini     ``~/.gemini/settings.json`` /           ``hooks.BeforeTool[]``: matcher,
           ``DIR/.gemini/settings.json``           ``command``, ``name``, ``timeout`` (ms)
copilot    ``~/.copilot/hooks/zerto-rewind.json``  ``hooks.preToolUse[]``: ``version: 1``,
           / ``DIR/.github/hooks/zerto-rewind      ``bash``, ``timeoutSec``, matcher
           .json``
=========  ======================================  ==================================

Every other key and every other hook is kept; our own earlier entry (a handler
whose command runs :data:`HOOK_MARKER`) is replaced, so a re-run changes nothing.
A JSON file with comments (Gemini's ``settings.json`` may have them) is edited in
place, as ``install mcp-host`` edits it: only ``hooks`` changes, every other byte
stays. Where that cannot be done (a layout the editor does not read), a rewrite
would drop the comments: :class:`HookPlan` says so, and the installer asks for
``--force``.

The matchers are anchored regular expressions over the host's own tool names:
the VM servers' tools (Codex ``mcp__<server>__…``, Gemini ``mcp_<server>_…``,
Copilot ``<server>-…``) and the host's shell and file tools, which the hook
checks against its own files.

After the call, the same command is registered for the host's post events
(:data:`POST_EVENTS`: Codex ``PostToolUse``, Gemini ``AfterTool``, Copilot
``postToolUse`` and ``postToolUseFailure``), matched on the VM servers' tools
only (:func:`post_matcher_for`), with a short timeout: the hook posts the
change's result to the guard service.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.settings import home_dir
from ..errors import ConfigError
from .files import replace_with_backup, writing
from .formats import edit_json_servers, parse_jsonc
from .objectfile import read_object_file

__all__ = [
    "HOOK_HOSTS",
    "HOOK_MARKER",
    "POST_EVENTS",
    "HookPlan",
    "InstalledHook",
    "build_entry",
    "hook_file",
    "installed_hooks",
    "matcher_for",
    "missing_post_events",
    "plan_hook_file",
    "post_matcher_for",
    "write_hook_file",
]

HOOK_MARKER = "zerto_rewind.hooks.thin"
# Our hook, as install writes it now and as it wrote it before the hooks package.
HOOK_MARKERS = (HOOK_MARKER, "zerto_rewind.agent_hooks.hook")
HOOK_HOSTS = ("codex", "gemini", "copilot")
# host -> (the event key under "hooks", its shell and file tools as the host names them)
_EVENTS = {"codex": "PreToolUse", "gemini": "BeforeTool", "copilot": "preToolUse"}
# The events after the call each host's hook is registered for (hooks/<host>.py reads them).
POST_EVENTS = {
    "codex": ("PostToolUse",),
    "gemini": ("AfterTool",),
    "copilot": ("postToolUse", "postToolUseFailure"),
}
# A post hook posts one result: a short host timeout (s).
POST_TIMEOUT_S = 30
_OWN_TOOLS = {
    "codex": ("Bash", "apply_patch", "Edit", "Write"),
    "gemini": ("run_shell_command", "write_file", "replace"),
    "copilot": ("bash", "create", "edit"),
}
COPILOT_FILE = "zerto-rewind.json"
_NAME = "zerto-rewind"


def hook_file(host: str, *, project: str | None, env: Mapping[str, str]) -> str:
    """The host's hook file: the project's with ``project``, else the user's."""
    home = home_dir(env)
    if host == "codex":
        if project:
            return os.path.join(project, ".codex", "hooks.json")
        return os.path.join(env.get("CODEX_HOME") or os.path.join(home, ".codex"), "hooks.json")
    if host == "gemini":
        return os.path.join(project or home, ".gemini", "settings.json")
    if project:
        return os.path.join(project, ".github", "hooks", COPILOT_FILE)
    copilot_home = env.get("COPILOT_HOME") or os.path.join(home, ".copilot")
    return os.path.join(copilot_home, "hooks", COPILOT_FILE)


def matcher_for(host: str, servers: Sequence[str]) -> str:
    """The anchored regex of the tools the hook starts for: the servers', and the own tools."""
    names = "|".join(re.escape(_sanitised(host, s)) for s in servers)
    own = list(_OWN_TOOLS[host])
    if host == "codex":
        parts = [f"mcp__(?:{names})__.+", *own]
    elif host == "gemini":
        parts = [f"mcp_(?:{names})_.+", *own]
    else:
        parts = [f"(?:{names})-.+", *own]
    body = "|".join(parts)
    # Copilot anchors a matcher itself (^(?:…)$); the others get it written out.
    return body if host == "copilot" else f"^(?:{body})$"


def post_matcher_for(host: str, servers: Sequence[str]) -> str:
    """The post events' matcher: the servers' tools only (a host's own shell and file tools
    were never asked of the service, so they have no result to record)."""
    names = "|".join(re.escape(_sanitised(host, s)) for s in servers)
    body = {"codex": f"mcp__(?:{names})__.+", "gemini": f"mcp_(?:{names})_.+"}.get(
        host, f"(?:{names})-.+"
    )
    return body if host == "copilot" else f"^(?:{body})$"


def _sanitised(host: str, server: str) -> str:
    """The server as the host spells it in a tool name (Gemini replaces odd characters)."""
    if host == "gemini":
        return re.sub(r"[^A-Za-z0-9_\-.:]", "_", server)
    return server


def build_entry(host: str, *, command: str, matcher: str, timeout_s: int) -> dict[str, Any]:
    """Our entry under the host's event list."""
    if host == "codex":
        handler = {"type": "command", "command": command, "timeout": timeout_s,
                   "statusMessage": "zerto-rewind: checking the call"}  # fmt: skip
        return {"matcher": matcher, "hooks": [handler]}
    if host == "gemini":
        handler = {"type": "command", "command": command, "name": _NAME,
                   "timeout": timeout_s * 1000,
                   "description": "zerto-rewind: a checkpoint before a VM change"}  # fmt: skip
        return {"matcher": matcher, "hooks": [handler]}
    return {"type": "command", "bash": command, "timeoutSec": timeout_s, "matcher": matcher}


@dataclass(frozen=True)
class HookPlan:
    """What install will write: the file, its new text (None: unchanged), what it keeps."""

    host: str
    path: str
    text: str | None
    existed: bool
    kept_hooks: int
    drops_comments: bool


def plan_hook_file(
    host: str, path: str, entry: dict[str, Any], post: dict[str, Any] | None = None
) -> HookPlan:
    """Our entry merged into the file at ``path`` (and ``post`` under each of the host's
    post events); ConfigError when it cannot be read."""
    data, original, existed = _read(path)
    merged, kept = _merge(host, data, entry)
    if post is not None:
        for event in POST_EVENTS[host]:
            merged, _ = _merge(host, merged, post, event)
    if merged == data:
        return HookPlan(host, path, None, existed, kept, False)
    in_place = _edited_in_place(original, merged) if original else None
    if in_place is not None:
        return HookPlan(host, path, in_place, existed, kept, False)
    text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    return HookPlan(host, path, text, existed, kept, _has_comments(original))


def _edited_in_place(original: str, merged: dict[str, Any]) -> str | None:
    """``original`` with only its ``hooks`` changed (comments and layout kept), or None.

    The same in-place editor as ``install mcp-host``; the result must parse back to
    exactly ``merged``, else the caller rewrites the whole file. Copilot's
    ``version`` key is outside ``hooks``: a file without it is rewritten.
    """
    edited = edit_json_servers(original, (), "hooks", merged["hooks"])
    if edited is None:
        return None
    try:
        if parse_jsonc(edited) != merged:
            return None
    except ValueError:
        return None
    return edited


def _has_comments(original: str) -> bool:
    try:
        json.loads(original)
    except ValueError:
        return bool(original.strip())
    return False


def write_hook_file(plan: HookPlan) -> str | None:
    """Write the plan (atomically, keeping the file's mode); the backup's path, if any."""
    if plan.text is None:
        return None
    original = None
    if plan.existed:
        with writing(plan.path), open(plan.path, encoding="utf-8") as fh:
            original = fh.read()
    return replace_with_backup(plan.path, plan.text, original=original)


def _read(path: str) -> tuple[dict[str, Any], str, bool]:
    """(the file's object, its text, whether it exists); ConfigError when unusable."""
    read = read_object_file(path, "jsonc")
    text = read.text if read.text is not None and read.text.strip() else ""
    return read.data, text, read.exists


def _merge(
    host: str, data: dict[str, Any], entry: dict[str, Any], event: str | None = None
) -> tuple[dict[str, Any], int]:
    """``data`` with our entry under ``event`` (default: the host's pre-call event) in place
    of any earlier one; (the result, other hooks kept)."""
    merged = dict(data)
    hooks = merged.get("hooks", {})
    if not isinstance(hooks, dict):
        msg = "its hooks key is not an object; fix it by hand first"
        raise ConfigError(msg)
    hooks = dict(hooks)
    event = event or _EVENTS[host]
    current = hooks.get(event, [])
    if not isinstance(current, list):
        msg = f"its hooks.{event} is not a list; fix it by hand first"
        raise ConfigError(msg)
    kept: list[Any] = []
    for item in current:
        if host == "copilot":
            if not _ours(item):
                kept.append(item)
            continue
        handlers = item.get("hooks") if isinstance(item, dict) else None
        if not isinstance(handlers, list):
            kept.append(item)
            continue
        others = [h for h in handlers if not _ours(h)]
        if others:
            kept.append(item if len(others) == len(handlers) else {**item, "hooks": others})
    hooks[event] = [*kept, entry]
    merged["hooks"] = hooks
    if host == "copilot":
        merged = {"version": 1, **{k: v for k, v in merged.items() if k != "version"}}
    return merged, len(kept)


def _ours(handler: Any) -> bool:
    if not isinstance(handler, dict):
        return False
    return any(isinstance(handler.get(k), str) and any(m in handler[k] for m in HOOK_MARKERS)
               for k in ("command", "bash"))  # fmt: skip


def missing_post_events(host: str, path: str) -> list[str]:
    """The host's post events the file at ``path`` registers no hook of ours for (so the
    changes' results are not recorded); ConfigError when it cannot be read."""
    data, _text, _existed = _read(path)
    hooks = data.get("hooks")
    missing = []
    for event in POST_EVENTS[host]:
        items = hooks.get(event) if isinstance(hooks, dict) else None
        handlers = [
            handler
            for item in (items if isinstance(items, list) else [])
            for handler in _handlers(host, item)
        ]
        if not any(_ours(h) for h in handlers):
            missing.append(event)
    return missing


def _handlers(host: str, item: Any) -> list[Any]:
    if host == "copilot":
        return [item]
    handlers = item.get("hooks") if isinstance(item, dict) else None
    return handlers if isinstance(handlers, list) else []


@dataclass(frozen=True)
class InstalledHook:
    """Our hook as a host's file holds it: its command, matcher and the host's timeout (s)."""

    host: str
    path: str
    command: str
    matcher: str
    timeout_s: float | None


def installed_hooks(host: str, path: str) -> list[InstalledHook]:
    """Our entries in the host's hook file at ``path`` (none when it is missing).

    ConfigError when the file cannot be read. ``timeout_s`` is the host's own
    timeout in seconds (Gemini writes milliseconds), None when the entry has none.
    """
    data, _text, existed = _read(path)
    if not existed:
        return []
    hooks = data.get("hooks")
    items = hooks.get(_EVENTS[host]) if isinstance(hooks, dict) else None
    if not isinstance(items, list):
        return []
    found = []
    for item in items:
        if not isinstance(item, dict):
            continue
        handlers = [item] if host == "copilot" else item.get("hooks")
        for handler in handlers if isinstance(handlers, list) else []:
            if not _ours(handler):
                continue
            command = handler.get("bash" if host == "copilot" else "command")
            raw = handler.get("timeoutSec" if host == "copilot" else "timeout")
            timeout = None
            if isinstance(raw, int | float) and not isinstance(raw, bool):
                timeout = raw / 1000 if host == "gemini" else float(raw)
            matcher = item.get("matcher")
            shown = matcher if isinstance(matcher, str) else ""
            found.append(InstalledHook(host, path, str(command), shown, timeout))
    return found
