"""scripts/_pytest_run.sh: a pytest run only passes with a zero exit *and* its summary line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

HELPER = Path(__file__).resolve().parents[2] / "scripts" / "_pytest_run.sh"


def run_helper(output: str, code: int) -> int:
    """pytest_run around a stand-in for pytest that prints ``output`` and exits ``code``."""
    script = f'set -euo pipefail; source "{HELPER}"; pytest_run bash -c "$1"'
    fake = f"printf '%s\\n' {_quote(output)}; exit {code}"
    done = subprocess.run(
        ["bash", "-c", script, "test", fake], capture_output=True, text=True, check=False
    )
    return done.returncode


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.mark.parametrize(
    ("output", "code", "expected"),
    [
        ("========= 820 passed, 3 skipped in 125.34s (0:02:05) =========", 0, 0),
        ("7 passed in 2.48s", 0, 0),
        ("tests/unit/test_a.py ....", 0, 1),  # ended early: exit 0 but no summary
        ("", 0, 1),
        ("==== 1 failed, 6 passed in 7.39s ====", 1, 1),
        ("==== no tests ran in 0.01s ====", 5, 5),
    ],
)
def test_pytest_run_demands_the_summary_line(output: str, code: int, expected: int) -> None:
    """The exit code is pytest's, except that a silent early end turns 0 into 1."""
    assert run_helper(output, code) == expected


def test_a_process_left_behind_fails_the_run() -> None:
    """A command that passes but orphans a process: named (program only), killed, exit 1."""
    marker = "zr-reap-" + os.urandom(4).hex()
    script = f'set -euo pipefail; source "{HELPER}"; pytest_run bash -c "$1"'
    # An argument the report must not show: arguments may hold secrets.
    fake = f"(setsid bash -c 'sleep 300; :' {marker} &); printf '%s\\n' '7 passed in 2.48s'; exit 0"
    done = subprocess.run(
        ["bash", "-c", script, "test", fake], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert "outlived them" in done.stdout
    assert " sleep" in done.stdout
    assert " bash" in done.stdout
    assert marker not in done.stdout
    assert not _running(marker)


def test_a_clean_run_passes_the_reaper() -> None:
    assert run_helper("7 passed in 2.48s", 0) == 0


def _running(marker: str) -> bool:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    return True
        except OSError:
            continue
    return False
