"""Agent-host config files: which hosts exist, where their MCP servers live, what each entry is.

One package for every file an MCP host (Claude Code, Claude Desktop, Cursor,
VS Code, Codex, Gemini CLI, Copilot CLI) keeps its servers in, used by ``install mcp-host``,
``install claude-code``, the doctor and the gateway's installer alike:

* :mod:`.specs`: each host's :class:`~.specs.HostSpec` and default paths;
* :mod:`.files`: reading (JSON, JSONC, TOML) and writing (atomic, backed up);
* :mod:`.formats`: the text formats (JSONC reading and in-place editing, TOML editing);
* :mod:`.entries`: what an entry is (the gateway, zerto-rewind, a VM server);
* :mod:`.move`: the pure move of a VM server behind the gateway;
* :mod:`.bypass`: the doctor's scan for entries that bypass the gateway;
* :mod:`.claude`: every MCP source Claude Code reads for a project or a user;
* :mod:`.hooks`: the hook files of Codex, Gemini CLI and Copilot CLI (``install host-hook``);
* :mod:`.objectfile`: every host file read one way, with one message when it cannot be;
* :mod:`.hook_command`: every hook's command line, written and read as one value
  (its options' table and reader are here, in the package's own module);
* :mod:`.install`: the installers themselves (``zerto-rewind install TARGET``), a
  subpackage ranked above the doors, whose hooks it writes.

Apart from :mod:`.install`, it imports only ``config``, ``errors``, ``fsutil`` and
``netutil``; ``cli`` and the hooks import it, the gateway its table of hosts. Nothing
is re-exported here, so that importing one module does not load the others. This
module holds only the one table of every hook's options, :data:`FLAGS`, the values
of ``--host`` (:data:`HOST_NAMES`), and its reader: :class:`.hook_command.HookCommand`
writes and reads a whole command with them, and a hook reads its own options with
:func:`hook_options` alone, so that its read-only path loads this small, import-free
module and not :mod:`.hook_command` (``tests/unit/hooks/test_fast_path.py``).
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
