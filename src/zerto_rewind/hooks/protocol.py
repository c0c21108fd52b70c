"""What every host's protocol module shares: the host's description and the one reader of
a hook's stdin.

Kept small and import-free (the C JSON scanner, no :mod:`json`): the standalone hook
reads its stdin with it on every call, read-only ones included.
"""

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
