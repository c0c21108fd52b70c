"""The hooks: what an agent host runs before (and after) each tool call, as one story.

Two runners, one protocol module per host:

==================  ==================================================================
module              what it is
==================  ==================================================================
:mod:`.standalone`  the standalone runner (Claude Code): stdin → the guard's pipeline,
                    in process, with the config and the ZVM credentials → stdout;
                    after the call (``PostToolUse``), the change's result line
                    (:mod:`.post`). Its steps: :mod:`.protect` (``protect_self``),
                    the table, approvals; its log: :mod:`.hook_log`; a broken
                    config's denial: :mod:`.config_denial`.
:mod:`.thin`        the thin runner, every host's: stdin → the guard service
                    (``POST /v1/decide``, :mod:`zerto_rewind.service_client`) →
                    stdout; a shell or file call checked against the hook's own
                    files here (:mod:`.selfprotect`); after the call, its result
                    posted to ``POST /v1/result``.
:mod:`.claude_code` Claude Code's ``PreToolUse``/``PostToolUse``: parse, render, block.
:mod:`.codex`       Codex CLI's ``PreToolUse``/``PostToolUse``.
:mod:`.gemini`      Gemini CLI's ``BeforeTool``/``AfterTool``.
:mod:`.copilot`     Copilot CLI's ``preToolUse``/``postToolUse``.
:mod:`.calls`       a host's call normalised to the catalog's names (:class:`.calls.Call`).
:mod:`.protocol`    what the protocol modules share: :class:`.protocol.Host` and the one
                    reader of a hook's stdin.
==================  ==================================================================

Each protocol module has the same names: ``PROTOCOL`` (a :class:`.protocol.Host`:
the host's name, event, prompt forms, the thin hook's budget), ``EVENT``,
``parse(data, servers) -> Call``, ``render(outcome, reason, context, prompt_as=…) -> str``
and ``blocking(reason) -> (stdout, stderr, exit code)``. Both runners read their command
line with :class:`zerto_rewind.hostconfig.hook_command.HookCommand`, the table that
install writes it with and doctor reads it back with.

May import ``core``, ``config``, ``zvm``, ``service_client``,
``hostconfig.hook_command`` and the base modules. Never another door or ``cli``.
Import-free itself, and so is every module on the read-only path (``claude_code``,
``protocol``, ``calls``, ``standalone``, ``thin``, ``hostconfig.hook_command``):
``tests/unit/hooks/test_fast_path.py`` and ``test_thin_fast_path.py`` guard it.
"""
