"""The hook's command line, written and read in one place: :class:`HookCommand`.

Every hook zerto-rewind installs is one shell command, ``PYTHON [-S] -P -c CODE hook
OPTIONS``, in three shapes:

=================  =====================================================================
hook               its options (in the order :meth:`HookCommand.render` writes them)
=================  =====================================================================
Claude Code        ``--config C --config-sha256 H --settings F --all-tools --mcp-server N``
Claude Code, thin  ``--service URL --service-user UID --token-file F --ca-file F --budget S``
Codex, Gemini,     ``--host H --service URL --service-user UID --token-file F --ca-file F
Copilot            --servers A,B --prompt-as ask|deny --protect P… --budget S``
=================  =====================================================================

The installers build a :class:`HookCommand` and render it; the doctor parses
what a host's file holds back into one and checks its fields; each hook reads its
own command line with it too (:meth:`HookCommand.from_argv`), so the flags are
written, read and checked from the one table, :data:`FLAGS` (kept, with its reader,
in the package's module: a hook reads its options without loading this one). Parsing is
lenient where the doctor needs it (a hook refuses what :attr:`HookCommand.extra`
holds): a word it does not know is kept in
:attr:`HookCommand.extra` (and rendered last), a repeated option's last value
wins (as in the hooks), and ``NAME=value`` words before the program are the
command's environment. Nothing is imported at module level but the package's
table: it costs nothing to whoever imports it.
"""

from __future__ import annotations

from ..hook_flags import FLAGS, REPEATED, SWITCHES, hook_options, read_options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FLAGS", "HookCommand"]

# What the client of the guard service needs from the command (service_client's options).
_SERVICE_FIELDS = ("service", "service_user", "token_file", "ca_file")
# Every field but the launcher, in the constructor's order.
_FIELDS = ("env", *FLAGS.values(), "extra")


class HookCommand:
    """One hook's command line: how it starts (``launcher``) and each option's value.

    ``launcher`` holds the words before the options: the interpreter, its flags,
    ``-c CODE`` and the word ``hook``. An option that is absent is None (``()`` for
    ``protect``, False for ``all_tools``); ``budget`` stays the text written, so
    the doctor can say what is wrong with it. Immutable, compared by value. A plain
    class rather than a dataclass: the hooks read their own command line with it, on
    the read-only path, where ``dataclasses`` (and ``re``, ``inspect``) must not load.
    """

    __slots__ = ("launcher", *_FIELDS)

    launcher: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    host: str | None
    config: str | None
    config_sha256: str | None
    settings: str | None
    all_tools: bool
    mcp_server: str | None
    service: str | None
    service_user: str | None
    token_file: str | None
    ca_file: str | None
    servers: tuple[str, ...] | None
    prompt_as: str | None
    protect: tuple[str, ...]
    budget: str | None
    extra: tuple[str, ...]

    def __init__(
        self,
        launcher: tuple[str, ...],
        env: tuple[tuple[str, str], ...] = (),
        *,
        host: str | None = None,
        config: str | None = None,
        config_sha256: str | None = None,
        settings: str | None = None,
        all_tools: bool = False,
        mcp_server: str | None = None,
        service: str | None = None,
        service_user: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        servers: tuple[str, ...] | None = None,
        prompt_as: str | None = None,
        protect: tuple[str, ...] = (),
        budget: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        values = locals()
        for name in self.__slots__:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"HookCommand is immutable: cannot set {name}"
        raise AttributeError(msg)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HookCommand) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"HookCommand({shown})"

    # ------------------------------------------------------------ writing

    @staticmethod
    def launcher_for(python: str, code: str, *, isolated: bool = False) -> tuple[str, ...]:
        """``python [-S] -P -c code hook``: how every hook install writes starts.

        ``-P``: the host runs the hook in the agent's working directory, which the agent
        can write; without it ``-c`` puts that directory on ``sys.path``, and a
        ``__future__.py`` or ``_json.py`` (or, for a hook found through ``site``, a
        ``zerto_rewind/``) left there would run as the guard. It also spares the
        read-only path a look through that directory. ``isolated`` adds ``-S`` (no
        ``site``: the standalone hook runs it itself, off its read-only path).
        """
        return (python, *(["-S"] if isolated else []), "-P", "-c", code, "hook")

    def argv(self) -> list[str]:
        """The command's words (its environment left out), options in :data:`FLAGS` order."""
        words = list(self.launcher)
        for flag, name in FLAGS.items():
            value = getattr(self, name)
            if flag in SWITCHES:
                words += [flag] if value else []
            elif flag in REPEATED:
                for item in value:
                    words += [flag, item]
            elif name == "servers":
                words += [] if value is None else [flag, ",".join(value)]
            elif value is not None:
                words += [flag, str(value)]
        return [*words, *self.extra]

    def render(self) -> str:
        """The shell command a host runs: every word shell-quoted."""
        import shlex

        prefix = [f"{name}={value}" for name, value in self.env]
        return shlex.join([*prefix, *self.argv()])

    # ------------------------------------------------------------ reading

    @classmethod
    def parse(cls, command: str) -> HookCommand:
        """Read a shell command back; ValueError when it is not valid shell or empty."""
        import shlex

        try:
            words = shlex.split(command)
        except ValueError as exc:
            msg = f"the command is not valid shell ({exc})"
            raise ValueError(msg) from None
        return cls.from_argv(words)

    @classmethod
    def from_argv(cls, words: list[str]) -> HookCommand:
        """Read a command's words (the exec form a host may hold instead of a string)."""
        words = list(words)
        env: list[tuple[str, str]] = []
        while words and _is_assignment(words[0]):
            name, _, value = words.pop(0).partition("=")
            env.append((name, value))
        if not words:
            msg = "the hook has no command"
            raise ValueError(msg)
        # The options start at the first long option after the program.
        start = next((i for i, w in enumerate(words) if i and w.startswith("--")), len(words))
        return cls(tuple(words[:start]), tuple(env), **read_options(words[start:]))

    @classmethod
    def for_hook(cls, args: list[str], takes: frozenset[str]) -> HookCommand:
        """A hook's own options, the words after ``hook``; ValueError naming the words it
        does not take (``takes``: its fields), an unknown word or a value left out
        (:func:`~zerto_rewind.hook_flags.hook_options`, which a hook can call alone)."""
        return cls(("hook",), **hook_options(args, takes))

    # ------------------------------------------------------------ what it says

    @property
    def program(self) -> str:
        """The program the host runs (the interpreter, for every hook install writes)."""
        return self.launcher[0] if self.launcher else ""

    @property
    def runs_hook(self) -> bool:
        """Whether the launcher ends in ``hook`` (``… -c CODE hook``, ``zerto-rewind hook``)."""
        return self.launcher[-1:] == ("hook",)

    @property
    def code(self) -> str | None:
        """The ``-c`` program, if the launcher has one."""
        words = list(self.launcher)
        return words[words.index("-c") + 1] if "-c" in words[:-1] else None

    @property
    def config_path(self) -> str | None:
        """The config the hook reads: ``--config``, else ``ZERTO_REWIND_CONFIG=`` before it."""
        if self.config is not None:
            return self.config
        return dict(self.env).get("ZERTO_REWIND_CONFIG")

    def service_options(self) -> dict[str, str]:
        """The guard service as the hook's client reaches it (service, user, token, CA)."""
        found = {name: getattr(self, name) for name in _SERVICE_FIELDS}
        return {name: value for name, value in found.items() if value is not None}

    def budget_s(self, default: float) -> float:
        """``--budget`` in seconds; ``default`` when absent or not a number."""
        try:
            return float(self.budget) if self.budget is not None else default
        except ValueError:
            return default


def _is_assignment(word: str) -> bool:
    name, sep, _value = word.partition("=")
    return bool(sep) and name.isidentifier() and name.isascii()
