"""The completion tree is the CLI's own parsers; without shtab the command says what to do."""

from __future__ import annotations

import argparse
import sys

import pytest

from zerto_rewind.cli import COMMANDS
from zerto_rewind.cli import main as cli_main
from zerto_rewind.cli.completion_cmd import command_tree
from zerto_rewind.cli.install_cmd import TARGETS


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_the_tree_has_every_command_every_install_target_and_their_options() -> None:
    commands = _choices(command_tree())
    assert set(commands) == set(COMMANDS)
    assert set(_choices(commands["install"])) == set(TARGETS)
    for name in ("status", "checkpoints", "tag"):
        assert "--config" in _options(commands[name]), name
    assert {"--json", "--name", "--timeout"} <= _options(commands["tag"])
    assert "--server" in _options(_choices(commands["install"])["mcp-host"])
    assert {"--listen", "--config"} <= _options(commands["gateway"])


def test_building_the_tree_leaves_argparse_as_it_was() -> None:
    command_tree()
    parsed = argparse.ArgumentParser().parse_args([])
    assert vars(parsed) == {}


def test_without_shtab_the_command_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "shtab", None)
    assert cli_main(["completion", "bash"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zerto-rewind completion: UsageError: shell completion needs the shtab")
    assert "pip install 'zerto-rewind[completion]'" in err
