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
  (with the options' table and reader of :mod:`zerto_rewind.hook_flags`);
* :mod:`.install`: the installers themselves (``zerto-rewind install TARGET``), a
  subpackage ranked above the doors, whose hooks it writes.

Apart from :mod:`.install`, it imports only ``config``, ``errors``, ``fsutil``,
``netutil`` and ``hook_flags``; ``cli`` and the hooks import it. Nothing is re-exported
here, so that importing one module does not load the others.
"""
