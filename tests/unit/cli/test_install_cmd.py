"""``zerto-rewind install``: every target is listed in the help and dispatched to its door."""

from __future__ import annotations

import pytest

from zerto_rewind.cli import main as cli_main
from zerto_rewind.cli.install_cmd import TARGETS


def test_install_help_lists_every_target(capsys: pytest.CaptureFixture[str]) -> None:
    """claude-code, claude-plugin and mcp-host, one line each."""
    assert cli_main(["install", "--help"]) == 0
    out = capsys.readouterr().out
    for target in ("claude-code", "claude-plugin", "mcp-host"):
        (line,) = [ln for ln in out.splitlines() if ln.strip().startswith(target + " ")]
        assert len(line.split(None, 1)[1]) > 10  # with a description


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_each_target_reaches_its_own_parser(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`install TARGET --help` is the target's own help, not the dispatcher's."""
    with pytest.raises(SystemExit) as stop:
        cli_main(["install", target, "--help"])
    assert stop.value.code == 0
    assert f"zerto-rewind install {target}" in capsys.readouterr().out


def test_an_unknown_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 and the list of targets."""
    assert cli_main(["install", "cursor"]) == 2
    assert "mcp-host" in capsys.readouterr().err
