"""Whether a host's file or shell call would write a protected path (the guard's own files).

The check behind ``guard.protect_self`` (Claude Code's standalone hook) and the
Codex, Gemini CLI and Copilot CLI hooks, on calls already named as Claude Code
names them (``Write``, ``Edit``, ``MultiEdit``, ``NotebookEdit``, ``Bash``):

* **File tools**: an exact check of the target path — made absolute against the
  session's directory, symlinks resolved (the path itself, and its parent), and
  compared by device and inode too, so a hard link, a bind mount or another
  spelling of the name on a case-insensitive disk is the same file.
* **Bash**: a best-effort scan of the command string for the protected paths
  (absolute, resolved, ``~``/``$HOME`` forms, ``.claude/settings*.json``) next to
  something that can write (a redirection, ``sed``, ``cp``, ``python``…), and for
  the files' bare names as the target of a redirection or of ``tee``/``sed``/``mv``/…
  A command can always hide a path (variables, encodings, a script file).

What is protected is the door's to say (:class:`Protected` items). A base module:
``os`` and ``sys`` only, so a hook pays a few substring searches for a shell call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FILE_TOOLS", "Protected", "check"]

# Claude Code's tools that write files, and where each names its target.
FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
# Programs that write files (or run code that can): a protected path in the same
# command as one of these counts as a write.
_WRITERS = frozenset(
    (
        "tee", "sed", "perl", "ruby", "python", "python3", "node", "mv", "cp", "rm", "ln",
        "install", "chmod", "chown", "chgrp", "truncate", "dd", "rsync", "tar", "unzip",
        "patch", "awk", "gawk", "vi", "vim", "nvim", "nano", "ed", "ex", "touch", "mkdir",
        "rmdir", "unlink", "shred", "pip", "pip3", "uv", "git", "curl", "wget", "sponge",
        "bash", "sh", "zsh", "dash", "eval", "xargs", "find",
    )
)  # fmt: skip
# With only a bare file name (config.json, settings.json), fewer count: the name must be
# their argument or a redirection's target.
_NAME_WRITERS = frozenset(
    ("tee", "sed", "perl", "mv", "cp", "ln", "rm", "truncate", "dd", "install", "unlink", "shred")
)
_WORD_BREAKS = str.maketrans({c: " " for c in ";|&()`'\"=<>\n\t"})
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/~$")


class Protected:
    """One of the guard's own files or directories, and what to call it in a reason."""

    __slots__ = ("is_dir", "path", "real", "what")

    def __init__(self, what: str, path: str, *, is_dir: bool = False) -> None:
        self.what = what
        self.path = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
        self.real = os.path.realpath(self.path)
        self.is_dir = is_dir

    def contains(self, candidate: str) -> bool:
        for own in (self.path, self.real):
            if candidate == own or (self.is_dir and candidate.startswith(own.rstrip("/") + "/")):
                return True
        return False


def check(
    tool_name: str,
    tool_input: Any,
    items: list[Protected],
    *,
    cwd: str | None = None,
    home: str = "",
) -> tuple[Protected, str] | None:
    """The protected item a call would write, and the path as the call named it; else None."""
    if not isinstance(tool_input, dict):
        return None
    if tool_name in FILE_TOOLS:
        target = tool_input.get(FILE_TOOLS[tool_name])
        if not isinstance(target, str) or not target:
            return None
        hit = _file_hit(target, items, cwd)
        return (hit, target) if hit is not None else None
    if tool_name == "Bash":
        command = tool_input.get("command")
        if isinstance(command, str) and command:
            return _shell_hit(command, items, home)
    return None


# ------------------------------------------------------------------ file tools


def _file_hit(target: str, items: list[Protected], cwd: str | None) -> Protected | None:
    path = os.path.expanduser(target)
    if not os.path.isabs(path):
        path = os.path.join(cwd or os.getcwd(), path)
    path = os.path.normpath(path)
    parent, name = os.path.split(path)
    real_parent = os.path.realpath(parent)
    forms = {path, os.path.realpath(path), os.path.join(real_parent, name)}
    for item in items:
        if any(item.contains(form) for form in forms):
            return item
    return _same_file(path, real_parent, name, items)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _same_file(path: str, real_parent: str, name: str, items: list[Protected]) -> Protected | None:
    """Compare by device and inode: hard links, bind mounts, case-insensitive disks."""
    target = _identity(path)
    ancestors: list[tuple[int, int]] = []
    folder = real_parent
    while True:
        found = _identity(folder)
        if found is not None:
            ancestors.append(found)
        up = os.path.dirname(folder)
        if up == folder:
            break
        folder = up
    parent_id = ancestors[0] if ancestors else None
    for item in items:
        own = _identity(item.real)
        if item.is_dir:
            if own is not None and (own == target or own in ancestors):
                return item
            continue
        if own is not None and own == target:
            return item
        # Not there yet (or not the same inode): the same folder and the same name, any case.
        own_parent = _identity(os.path.dirname(item.real))
        same_name = os.path.basename(item.real).casefold() == name.casefold()
        if parent_id is not None and own_parent == parent_id and same_name:
            return item
    return None


# ------------------------------------------------------------------ Bash


def _needles(item: Protected, home: str) -> list[str]:
    found = []
    for form in dict.fromkeys((item.path, item.real)):
        found.append(form)
        if home and form.startswith(home.rstrip("/") + "/"):
            rest = form[len(home.rstrip("/")) + 1 :]
            found += [f"~/{rest}", f"$HOME/{rest}", f"${{HOME}}/{rest}"]
    if item.what.startswith("the host settings") and "/.claude/" in item.path:
        found.append(".claude/" + os.path.basename(item.path))
    return found


def _shell_hit(command: str, items: list[Protected], home: str) -> tuple[Protected, str] | None:
    for item in items:
        for needle in _needles(item, home):
            start = command.find(needle)
            while start >= 0:
                if _boundary(command, start, needle) and not _runs_from(command, start, item):
                    if _writes(command):
                        return item, needle
                    break
                start = command.find(needle, start + 1)
        if not item.is_dir:
            name = os.path.basename(item.path)
            if _names_as_target(command, name):
                return item, name
    return None


def _boundary(command: str, start: int, needle: str) -> bool:
    """The needle ends where the path does, or at a ``/`` (``/c.json.bak`` is not ``/c.json``)."""
    end = start + len(needle)
    return end >= len(command) or command[end] not in _PATH_CHARS or command[end] == "/"


def _runs_from(command: str, start: int, item: Protected) -> bool:
    """``/venv/bin/python script.py``: running a program from the venv, not writing it."""
    if not item.is_dir:
        return False
    rest = command[start:].split(None, 1)[0]
    if "/bin/" not in rest:
        return False
    program = rest.rsplit("/", 1)[-1]
    before = command[:start].rstrip(" \t'\"")
    at_start = not before or before[-1] in ";|&(`\n" or before.endswith(("exec", "env", "sudo"))
    words = command[start:].split(None, 4)[:4]
    pip = program.startswith(("pip", "uv")) or "pip" in words
    return at_start and not pip


def _writes(command: str) -> bool:
    """Something in the command can write a file: a redirection, or a writing program."""
    at = command.find(">")
    while at >= 0:
        after = command[at + 1 :].lstrip(">").lstrip()
        if command[at + 1 : at + 2] != "&" and not after.startswith(("/dev/null", "/dev/std")):
            return True
        at = command.find(">", at + 1)
    for word in command.translate(_WORD_BREAKS).split():
        if word.rsplit("/", 1)[-1] in _WRITERS or word in ("-i", "--in-place"):
            return True
    return False


def _names_as_target(command: str, name: str) -> bool:
    """The bare name as a word, after ``>`` or in a command run by a writing program."""
    start = command.find(name)
    while start >= 0:
        end = start + len(name)
        before = command[start - 1] if start else " "
        after = command[end] if end < len(command) else " "
        if before not in _PATH_CHARS and after not in _PATH_CHARS:
            lead = command[:start].rstrip(" '\"")
            if lead.endswith(">"):
                return True
            segment = lead.rsplit(";", 1)[-1].rsplit("|", 1)[-1].rsplit("&", 1)[-1]
            words = segment.translate(_WORD_BREAKS).split()
            if any(w.rsplit("/", 1)[-1] in _NAME_WRITERS for w in words):
                return True
        start = command.find(name, start + 1)
    return False
