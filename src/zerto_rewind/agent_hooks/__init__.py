"""The hooks of the other agent hosts: Codex ``PreToolUse``, Gemini CLI ``BeforeTool``,
Copilot CLI ``preToolUse``, each a thin client of the guard service.

They cover what the gateway cannot see: a direct call to a VM server that is not
behind the gateway (asked of the service, ``POST /v1/decide``), and a shell or file
call that would write the hook's own files (checked here, with
:mod:`zerto_rewind.selfprotect`, before the call runs).

* :mod:`.calls`: a host's call, normalised to the names the catalog and the
  self-protection check know (``mcp__<server>__<tool>``, ``Bash``, ``Write``);
* :mod:`.codex`, :mod:`.gemini`, :mod:`.copilot`: each host's stdin and stdout;
* :mod:`.hook`: the entry (``python -c LAUNCH_CODE --host NAME --service URL …``).

May import only the base modules (``errors``, ``_fastjson``, ``service_client``,
``selfprotect``): the hook runs for every matching call, read-only ones included,
and holds no config, no credential and no guard state. Never another door or ``cli``.
"""
