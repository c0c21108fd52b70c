"""The installers: what ``zerto-rewind install TARGET`` plans, writes and says.

Every install body lives here; ``cli/install_*`` only parses arguments, calls
one function of this package and lets the CLI's one error edge report a
refusal. The layout, one module per concern:

* :mod:`.claude_code`: ``install claude-code`` (reads what a plan needs, applies it);
* :mod:`.plan`: what that install will write and say, planned without touching a file;
* :mod:`.settings_file`: our entry in Claude Code's ``settings.json`` (build, find, merge);
* :mod:`.managed`: Claude Code's managed settings and a root-owned config;
* :mod:`.socket_trust`: whether the guard service's socket can be trusted;
* :mod:`.catalog_client`: what the guard service tells an installer (its catalog, budget);
* :mod:`.matcher`: the compiled ``PreToolUse`` matcher;
* :mod:`.plugin`: the hook and the MCP server as a Claude Code plugin (``install claude-plugin``);
* :mod:`.host_hook`: ``install host-hook``: the Codex, Gemini CLI or Copilot CLI hook;
* :mod:`.mcp_host`: ``install mcp-host``: a VM server moved behind the gateway;
* :mod:`.next_steps`: what ``install mcp-host`` says after it wired a host;
* :mod:`.report`: every install's summary, as text or one JSON object.

The hook files of Codex, Gemini CLI and Copilot CLI, the MCP hosts' config
files, the one reader of them all and the hooks' command line are one level up
(:mod:`..hooks`, :mod:`..files`, :mod:`..objectfile`, :mod:`..hook_command`): the
doctor reads them too.

May import the doors (the hooks' launch lines, the gateway's upstream checks),
``core``, ``config``, the rest of ``hostconfig`` and the base modules; only
``cli`` imports this package (``tests/unit/test_layers.py`` ranks it above the
doors). No hook path imports it.
"""
