"""The one table of every hook's command-line options, the hosts ``--host`` names, and the
options' reader.

:class:`~zerto_rewind.hostconfig.hook_command.HookCommand` writes and reads a whole
hook command with :data:`FLAGS` (install and doctor alike); a hook reads its own options
with :func:`hook_options` alone. A base module of its own, import-free and outside any
package but the root, so that the standalone hook's read-only path loads this one small
module and no ``hostconfig`` package (``tests/unit/hooks/test_fast_path.py``); the
guard service reads :data:`HOST_NAMES` here too, without the hooks.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FLAGS", "HOST_NAMES", "REPEATED", "SWITCHES", "hook_options", "read_options"]

# The values of ``--host``: every agent host a thin hook speaks for (one protocol module
# each in ``hooks``), the default first. The guard service takes a result line from these
# hosts alone (``gateway.decide``).
HOST_NAMES = ("claude-code", "codex", "gemini", "copilot")

# flag -> field: the one table of the options every hook takes, in render order.
# "--all-tools" is the only switch and "--protect" the only repeated option.
FLAGS: dict[str, str] = {
    "--host": "host",
    "--config": "config",
    "--config-sha256": "config_sha256",
    "--settings": "settings",
    "--all-tools": "all_tools",
    "--mcp-server": "mcp_server",
    "--service": "service",
    "--service-user": "service_user",
    "--token-file": "token_file",
    "--ca-file": "ca_file",
    "--servers": "servers",
    "--prompt-as": "prompt_as",
    "--protect": "protect",
    "--budget": "budget",
}
SWITCHES = frozenset({"--all-tools"})
REPEATED = frozenset({"--protect"})


def read_options(words: list[str]) -> dict[str, Any]:
    """The options in ``words`` by field (a switch True, ``--servers`` a tuple, ``protect``
    every value in order, else the last value); a word the table does not know, or an
    option without its value, is kept in order under ``extra``."""
    values: dict[str, Any] = {"protect": (), "extra": ()}
    i = 0
    while i < len(words):
        flag = words[i]
        name = FLAGS.get(flag)
        if name is not None and flag in SWITCHES:
            values[name] = True
            i += 1
            continue
        if name is None or i + 1 >= len(words):
            values["extra"] = (*values["extra"], flag)
            i += 1
            continue
        value = words[i + 1]
        if flag in REPEATED:
            values[name] = (*values[name], value)
        elif name == "servers":
            values[name] = tuple(s for s in value.split(",") if s)
        else:
            values[name] = value
        i += 2
    return values


def hook_options(args: list[str], takes: frozenset[str]) -> dict[str, Any]:
    """A hook's own options, the words after ``hook``: each field of ``takes`` (None, or
    False for a switch, () for ``protect``, when absent); ValueError naming the words it
    does not take, an unknown word or a value left out."""
    start = next((i for i, word in enumerate(args) if word.startswith("--")), len(args))
    values = read_options(args[start:])
    stray = [*args[:start], *values["extra"]]
    stray += [
        flag
        for flag, name in FLAGS.items()
        if name not in takes and values.get(name) not in (None, False, ())
    ]
    if stray:
        msg = f"unexpected arguments {stray!r}"
        raise ValueError(msg)
    absent = {"all_tools": False, "protect": ()}
    return {name: values.get(name, absent.get(name)) for name in takes}
