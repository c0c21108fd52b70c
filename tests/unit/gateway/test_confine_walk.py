"""The launcher's way to a command (gateway/confine.py, ``blocked``), on a real file tree.

Which path stops a user is proven with real users in
tests/integration/gateway/test_upstream_startup.py; here, as whoever runs the
tests, the walk itself: PATH lookup, symbolic links (relative and absolute, in
chains), ``#!`` interpreters (``env`` included), and what it names when a step
is missing, a directory, or not executable.
"""

from __future__ import annotations

import os
from pathlib import Path

from zerto_rewind.gateway.confine import blocked


def executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_reachable_program_passes(tmp_path: Path) -> None:
    tool = executable(tmp_path / "bin" / "tool")
    assert blocked(str(tool)) is None
    assert blocked("tool", str(tmp_path / "bin")) is None


def test_a_missing_program_names_path(tmp_path: Path) -> None:
    assert blocked("nosuch", f"{tmp_path}/a:{tmp_path}/b") == (
        f"nosuch is in no directory of PATH ({tmp_path}/a:{tmp_path}/b)"
    )
    assert blocked(str(tmp_path / "x" / "tool")) == f"{tmp_path / 'x'}: No such file or directory"


def test_a_link_chain_is_followed_and_named(tmp_path: Path) -> None:
    """venv/bin/python -> python3 (relative) -> an absolute target that is missing."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(tmp_path / "gone" / "python3.11")
    (bin_dir / "python").symlink_to("python3")
    assert blocked(str(bin_dir / "python")) == (
        f"{tmp_path / 'gone'}: No such file or directory, on the way through "
        f"{bin_dir / 'python'} -> {bin_dir / 'python3'}; "
        f"{bin_dir / 'python3'} -> {tmp_path / 'gone' / 'python3.11'}"
    )


def test_a_script_names_its_interpreter(tmp_path: Path) -> None:
    script = executable(tmp_path / "bin" / "mcvsphere", "#!/nonexistent/bin/python -I\n")
    assert blocked(str(script)) == (
        f"the interpreter of {script}, /nonexistent/bin/python: "
        "/nonexistent: No such file or directory"
    )


def test_env_looks_the_interpreter_up_on_path(tmp_path: Path) -> None:
    script = executable(tmp_path / "bin" / "server", "#!/usr/bin/env zr-no-such-python\n")
    search = str(tmp_path / "bin")
    assert blocked(str(script), search) == (
        f"the interpreter of {script}, zr-no-such-python: "
        f"zr-no-such-python is in no directory of PATH ({search})"
    )
    executable(tmp_path / "bin" / "zr-no-such-python")
    assert blocked(str(script), search) is None


def test_a_directory_or_a_plain_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    plain = tmp_path / "plain"
    plain.write_text("data")
    plain.chmod(0o644)
    assert blocked(str(tmp_path / "dir")) == f"{tmp_path / 'dir'} is a directory"
    assert blocked(str(plain)) == f"{plain} is not executable"
    assert blocked(str(plain / "x")) == f"{plain} is not a directory"


def test_a_link_loop_ends(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    why = blocked(str(tmp_path / "a"))
    assert why is not None
    assert why.startswith(f"{tmp_path / 'a'}: too many levels of symbolic links")


def test_a_relative_program_is_taken_from_the_working_directory(tmp_path: Path) -> None:
    executable(tmp_path / "bin" / "tool")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert blocked("bin/tool") is None
        assert blocked("bin/nope") == f"{tmp_path / 'bin' / 'nope'}: No such file or directory"
    finally:
        os.chdir(cwd)
