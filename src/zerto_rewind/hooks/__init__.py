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
(this module)       what the protocol modules share: :class:`Host` and the one reader of
                    a hook's stdin (:func:`load_object`), here rather than in a module of
                    their own so that the read-only path loads one module fewer.
==================  ==================================================================

Each protocol module has the same names: ``PROTOCOL`` (a :class:`Host`:
the host's name, event, prompt forms, the thin hook's budget), ``EVENT``,
``parse(data, servers) -> Call``, ``render(outcome, reason, context, prompt_as=…) -> str``
and ``blocking(reason) -> (stdout, stderr, exit code)``. Both runners read their command
line with the table that install writes it with and doctor reads it back with
(:data:`zerto_rewind.hook_flags.FLAGS`): the thin runner with
:class:`~zerto_rewind.hostconfig.hook_command.HookCommand`, the standalone one with
its reader alone, :func:`zerto_rewind.hook_flags.hook_options`.

May import ``core``, ``config``, ``zvm``, ``service_client``, ``hostconfig`` (its
``hook_command``) and the base modules. Never another door or ``cli``.
It imports only ``_fastjson`` and ``errors`` itself, and every module on the read-only
path (``claude_code``, ``calls``, ``standalone``, ``thin``, ``hook_flags``,
``hostconfig.hook_command``) only such import-free modules:
``tests/unit/hooks/test_fast_path.py`` and ``test_thin_fast_path.py`` guard it.
"""

# What every host's protocol module shares: kept small and import-free (the C JSON scanner,
# no :mod:`json`): the standalone hook reads its stdin with it on every call.

from __future__ import annotations

from .. import _fastjson
from ..errors import HookInputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_INPUT_BYTES", "Host", "load_object", "tool_name_of"]

# Bounded so a runaway payload cannot make the guard slow; real inputs are KBs.
MAX_INPUT_BYTES = 8 * 1024 * 1024


class Host:
    """What the runners need of a host's hook protocol besides its module's ``parse``,
    ``render`` and ``blocking``: the host's name, its pre-call event, the forms of a prompt
    it enforces (the first is the default), the thin hook's default budget, and whether
    the service is sent stdin as read (it names the call as the catalog does) rather than
    :meth:`Call.payload`."""

    __slots__ = ("budget_s", "event", "name", "prompt_choices", "sends_stdin")

    def __init__(
        self,
        name: str,
        event: str,
        prompt_choices: tuple[str, ...],
        *,
        budget_s: float = 25.0,  # under Copilot's default 30 s host timeout
        sends_stdin: bool = False,
    ) -> None:
        self.name, self.event, self.prompt_choices = name, event, prompt_choices
        self.budget_s, self.sends_stdin = budget_s, sends_stdin

    @property
    def default_prompt(self) -> str:
        return self.prompt_choices[0]


def load_object(data: bytes) -> dict[str, Any]:
    """Stdin as a JSON object; HookInputError says what is wrong."""
    try:
        return _fastjson.loads_hook_input(data, MAX_INPUT_BYTES)
    except ValueError as exc:
        raise HookInputError(str(exc)) from None


def tool_name_of(raw: dict[str, Any], *keys: str) -> str:
    """The first of ``keys`` that holds a non-empty string; HookInputError without one."""
    for key in keys:
        value = raw.get(key)
        if isinstance(value, str) and value.strip():
            return value
    msg = f"hook input has no {keys[0]} string"
    raise HookInputError(msg)
