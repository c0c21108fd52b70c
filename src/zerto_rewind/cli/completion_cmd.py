"""``zerto-rewind completion bash|zsh``: shell completion generated from the parsers.

Each subcommand builds its own :mod:`argparse` parser inside its entry point (so
``zerto-rewind hook`` pays for no other command). The tree for completion is put
together from those very parsers: each entry point is called with ``parse_args``
swapped for a catch that hands the parser back before anything runs. A new option
is therefore completed as soon as its command parses it, with no second list to
keep. `shtab <https://github.com/iterative/shtab>`_ writes the script; it is an
optional extra (``zerto-rewind[completion]``), imported by this command alone.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import UsageError

__all__ = ["command_tree", "main"]

SHELLS = ("bash", "zsh")
# Commands that parse no options with argparse: completed by name only.
_NO_PARSER = frozenset({"hook", "completion"})


@contextmanager
def _catching_parsers(caught: list[argparse.ArgumentParser]) -> Iterator[None]:
    """While inside, ``parse_args`` appends its parser to ``caught`` and exits at once."""
    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> Any:
        caught.append(self)
        raise SystemExit(0)  # before the command does anything with its arguments

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]


def _parser_of(module_name: str, function_name: str, argv: list[str]) -> argparse.ArgumentParser:
    __import__(module_name)
    function: Callable[..., Any] = getattr(sys.modules[module_name], function_name)
    caught: list[argparse.ArgumentParser] = []
    with _catching_parsers(caught), contextlib.suppress(SystemExit):
        function(argv)
    if not caught:
        msg = f"{module_name}.{function_name} parsed no arguments with argparse"
        raise AssertionError(msg)  # a command added without a parser: add it to _NO_PARSER
    return caught[0]


def command_tree() -> argparse.ArgumentParser:
    """One parser for the whole CLI: every command, install's targets, their options."""
    from . import COMMANDS
    from .install_cmd import TARGETS

    root = argparse.ArgumentParser(prog="zerto-rewind", description="zerto-rewind")
    root.add_argument("-V", "--version", action="store_true", help="print the version")
    commands = root.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, function_name, text) in COMMANDS.items():
        if name in _NO_PARSER:
            commands.add_parser(name, help=text)
        elif name == "install":
            install = commands.add_parser(name, help=text)
            targets = install.add_subparsers(dest="target", metavar="TARGET")
            for target, (module, function, keep, about) in TARGETS.items():
                parser = _parser_of(module, function, [target] if keep else [])
                targets.add_parser(target, parents=[parser], add_help=False, help=about)
        else:
            parser = _parser_of(module_name, function_name, [])
            commands.add_parser(name, parents=[parser], add_help=False, help=text)
    return root


def main(argv: list[str] | None = None) -> int:
    """Print the completion script for the shell named."""
    parser = argparse.ArgumentParser(
        prog="zerto-rewind completion",
        description="Print a shell completion script. bash: `source <(zerto-rewind completion "
        "bash)`; zsh: `zerto-rewind completion zsh > ~/.zfunc/_zerto-rewind` (a directory "
        "on your fpath).",
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete for")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import shtab
    except ImportError:
        msg = (
            "shell completion needs the shtab package, which is not installed here; "
            "install it into zerto-rewind's environment: pip install 'zerto-rewind[completion]'"
        )
        raise UsageError(msg) from None
    sys.stdout.write(shtab.complete(command_tree(), shell=args.shell))
    return 0
