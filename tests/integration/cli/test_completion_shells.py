"""`zerto-rewind completion bash` sourced into a real bash completes commands and options."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

COMPLETE = """
source <("$PY" -m zerto_rewind completion bash)
complete_line() {
    read -ra COMP_WORDS <<< "$1"
    [[ "$1" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _shtab_zerto_rewind
    echo "${COMPREPLY[*]}"
}
complete_line "zerto-rewind ta"
complete_line "zerto-rewind status web-01 --"
complete_line "zerto-rewind install mcp-host --ser"
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_and_each_command_s_options() -> None:
    done = subprocess.run(
        ["bash", "-c", COMPLETE],
        env={"PY": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    command, status, mcp_host = done.stdout.splitlines()
    assert command.split() == ["tag"]
    assert {"--config", "--json", "--help"} <= set(status.split())
    assert mcp_host.split() == ["--server"]


def test_the_zsh_script_completes_the_same_tree() -> None:
    """A #compdef script naming each command's options; checked by `zsh -n` where zsh is."""
    script = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "completion", "zsh"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert script.startswith("#compdef zerto-rewind")
    assert "_shtab_zerto_rewind_status_options=(" in script
    assert "--tagged" in script
    if shutil.which("zsh") is None:
        return
    done = subprocess.run(["zsh", "-n"], input=script, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
