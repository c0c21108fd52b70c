"""Run a command as another (real) unix user, with this checkout's Python reachable.

The venv's interpreter lives under ``sys.base_prefix`` (pyenv under ``/root``, 0700) and
the checkout itself may sit in a 0700 directory (a ``mktemp -d``, root's home): another
user could run neither. :func:`as_user` runs ``argv`` in a private mount namespace of its
own (``unshare --mount``), where each such ancestor is replaced by a root-owned 0755
stage holding only the needed paths, bound read-only as ever; then ``setpriv`` drops to
the user. Nothing changes outside that namespace. :func:`namespace_command` is the
same command for a caller that runs it itself (a long-lived process, more mounts).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "as_user",
    "namespace_command",
    "reachable_command",
    "reachable_dir",
    "stage_mounts",
    "unix_user",
]

ROOT = Path(__file__).resolve().parents[2]


def _traversable(path: Path) -> bool:
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _hidden() -> dict[Path, list[Path]]:
    """Each first non-traversable ancestor -> the paths under it another user must reach."""
    found: dict[Path, list[Path]] = {}
    for needed in (Path(sys.base_prefix).resolve(), ROOT):
        if _traversable(needed):
            continue
        for ancestor in reversed([needed, *needed.parents]):
            if not os.stat(ancestor).st_mode & stat.S_IXOTH:
                found.setdefault(ancestor, []).append(needed)
                break
    return found


def stage_mounts(stage: Path) -> list[str]:
    """Mount points under ``stage`` for what another user must reach, and the mounts to make.

    ``stage`` is root's and 0755; it may be used for many commands (the mount
    points are made once). Run the mounts, as root, in a private mount namespace.
    """
    lines: list[str] = []
    for i, (ancestor, paths) in enumerate(_hidden().items()):
        ancestor_stage = stage / str(i)
        ancestor_stage.mkdir(mode=0o755, exist_ok=True)
        for path in paths:
            inner = ancestor_stage / path.relative_to(ancestor)
            inner.mkdir(parents=True, exist_ok=True)
            for p in [inner, *inner.parents]:
                if p == stage:
                    break
                os.chmod(p, 0o755)
            lines.append(f"mount --bind {shlex.quote(str(path))} {shlex.quote(str(inner))}")
        lines.append(
            f"mount --rbind {shlex.quote(str(ancestor_stage))} {shlex.quote(str(ancestor))}"
        )
    return lines


def namespace_command(
    uid: int,
    gid: int,
    argv: Sequence[str],
    *,
    stage: Path,
    binds: Sequence[tuple[Path, Path | str]] = (),
) -> list[str]:
    """The command that runs ``argv`` as ``uid:gid`` in a mount namespace of its own.

    Inside it, this checkout and its Python are reachable (see :func:`stage_mounts`)
    and each ``(source, target)`` of ``binds`` is bound on ``target``; then
    ``setpriv`` drops to the user. Run it as root.
    """
    lines = ["set -e", *stage_mounts(stage)]
    lines += [f"mount --bind {shlex.quote(str(a))} {shlex.quote(str(b))}" for a, b in binds]
    lines.append(f'exec setpriv --reuid={uid} --regid={gid} --clear-groups -- "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", "\n".join(lines), "as-user", *argv]  # fmt: skip


def reachable_command(argv: Sequence[str], *, stage: Path) -> list[str]:
    """``argv``, still as root, in a mount namespace where other users reach this checkout.

    For a root process that starts children as other users itself (the gateway with
    ``upstreams.NAME.user``): those children find this checkout's Python.
    """
    lines = ["set -e", *stage_mounts(stage), 'exec "$@"']
    return ["unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", "\n".join(lines), "reachable", *argv]  # fmt: skip


def as_user(
    user: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``argv`` as ``user``; stdout and stderr captured as text."""
    info = pwd.getpwnam(user)
    with tempfile.TemporaryDirectory(prefix="zr-stage-") as stages:
        os.chmod(stages, 0o755)
        command = namespace_command(info.pw_uid, info.pw_gid, argv, stage=Path(stages))
        run_env: dict[str, Any] = {"PATH": "/usr/bin:/bin", "HOME": "/", "USER": user}
        run_env.update(env or {})
        return subprocess.run(
            command, env=run_env, capture_output=True, text=True, timeout=timeout, check=False
        )


@contextmanager
def unix_user(prefix: str) -> Iterator[pwd.struct_passwd]:
    """A fresh unprivileged user (``useradd``, no home, no login shell); removed afterwards.

    Named ``prefix`` and a random suffix, so that parallel workers never share one;
    the tests run as root.
    """
    if os.geteuid() != 0:
        import pytest

        pytest.skip("creates a user with useradd: run as root (CI does)")
    name = prefix + secrets.token_hex(3)
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@contextmanager
def reachable_dir(prefix: str) -> Iterator[Path]:
    """A root-owned 0755 directory straight under /tmp, which every user may search;
    removed afterwards.

    Not under pytest's own temporary root, which is root's and 0700 (and whose mode
    another pytest run may restore at any moment): another user could reach nothing
    there, and a test of what that user can reach would pass falsely.
    """
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
